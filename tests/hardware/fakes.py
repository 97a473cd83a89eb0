"""A fake NVML that replaces the `pynvml` functions the NVIDIA probe calls."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

GIB = 1 << 30


@dataclass
class FakeDevice:
    name: str
    uuid: str
    memory_total_bytes: int
    memory_free_bytes: int
    bus_width_bits: int
    memory_clock_mhz: int
    sm_clock_mhz: int
    compute_capability: tuple[int, int]
    sm_count: int
    pcie_generation: int = 4
    pcie_width: int = 16
    display_active: bool = False
    mig_mode: int | None = None  # None: the board does not support MIG
    # NVML function names that raise NVMLError_NotSupported for this device.
    failing: set[str] = field(default_factory=set)


def rtx_3090(n: int, *, display: bool = False) -> FakeDevice:
    # 384-bit GDDR6X at 9751 MHz (NVML's max memory clock) -> 936 GB/s, as NVIDIA lists.
    return FakeDevice(
        name="NVIDIA GeForce RTX 3090",
        uuid=f"GPU-3090-000{n}",
        memory_total_bytes=24 * GIB,
        memory_free_bytes=23 * GIB,
        bus_width_bits=384,
        memory_clock_mhz=9751,
        sm_clock_mhz=2100,
        compute_capability=(8, 6),
        sm_count=82,
        display_active=display,
    )


def rtx_4060() -> FakeDevice:
    # 128-bit GDDR6 at 8501 MHz -> 272 GB/s.
    return FakeDevice(
        name="NVIDIA GeForce RTX 4060",
        uuid="GPU-4060-0000",
        memory_total_bytes=8 * GIB,
        memory_free_bytes=7 * GIB,
        bus_width_bits=128,
        memory_clock_mhz=8501,
        sm_clock_mhz=3105,
        compute_capability=(8, 9),
        sm_count=24,
    )


class FakeNvml:
    def __init__(
        self,
        devices: list[FakeDevice],
        *,
        driver: str = "550.54.15",
        cuda: int = 12040,
        init_error: BaseException | None = None,
        hang: threading.Event | None = None,
    ) -> None:
        self.devices = devices
        self.driver = driver
        self.cuda = cuda
        self.init_error = init_error
        self.hang = hang
        self.init_calls = 0
        self.shutdown_calls = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
        for name in dir(self):
            if name.startswith("nvml"):
                monkeypatch.setattr(pynvml, name, getattr(self, name))
        return self

    def _device(self, handle: int, call: str) -> FakeDevice:
        device = self.devices[handle]
        if call in device.failing:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return device

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.hang is not None:
            self.hang.wait(10)
        if self.init_error is not None:
            raise self.init_error

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._device(index, "nvmlDeviceGetHandleByIndex")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._device(handle, "nvmlDeviceGetName").name

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._device(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        d = self._device(handle, "nvmlDeviceGetMemoryInfo")
        used = d.memory_total_bytes - d.memory_free_bytes
        return SimpleNamespace(total=d.memory_total_bytes, free=d.memory_free_bytes, used=used)

    def nvmlDeviceGetMemoryBusWidth(self, handle: int) -> int:
        return self._device(handle, "nvmlDeviceGetMemoryBusWidth").bus_width_bits

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock: int) -> int:
        d = self._device(handle, "nvmlDeviceGetMaxClockInfo")
        if clock == pynvml.NVML_CLOCK_MEM:
            return d.memory_clock_mhz
        if clock == pynvml.NVML_CLOCK_SM:
            return d.sm_clock_mhz
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return self._device(handle, "nvmlDeviceGetCudaComputeCapability").compute_capability

    def nvmlDeviceGetAttributes(self, handle: int) -> Any:
        d = self._device(handle, "nvmlDeviceGetAttributes")
        return SimpleNamespace(multiprocessorCount=d.sm_count)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return self._device(handle, "nvmlDeviceGetMaxPcieLinkGeneration").pcie_generation

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return self._device(handle, "nvmlDeviceGetMaxPcieLinkWidth").pcie_width

    def nvmlDeviceGetDisplayActive(self, handle: int) -> int:
        d = self._device(handle, "nvmlDeviceGetDisplayActive")
        return int(
            pynvml.NVML_FEATURE_ENABLED if d.display_active else pynvml.NVML_FEATURE_DISABLED
        )

    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        d = self._device(handle, "nvmlDeviceGetMigMode")
        if d.mig_mode is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [d.mig_mode, d.mig_mode]
