from __future__ import annotations

import sys

import pynvml
import pytest

from rigspark_gui.core.rig import Basis, Vendor
from rigspark_gui.hardware.nvidia import NVML_NOT_FOUND_NOTE, memory_bandwidth_gbps, probe_nvidia

from .fakes import GIB, FakeNvml, rtx_3090, rtx_4060


@pytest.mark.parametrize(
    ("bus_bits", "clock_mhz", "spec_gbps"),
    [
        (384, 10501, 1008.0),  # RTX 4090: NVIDIA lists 1008 GB/s
        (5120, 2619, 3352.0),  # H100 SXM5: NVIDIA lists 3.35 TB/s
        (384, 9751, 936.2),  # RTX 3090: 936 GB/s
        (128, 8501, 272.0),  # RTX 4060: 272 GB/s
    ],
)
def test_bandwidth_from_bus_width_and_clock_matches_spec_sheets(
    bus_bits: int, clock_mhz: int, spec_gbps: float
) -> None:
    assert memory_bandwidth_gbps(bus_bits, clock_mhz) == pytest.approx(spec_gbps, abs=0.5)


def test_reads_every_device(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([rtx_3090(0, display=True), rtx_3090(1), rtx_4060()]).install(monkeypatch)

    result = probe_nvidia()

    assert fake.shutdown_calls == 1
    assert result.driver_version == "550.54.15"
    assert result.cuda_version == "12.4"
    assert [d.name for d in result.devices] == [
        "NVIDIA GeForce RTX 3090",
        "NVIDIA GeForce RTX 3090",
        "NVIDIA GeForce RTX 4060",
    ]
    first, _, last = result.devices
    assert first.bandwidth_gbps == pytest.approx(936.0, abs=0.5)
    assert last.bandwidth_gbps == pytest.approx(272.0, abs=0.5)
    assert first.sm_count == 82 and first.sm_clock_max_mhz == 2100
    assert first.compute_capability == "8.6" and last.compute_capability == "8.9"
    assert first.mig_enabled is None  # GeForce boards do not support MIG

    gpus = result.gpus
    assert [g.index for g in gpus] == [0, 1, 2]
    assert all(g.vendor is Vendor.NVIDIA and not g.unified for g in gpus)
    assert gpus[0].memory_total_bytes == 24 * GIB and gpus[0].memory_free_bytes == 23 * GIB
    assert gpus[0].uuid == "GPU-3090-0000"
    assert (gpus[0].pcie_generation, gpus[0].pcie_width) == (4, 16)
    assert gpus[0].display_attached is True and gpus[1].display_attached is False
    for field in ("memory_total_bytes", "memory_free_bytes", "bandwidth_gbps", "uuid"):
        assert gpus[2].basis_of(field).basis is Basis.MEASURED
        assert "NVML" in gpus[2].basis_of(field).source
    assert gpus[0].fp16_tflops is None  # NVML does not report it; the database fills it
    assert result.notes[0] == "3 NVIDIA GPUs found (driver 550.54.15, CUDA 12.4)"
    assert any("GPU 0" in n and "display" in n for n in result.notes)


def test_a_failing_call_degrades_only_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    flaky = rtx_4060()
    flaky.failing = {"nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetDisplayActive"}
    FakeNvml([rtx_3090(0), flaky]).install(monkeypatch)

    good, bad = probe_nvidia().gpus

    assert good.bandwidth_gbps is not None and good.display_attached is False
    assert bad.bandwidth_gbps is None
    assert bad.basis_of("bandwidth_gbps").basis is Basis.UNKNOWN
    assert "Not Supported" in bad.basis_of("bandwidth_gbps").source
    assert bad.display_attached is None
    assert bad.basis_of("display_attached").basis is Basis.UNKNOWN
    # Everything else on the flaky board is still read.
    assert bad.memory_total_bytes == 8 * GIB
    assert bad.basis_of("memory_total_bytes").basis is Basis.MEASURED
    assert bad.compute_capability == "8.9"


def test_failing_memory_info_leaves_memory_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    board = rtx_3090(0)
    board.failing = {"nvmlDeviceGetMemoryInfo"}
    FakeNvml([board]).install(monkeypatch)

    (gpu,) = probe_nvidia().gpus

    assert gpu.memory_total_bytes is None and gpu.memory_free_bytes is None
    assert gpu.basis_of("memory_free_bytes").basis is Basis.UNKNOWN
    assert gpu.bandwidth_gbps == pytest.approx(936.0, abs=0.5)


def test_device_without_handle_is_skipped_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    lost = rtx_3090(1)
    lost.failing = {"nvmlDeviceGetHandleByIndex"}
    fake = FakeNvml([rtx_3090(0), lost, rtx_4060()]).install(monkeypatch)

    result = probe_nvidia()

    assert [d.index for d in result.devices] == [0, 2]
    assert any("GPU 1 skipped" in n for n in result.notes)
    assert fake.shutdown_calls == 1


def test_mig_enabled_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    board = rtx_3090(0)
    board.name = "NVIDIA H100 80GB HBM3"
    board.mig_mode = pynvml.NVML_DEVICE_MIG_ENABLE
    FakeNvml([board]).install(monkeypatch)

    result = probe_nvidia()

    assert result.devices[0].mig_enabled is True
    assert any("MIG enabled" in n for n in result.notes)


@pytest.mark.parametrize(
    "error", [pynvml.NVMLError_LibraryNotFound(), pynvml.NVMLError_DriverNotLoaded()]
)
def test_missing_library_or_driver_means_no_gpus(
    monkeypatch: pytest.MonkeyPatch, error: pynvml.NVMLError
) -> None:
    fake = FakeNvml([rtx_3090(0)], init_error=error).install(monkeypatch)

    result = probe_nvidia()

    assert result.devices == ()
    assert result.notes == (NVML_NOT_FOUND_NOTE,)
    assert fake.shutdown_calls == 0  # NVML never started


def test_missing_python_binding_means_no_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise

    result = probe_nvidia()

    assert result.devices == () and result.notes == (NVML_NOT_FOUND_NOTE,)


def test_other_init_failure_is_a_note_not_an_exception(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeNvml([], init_error=pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)).install(monkeypatch)

    result = probe_nvidia()

    assert result.devices == ()
    assert result.notes[0].startswith("NVIDIA probe failed")


def test_no_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml([]).install(monkeypatch)

    result = probe_nvidia()

    assert result.devices == () and fake.shutdown_calls == 1
    assert result.notes == ("no NVIDIA GPUs (NVML found no devices)",)
