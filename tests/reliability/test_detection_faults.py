"""Failing drivers: every NVML and psutil call in turn raises, hangs or answers nonsense.

Detection must finish, the figure that failed must read `unknown` with the reason, and a
plan must still come out of whatever remains.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pynvml
import pytest
from hardware.fakes import GIB, FakeNvml, rtx_3090

from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import Basis, Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.formats.rig import read_rig, rig_json
from rigspark_gui.hardware import cpu as cpu_probe
from rigspark_gui.hardware import nvidia
from rigspark_gui.hardware.detect import detect
from rigspark_gui.resources import data_file

# NVML call -> the NvidiaDevice fields that depend on it alone.
DEVICE_CALLS: dict[str, tuple[str, ...]] = {
    "nvmlDeviceGetName": ("name",),
    "nvmlDeviceGetUUID": ("uuid",),
    "nvmlDeviceGetMemoryInfo": ("memory_total_bytes", "memory_free_bytes"),
    "nvmlDeviceGetMemoryBusWidth": ("memory_bus_width_bits", "bandwidth_gbps"),
    "nvmlDeviceGetMaxClockInfo": ("memory_clock_max_mhz", "sm_clock_max_mhz", "bandwidth_gbps"),
    "nvmlDeviceGetCudaComputeCapability": ("compute_capability",),
    "nvmlDeviceGetAttributes": ("sm_count",),
    "nvmlDeviceGetMaxPcieLinkGeneration": ("pcie_generation",),
    "nvmlDeviceGetMaxPcieLinkWidth": ("pcie_width",),
    "nvmlDeviceGetDisplayActive": ("display_attached",),
    "nvmlDeviceGetMigMode": ("mig_enabled",),
}
# Calls whose failure costs more than one figure: a note says what happened.
WHOLE_CALLS = (
    "nvmlInit",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlShutdown",
)
ALL_CALLS = (*WHOLE_CALLS, *DEVICE_CALLS)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Frees deliberately hung probe threads when the test ends."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture(scope="module")
def planning() -> tuple[Any, Any, Any]:
    catalog = load_catalog()
    spec = next(e for e in catalog.entries if e.id == "llama-3.1-8b-instruct").to_spec()
    return spec, load_perf(), load_gpu_database(data_file("gpus.json"))


def fake_nvml(monkeypatch: pytest.MonkeyPatch, call: str, behave: Callable[..., Any]) -> None:
    """A working one-GPU NVML in which `call` is replaced by `behave`."""
    FakeNvml([rtx_3090(0)]).install(monkeypatch)
    real = getattr(pynvml, call)
    monkeypatch.setattr(pynvml, call, lambda *a, **k: behave(real, *a, **k))


def run_detect(tmp_path: Path, database: Any = None, timeout_s: float = 5.0) -> Rig:
    start = time.monotonic()
    rig = detect(
        database=database, timeout_s=timeout_s, models_dir=tmp_path, sysfs_root=tmp_path / "none"
    )
    assert time.monotonic() - start < timeout_s + 1.5
    return read_rig(json.loads(rig_json(rig)))  # what detection gives is a valid rig


def assert_plans(rig: Rig, planning: tuple[Any, Any, Any]) -> None:
    spec, perf, _ = planning
    p = plan(spec, rig, PlanSettings(context=4096), perf, kv_pairs="common")
    assert p.paths  # at least the CPU path is planned from what remains


def _raise(_real: Any, *_a: Any, **_k: Any) -> Any:
    raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)


@pytest.mark.parametrize("call", ALL_CALLS)
def test_each_nvml_call_failing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, planning: tuple[Any, Any, Any], call: str
) -> None:
    fake_nvml(monkeypatch, call, _raise)

    result = nvidia.probe_nvidia()
    for field in DEVICE_CALLS.get(call, ()):
        (device,) = result.devices
        prov = device.provenance[field]
        assert prov.basis is Basis.UNKNOWN, field
        assert prov.source.startswith("NVML"), prov.source
    if call in WHOLE_CALLS:
        assert any("NVML" in n or "NVIDIA" in n for n in result.notes), result.notes

    rig = run_detect(tmp_path, database=planning[2])
    assert rig.ram_total_bytes > 0
    assert_plans(rig, planning)


@pytest.mark.parametrize("call", ALL_CALLS)
def test_each_nvml_call_hanging(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    planning: tuple[Any, Any, Any],
    release: threading.Event,
    call: str,
) -> None:
    def hang(real: Any, *a: Any, **k: Any) -> Any:
        release.wait(30)
        return real(*a, **k)

    fake_nvml(monkeypatch, call, hang)

    rig = run_detect(tmp_path, timeout_s=0.2)

    assert "NVIDIA probe timed out after 0.2 s" in rig.notes
    assert rig.gpus == ()
    assert rig.ram_total_bytes > 0  # the CPU probe answered meanwhile
    assert_plans(rig, planning)


def _memory(total: Any, free: Any) -> Callable[..., Any]:
    return lambda _real, *_a: SimpleNamespace(total=total, free=free, used=0)


def _value(v: Any) -> Callable[..., Any]:
    return lambda _real, *_a: v


NONSENSE: dict[str, tuple[str, Callable[..., Any], tuple[str, ...]]] = {
    "zero memory": ("nvmlDeviceGetMemoryInfo", _memory(0, 0), ("memory_total_bytes",)),
    "negative memory": ("nvmlDeviceGetMemoryInfo", _memory(-GIB, -GIB), ("memory_total_bytes",)),
    "negative free": ("nvmlDeviceGetMemoryInfo", _memory(24 * GIB, -1), ("memory_total_bytes",)),
    "free twice the total": (
        "nvmlDeviceGetMemoryInfo",
        _memory(24 * GIB, 48 * GIB),
        ("memory_free_bytes",),
    ),
    "2^80 bytes": ("nvmlDeviceGetMemoryInfo", _memory(1 << 80, 1 << 80), ("memory_total_bytes",)),
    "no memory fields": (
        "nvmlDeviceGetMemoryInfo",
        lambda _real, *_a: object(),
        ("memory_total_bytes",),
    ),
    "zero bus width": ("nvmlDeviceGetMemoryBusWidth", _value(0), ("bandwidth_gbps",)),
    "negative bus width": ("nvmlDeviceGetMemoryBusWidth", _value(-384), ("bandwidth_gbps",)),
    "absurd clock": ("nvmlDeviceGetMaxClockInfo", _value(10**9), ("bandwidth_gbps",)),
    "negative clock": ("nvmlDeviceGetMaxClockInfo", _value(-9751), ("bandwidth_gbps",)),
    "text clock": ("nvmlDeviceGetMaxClockInfo", _value("fast"), ("bandwidth_gbps",)),
    "bad capability": (
        "nvmlDeviceGetCudaComputeCapability",
        _value((-1, "x")),
        ("compute_capability",),
    ),
    "capability not a pair": (
        "nvmlDeviceGetCudaComputeCapability",
        _value(None),
        ("compute_capability",),
    ),
    "PCIe gen 99": ("nvmlDeviceGetMaxPcieLinkGeneration", _value(99), ("pcie_generation",)),
    "negative PCIe width": ("nvmlDeviceGetMaxPcieLinkWidth", _value(-16), ("pcie_width",)),
    "negative SM count": (
        "nvmlDeviceGetAttributes",
        _value(SimpleNamespace(multiprocessorCount=-1)),
        ("sm_count",),
    ),
    "undecodable name": ("nvmlDeviceGetName", _value(b"\xff\xfe\x00GPU"), ()),
    "empty name": ("nvmlDeviceGetName", _value("   "), ()),
    "negative device count": ("nvmlDeviceGetCount", _value(-1), ()),
    "a million devices": ("nvmlDeviceGetCount", _value(10**6), ()),
    "negative CUDA version": ("nvmlSystemGetCudaDriverVersion", _value(-1), ()),
}


@pytest.mark.parametrize("case", NONSENSE)
def test_nvml_nonsense_becomes_unknown(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, planning: tuple[Any, Any, Any], case: str
) -> None:
    call, behave, fields = NONSENSE[case]
    fake_nvml(monkeypatch, call, behave)

    result = nvidia.probe_nvidia()
    for field in fields:
        (device,) = result.devices
        prov = device.provenance[field]
        assert prov.basis is Basis.UNKNOWN, (field, prov)
        assert prov.source.startswith("NVML"), prov.source
        assert getattr(device, field) is None

    for database in (None, planning[2]):
        rig = run_detect(tmp_path, database=database)
        for gpu in rig.gpus:
            assert gpu.name.strip() and gpu.name.isprintable()
            assert gpu.memory_total_bytes is None or gpu.memory_total_bytes > 0
            assert gpu.bandwidth_gbps is None or gpu.bandwidth_gbps < 100_000
        assert_plans(rig, planning)


def test_free_a_hair_above_total_is_clamped(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvml(monkeypatch, "nvmlDeviceGetMemoryInfo", _memory(24 * GIB, 24 * GIB + 4096))

    (device,) = nvidia.probe_nvidia().devices

    assert device.memory_free_bytes == device.memory_total_bytes == 24 * GIB
    assert device.provenance["memory_free_bytes"].basis is Basis.MEASURED


# --------------------------------------------------------------------------- psutil


def _no_nvidia(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nvidia, "probe_nvidia", lambda: nvidia.NvidiaProbeResult())


def _vm(total: Any, available: Any) -> Callable[[], Any]:
    return lambda: SimpleNamespace(total=total, available=available)


def _broken(*_a: Any, **_k: Any) -> Any:
    raise OSError("psutil exploded")


PSUTIL_FAULTS: dict[str, tuple[str, Callable[..., Any], str]] = {
    "virtual_memory raises": ("virtual_memory", _broken, "ram_total_bytes"),
    "zero RAM": ("virtual_memory", _vm(0, 0), "ram_total_bytes"),
    "negative RAM": ("virtual_memory", _vm(-GIB, -GIB), "ram_total_bytes"),
    "RAM as text": ("virtual_memory", _vm("lots", 1), "ram_total_bytes"),
    "2^80 bytes of RAM": ("virtual_memory", _vm(1 << 80, 1 << 80), "ram_total_bytes"),
    "negative available": ("virtual_memory", _vm(64 * GIB, -5), "ram_available_bytes"),
    "disk_usage raises": ("disk_usage", _broken, "disk_free_bytes"),
    "negative free disk": (
        "disk_usage",
        lambda _p: SimpleNamespace(free=-1, total=1, used=2),
        "disk_free_bytes",
    ),
    "disk_usage without free": ("disk_usage", lambda _p: object(), "disk_free_bytes"),
}


@pytest.mark.parametrize("case", PSUTIL_FAULTS)
def test_psutil_faults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, planning: tuple[Any, Any, Any], case: str
) -> None:
    name, behave, field = PSUTIL_FAULTS[case]
    _no_nvidia(monkeypatch)
    monkeypatch.setattr(psutil, name, behave)

    rig = run_detect(tmp_path)

    prov = rig.provenance[field]
    assert prov.basis is Basis.UNKNOWN
    assert "psutil" in prov.source or prov.source == "not detected"
    assert getattr(rig, field) in (None, 0)
    assert_plans(rig, planning)


def test_available_above_total_is_clamped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(psutil, "virtual_memory", _vm(16 * GIB, 17 * GIB))

    result = cpu_probe.probe_cpu(tmp_path)

    assert result.ram_available_bytes == result.ram_total_bytes == 16 * GIB


@pytest.mark.parametrize("count", [-1, 0, None, "eight", 10**9])
def test_cpu_count_nonsense(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    planning: tuple[Any, Any, Any],
    count: Any,
) -> None:
    _no_nvidia(monkeypatch)
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: count)

    rig = run_detect(tmp_path)

    assert rig.cpu.cores is None and rig.cpu.threads is None
    assert rig.cpu.basis_of("cores").basis is Basis.UNKNOWN
    assert rig.cpu.basis_of("threads").source.startswith("psutil")
    assert_plans(rig, planning)


def test_every_psutil_call_failing_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, planning: tuple[Any, Any, Any]
) -> None:
    _no_nvidia(monkeypatch)
    for name in ("virtual_memory", "disk_usage", "cpu_count"):
        monkeypatch.setattr(psutil, name, _broken)

    rig = run_detect(tmp_path)

    assert rig.ram_total_bytes == 0
    assert rig.provenance["ram_total_bytes"].basis is Basis.UNKNOWN
    assert "RAM size could not be detected" in rig.notes
    assert_plans(rig, planning)
