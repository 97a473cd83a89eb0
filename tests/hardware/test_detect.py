from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path

import pytest

from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.core.rig import GIB, Basis, Rig, Vendor
from rigspark_gui.formats.rig import read_rig
from rigspark_gui.hardware import amd, apple, nvidia
from rigspark_gui.hardware.detect import detect, to_json
from rigspark_gui.hardware.nvidia import NvidiaProbeResult

from .fakes import FakeNvml, rtx_3090, rtx_4060


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event that frees a deliberately hung probe thread when the test ends."""
    event = threading.Event()
    yield event
    event.set()


def test_detects_this_machine(tmp_path: Path) -> None:
    rig = detect(models_dir=tmp_path)

    assert isinstance(rig, Rig)
    assert rig.ram_total_bytes > 0
    assert rig.provenance["ram_total_bytes"].basis is Basis.MEASURED
    assert rig.disk_free_bytes is not None
    nvidia_gpus = [g for g in rig.gpus if g.vendor is Vendor.NVIDIA]
    if not nvidia_gpus:  # the build machine has no NVIDIA driver
        assert any("NVML" in note for note in rig.notes)
    assert read_rig(json.loads(to_json(rig))) == rig


def test_fake_nvml_gpus_are_filled_from_the_database(
    monkeypatch: pytest.MonkeyPatch, gpu_db_path: Path, tmp_path: Path
) -> None:
    FakeNvml([rtx_3090(0), rtx_3090(1), rtx_4060()]).install(monkeypatch)

    rig = detect(
        database=load_gpu_database(gpu_db_path),
        models_dir=tmp_path,
        sysfs_root=tmp_path / "no-sysfs",
    )

    assert [g.name for g in rig.gpus] == [
        "NVIDIA GeForce RTX 3090",
        "NVIDIA GeForce RTX 3090",
        "NVIDIA GeForce RTX 4060",
    ]
    assert len(rig.discrete_gpus) == 3
    gpu = rig.gpus[2]
    assert gpu.bandwidth_gbps == pytest.approx(272.0, abs=0.5)
    assert gpu.basis_of("bandwidth_gbps").basis is Basis.MEASURED
    assert gpu.fp16_tflops == 30.2 and gpu.basis_of("fp16_tflops").basis is Basis.SPEC
    assert rig.notes[0] == "3 NVIDIA GPUs found (driver 550.54.15, CUDA 12.4)"
    assert not rig.unified_memory


def test_a_hanging_probe_becomes_a_note(
    monkeypatch: pytest.MonkeyPatch, release: threading.Event, tmp_path: Path
) -> None:
    FakeNvml([rtx_3090(0)], hang=release).install(monkeypatch)

    start = time.monotonic()
    rig = detect(timeout_s=0.3, models_dir=tmp_path)

    assert time.monotonic() - start < 2.0
    assert "NVIDIA probe timed out after 0.3 s" in rig.notes
    assert rig.ram_total_bytes > 0  # the other probes still answered


def test_a_raising_probe_becomes_a_note(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken() -> NvidiaProbeResult:
        raise RuntimeError("segfault averted")

    monkeypatch.setattr(nvidia, "probe_nvidia", broken)

    rig = detect(models_dir=tmp_path)

    assert "NVIDIA probe failed: segfault averted" in rig.notes
    assert rig.ram_total_bytes > 0


def test_amd_from_sysfs_on_linux(
    monkeypatch: pytest.MonkeyPatch, gpu_db_path: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(nvidia, "probe_nvidia", lambda: NvidiaProbeResult())
    device = tmp_path / "sys" / "class" / "drm" / "card0" / "device"
    device.mkdir(parents=True)
    for name, text in {
        "vendor": "0x1002",
        "device": "0x744c",
        "mem_info_vram_total": str(24 * GIB),
        "mem_info_vram_used": str(GIB),
    }.items():
        (device / name).write_text(text, encoding="utf-8")

    rig = detect(
        database=load_gpu_database(gpu_db_path),
        system="Linux",
        sysfs_root=tmp_path / "sys",
        models_dir=tmp_path,
    )

    (gpu,) = rig.gpus
    assert gpu.name == "Radeon RX 7900 XTX" and gpu.vendor is Vendor.AMD
    assert gpu.memory_free_bytes == 23 * GIB
    assert gpu.bandwidth_gbps == 960.0 and gpu.basis_of("bandwidth_gbps").basis is Basis.SPEC


def test_apple_silicon_is_unified(
    monkeypatch: pytest.MonkeyPatch, gpu_db_path: Path, tmp_path: Path
) -> None:
    def sysctl(args: Sequence[str], timeout_s: float) -> str:
        return "Apple M2 Ultra\n206158430208\n"

    monkeypatch.setattr(nvidia, "probe_nvidia", lambda: NvidiaProbeResult())
    monkeypatch.setattr(apple, "probe_apple", partial(apple.probe_apple, sysctl))
    sysfs_calls: list[object] = []
    monkeypatch.setattr(amd, "probe_sysfs_gpus", lambda *a, **k: sysfs_calls.append(a))

    rig = detect(database=load_gpu_database(gpu_db_path), system="Darwin", models_dir=tmp_path)

    assert rig.unified_memory
    assert sysfs_calls == []  # sysfs is Linux only
    (gpu,) = rig.gpus
    assert gpu.unified and gpu.vendor is Vendor.APPLE
    assert gpu.memory_total_bytes == 144 * GIB  # the working-set limit, not 192 GiB
    assert "working set" in gpu.basis_of("memory_total_bytes").source
    assert gpu.bandwidth_gbps == 800.0
    assert rig.discrete_gpus == ()


def test_bandwidth_probe_on_request(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from rigspark_gui.hardware import bandwidth_probe, core_probe

    calls: list[int] = []
    real = bandwidth_probe.measure_ram_bandwidth

    def small() -> bandwidth_probe.BandwidthResult:
        calls.append(1)
        return real(8 * (1 << 20), threads=1, repeats=2, check_busy=False)

    monkeypatch.setattr(bandwidth_probe, "MAX_SPREAD", 1e9)  # a tiny buffer times noisily

    monkeypatch.setattr(bandwidth_probe, "measure_ram_bandwidth", small)
    # on a VM host the measurement also times the vCPUs: kept short here
    monkeypatch.setattr(core_probe, "SLICE_S", 0.02)
    monkeypatch.setattr(core_probe, "ROUND_PAUSE_S", 0.0)

    without = detect(models_dir=tmp_path)
    with_bw = detect(models_dir=tmp_path, probe_bandwidth=True)

    assert without.cpu.memory_bandwidth_gbps is None and calls == [1]
    assert with_bw.cpu.memory_bandwidth_gbps is not None
    assert with_bw.cpu.basis_of("memory_bandwidth_gbps").basis is Basis.MEASURED
    # the next start takes this machine's figure from the cache, without measuring
    later = detect(models_dir=tmp_path)
    assert later.cpu.memory_bandwidth_gbps == with_bw.cpu.memory_bandwidth_gbps
    assert "cached for this machine" in later.cpu.basis_of("memory_bandwidth_gbps").source
    assert calls == [1]
    assert detect(models_dir=tmp_path, cached_bandwidth=False).cpu.memory_bandwidth_gbps is None
