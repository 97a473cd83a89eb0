"""NVIDIA GPUs through NVML (`pynvml`).

Every NVML call is wrapped on its own: a call a driver or board does not support
(laptop GPUs, old drivers, MIG instances) leaves only that one figure unknown, with
the NVML error as the reason. A machine without the library or the driver simply has
no NVIDIA GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from rigspark_gui.core.rig import Basis, Gpu, Provenance, Vendor

NVML_NOT_FOUND_NOTE = "no NVIDIA GPUs (NVML not found)"
_NVML = "NVML"
# Gpu fields that this probe reads from NVML; anything else on NvidiaDevice is extra
# detail (SM count, clocks, MIG) that the Rig model has no field for yet.
_GPU_FIELDS = (
    "name",
    "vendor",
    "uuid",
    "memory_total_bytes",
    "memory_free_bytes",
    "bandwidth_gbps",
    "compute_capability",
    "pcie_generation",
    "pcie_width",
    "display_attached",
)

T = TypeVar("T")


def memory_bandwidth_gbps(bus_width_bits: int, memory_clock_mhz: float) -> float:
    """Peak memory bandwidth from NVML's bus width and maximum memory clock.

    NVML reports the memory clock at the DDR command rate; data moves on both clock
    edges, hence ×2. Checks against spec sheets: RTX 4090 (384-bit, 10501 MHz) gives
    1008 GB/s; H100 SXM (5120-bit, 2619 MHz) gives 3352 GB/s.
    """
    return bus_width_bits / 8 * memory_clock_mhz * 1e6 * 2 / 1e9


@dataclass(frozen=True, slots=True, kw_only=True)
class NvidiaDevice:
    """One NVML device with everything NVML told us, including what `Gpu` cannot hold."""

    index: int
    name: str
    uuid: str | None = None
    memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_bus_width_bits: int | None = None
    memory_clock_max_mhz: int | None = None
    bandwidth_gbps: float | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    sm_clock_max_mhz: int | None = None
    pcie_generation: int | None = None
    pcie_width: int | None = None
    display_attached: bool | None = None
    mig_enabled: bool | None = None
    provenance: dict[str, Provenance] = field(default_factory=dict)

    def to_gpu(self) -> Gpu:
        free = self.memory_free_bytes
        if free is not None and self.memory_total_bytes is not None:
            # NVML can report free a hair above total on some boards; Gpu forbids it.
            free = min(free, self.memory_total_bytes)
        return Gpu(
            name=self.name,
            vendor=Vendor.NVIDIA,
            index=self.index,
            memory_total_bytes=self.memory_total_bytes,
            memory_free_bytes=free,
            bandwidth_gbps=self.bandwidth_gbps or None,
            uuid=self.uuid,
            compute_capability=self.compute_capability,
            pcie_generation=self.pcie_generation,
            pcie_width=self.pcie_width,
            display_attached=self.display_attached,
            provenance={k: v for k, v in self.provenance.items() if k in _GPU_FIELDS},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class NvidiaProbeResult:
    devices: tuple[NvidiaDevice, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        return tuple(d.to_gpu() for d in self.devices)


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return f"NVML: {text}"


# Ranges a real board stays inside; a driver answering outside them is broken, and its
# figure must not reach a plan (a negative size would fail validation, a huge clock
# would promise impossible speed). Generous on purpose: only nonsense is refused.
_MAX_MEMORY_BYTES = 1 << 44  # 16 TiB
_MAX_BUS_WIDTH_BITS = 16384
_MAX_CLOCK_MHZ = 100_000
_MAX_PCIE_GENERATION = 16
_MAX_PCIE_WIDTH = 64
_MAX_SM_COUNT = 10_000
_MAX_DEVICES = 64


class _Nonsense(ValueError):
    """An NVML answer outside what any board reports."""


def _in_range(value: Any, lo: int, hi: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value)
        except (TypeError, ValueError, OverflowError):
            raise _Nonsense(f"{what} is not a number ({value!r:.40})") from None
    if not lo <= value <= hi:
        raise _Nonsense(f"{what} {value} is out of range")
    return int(value)


def _memory_info(info: Any) -> tuple[int, int]:
    total = _in_range(getattr(info, "total", None), 1, _MAX_MEMORY_BYTES, "total memory")
    free = _in_range(getattr(info, "free", None), 0, _MAX_MEMORY_BYTES, "free memory")
    return total, free


def _capability(value: Any) -> str:
    try:
        major, minor = value
    except (TypeError, ValueError):
        raise _Nonsense(f"compute capability {value!r:.40} is not (major, minor)") from None
    return f"{_in_range(major, 1, 99, 'major')}.{_in_range(minor, 0, 99, 'minor')}"


class _FieldReader:
    """Calls NVML for one device and records, per field, measured or why unknown."""

    def __init__(self) -> None:
        self.provenance: dict[str, Provenance] = {}

    def read(self, field: str, call: Callable[[], T], source: str = _NVML) -> T | None:
        try:
            value = call()
        except Exception as exc:  # any NVML failure costs only this field
            self.provenance[field] = Provenance(basis=Basis.UNKNOWN, source=_reason(exc))
            return None
        self.provenance[field] = Provenance(basis=Basis.MEASURED, source=source)
        return value

    def unknown(self, field: str, reason: str) -> None:
        self.provenance[field] = Provenance(basis=Basis.UNKNOWN, source=reason)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _cuda_version(encoded: int) -> str:
    # NVML encodes CUDA 12.4 as 12040.
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _read_device(nvml: Any, index: int) -> NvidiaDevice:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    r = _FieldReader()

    name = r.read("name", lambda: _text(nvml.nvmlDeviceGetName(handle)))
    # Shown in the window and matched against the database: printable text only.
    name = "".join(ch if ch.isprintable() else "?" for ch in name or "").strip()[:200]
    name = name or f"NVIDIA GPU {index}"
    uuid = r.read("uuid", lambda: _text(nvml.nvmlDeviceGetUUID(handle)))

    memory = r.read(
        "memory_total_bytes", lambda: _memory_info(nvml.nvmlDeviceGetMemoryInfo(handle))
    )
    total, free = memory if memory is not None else (None, None)
    # One call gives both figures, so both share its outcome.
    r.provenance["memory_free_bytes"] = r.provenance["memory_total_bytes"]
    if total is not None and free is not None and free > total:
        # Some boards report free a hair above total (within 1%): clamp that; beyond it the
        # free figure is nonsense and the plan falls back to the total.
        if free - total <= total // 100:
            free = total
        else:
            free = None
            r.unknown("memory_free_bytes", "NVML: reported more free memory than the total")

    bus_bits = r.read(
        "memory_bus_width_bits",
        lambda: _in_range(
            nvml.nvmlDeviceGetMemoryBusWidth(handle), 1, _MAX_BUS_WIDTH_BITS, "bus width"
        ),
    )
    mem_clock = r.read(
        "memory_clock_max_mhz",
        lambda: _in_range(
            nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM),
            1,
            _MAX_CLOCK_MHZ,
            "memory clock",
        ),
    )
    bandwidth: float | None = None
    if bus_bits and mem_clock:
        bandwidth = round(memory_bandwidth_gbps(bus_bits, mem_clock), 1)
        r.provenance["bandwidth_gbps"] = Provenance(
            basis=Basis.MEASURED, source="NVML: memory bus width × max memory clock × 2"
        )
    else:
        missing = "memory_bus_width_bits" if not bus_bits else "memory_clock_max_mhz"
        r.unknown("bandwidth_gbps", r.provenance[missing].source or "NVML reported 0")

    capability = r.read(
        "compute_capability",
        lambda: _capability(nvml.nvmlDeviceGetCudaComputeCapability(handle)),
    )
    sm_count = r.read(
        "sm_count",
        lambda: _in_range(
            nvml.nvmlDeviceGetAttributes(handle).multiprocessorCount, 1, _MAX_SM_COUNT, "SMs"
        ),
    )
    sm_clock = r.read(
        "sm_clock_max_mhz",
        lambda: _in_range(
            nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
            1,
            _MAX_CLOCK_MHZ,
            "SM clock",
        ),
    )
    pcie_gen = r.read(
        "pcie_generation",
        lambda: _in_range(
            nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle),
            1,
            _MAX_PCIE_GENERATION,
            "PCIe generation",
        ),
    )
    pcie_width = r.read(
        "pcie_width",
        lambda: _in_range(
            nvml.nvmlDeviceGetMaxPcieLinkWidth(handle), 1, _MAX_PCIE_WIDTH, "PCIe width"
        ),
    )
    display = r.read(
        "display_attached",
        lambda: nvml.nvmlDeviceGetDisplayActive(handle) == nvml.NVML_FEATURE_ENABLED,
    )
    mig = r.read(
        "mig_enabled",
        lambda: nvml.nvmlDeviceGetMigMode(handle)[0] == nvml.NVML_DEVICE_MIG_ENABLE,
    )

    return NvidiaDevice(
        index=index,
        name=name,
        uuid=uuid,
        memory_total_bytes=total,
        memory_free_bytes=free,
        memory_bus_width_bits=bus_bits,
        memory_clock_max_mhz=mem_clock,
        bandwidth_gbps=bandwidth,
        compute_capability=capability,
        sm_count=sm_count or None,
        sm_clock_max_mhz=sm_clock or None,
        pcie_generation=pcie_gen or None,
        pcie_width=pcie_width or None,
        display_attached=display,
        mig_enabled=mig,
        provenance={**r.provenance, "vendor": Provenance(basis=Basis.MEASURED, source=_NVML)},
    )


def _is_absent(nvml: Any, exc: BaseException) -> bool:
    absent = tuple(
        cls
        for cls in (
            getattr(nvml, "NVMLError_LibraryNotFound", None),
            getattr(nvml, "NVMLError_DriverNotLoaded", None),
        )
        if isinstance(cls, type)
    )
    return bool(absent) and isinstance(exc, absent)


def _device_notes(device: NvidiaDevice) -> list[str]:
    notes = []
    if device.mig_enabled:
        notes.append(
            f"GPU {device.index} ({device.name}) has MIG enabled: its memory is split "
            "among MIG instances, which this plan treats as one device"
        )
    if device.display_attached:
        notes.append(
            f"GPU {device.index} ({device.name}) drives a display: the desktop uses some "
            "of its memory"
        )
    return notes


def probe_nvidia(nvml: ModuleType | None = None) -> NvidiaProbeResult:
    """Read every NVIDIA device NVML can see; never raises for a missing driver."""
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return NvidiaProbeResult(notes=(NVML_NOT_FOUND_NOTE,))
        nvml = pynvml

    lib: Any = nvml
    try:
        lib.nvmlInit()
    except Exception as exc:
        if _is_absent(lib, exc):
            return NvidiaProbeResult(notes=(NVML_NOT_FOUND_NOTE,))
        return NvidiaProbeResult(notes=(f"NVIDIA probe failed: NVML did not start ({exc})",))

    notes: list[str] = []
    devices: list[NvidiaDevice] = []
    driver: str | None = None
    cuda: str | None = None
    try:
        try:
            driver = _text(lib.nvmlSystemGetDriverVersion())
        except Exception as exc:
            notes.append(f"NVIDIA driver version unknown ({_reason(exc)})")
        try:
            cuda = _cuda_version(
                _in_range(lib.nvmlSystemGetCudaDriverVersion(), 1000, 1_000_000, "CUDA version")
            )
        except Exception as exc:
            notes.append(f"CUDA driver version unknown ({_reason(exc)})")
        try:
            count = _in_range(lib.nvmlDeviceGetCount(), 0, 1 << 31, "device count")
        except Exception as exc:
            notes.append(f"NVIDIA probe failed: cannot count devices ({_reason(exc)})")
            count = 0
        if count > _MAX_DEVICES:
            notes.append(f"NVML reported {count} devices; reading the first {_MAX_DEVICES}")
            count = _MAX_DEVICES
        for index in range(count):
            try:
                device = _read_device(lib, index)
                device.to_gpu()  # a device the planner cannot take is reported, not kept
            except Exception as exc:  # no handle: the whole device is unreadable
                notes.append(f"NVIDIA GPU {index} skipped: {_reason(exc)}")
                continue
            devices.append(device)
            notes.extend(_device_notes(device))
    finally:
        try:
            lib.nvmlShutdown()
        except Exception as exc:
            notes.append(f"NVML shutdown failed: {_reason(exc)}")

    if devices:
        versions = ", ".join(
            part
            for part in (
                f"driver {driver}" if driver else "",
                f"CUDA {cuda}" if cuda else "",
            )
            if part
        )
        summary = f"{len(devices)} NVIDIA GPU{'s' if len(devices) != 1 else ''} found"
        notes.insert(0, f"{summary} ({versions})" if versions else summary)
    elif not notes:
        notes.append("no NVIDIA GPUs (NVML found no devices)")
    return NvidiaProbeResult(
        devices=tuple(devices), driver_version=driver, cuda_version=cuda, notes=tuple(notes)
    )
