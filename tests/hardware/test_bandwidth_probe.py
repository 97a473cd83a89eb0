from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigspark_gui.core.rig import MIB, Basis, Provenance
from rigspark_gui.hardware import bandwidth_cache, bandwidth_probe


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # the small buffers here sit in cache and time noisily: only the busy test judges
    monkeypatch.setattr(bandwidth_probe, "MAX_SPREAD", 1e9)
    bandwidth_probe.clear_cache()
    yield
    bandwidth_probe.clear_cache()


def test_measures_a_positive_bandwidth_and_caches_it() -> None:
    first = bandwidth_probe.measure_ram_bandwidth(16 * MIB, threads=2, repeats=3, check_busy=False)

    assert first.bandwidth_gbps > 0
    assert first.provenance.basis is Basis.MEASURED
    assert "read-only" in first.provenance.source and "median of" in first.provenance.source
    assert 1 <= first.runs <= 3 and first.threads == 2
    assert bandwidth_probe.measure_ram_bandwidth(16 * MIB, threads=2) is first


def test_time_budget_bounds_the_runs() -> None:
    start = time.perf_counter()
    result = bandwidth_probe.measure_ram_bandwidth(
        32 * MIB, threads=1, repeats=10_000, time_budget_s=0.2, check_busy=False
    )

    assert time.perf_counter() - start < 2.0
    assert 3 <= result.runs < 10_000


def test_rejects_a_useless_buffer() -> None:
    with pytest.raises(ValueError):
        bandwidth_probe.measure_ram_bandwidth(1024)


def test_a_busy_machine_is_said_and_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bandwidth_probe, "busy_percent", lambda: 93.0)

    busy = bandwidth_probe.measure_ram_bandwidth(8 * MIB, threads=1, repeats=3)

    assert busy.busy and "busy" in busy.reason and "unreliable" in busy.provenance.source
    monkeypatch.setattr(bandwidth_probe, "busy_percent", lambda: 3.0)
    again = bandwidth_probe.measure_ram_bandwidth(8 * MIB, threads=1, repeats=3)
    assert again is not busy and not again.busy


def test_runs_that_spread_too_far_are_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bandwidth_probe, "MAX_SPREAD", -1.0)  # any spread is too much

    result = bandwidth_probe.measure_ram_bandwidth(8 * MIB, threads=1, repeats=3, check_busy=False)

    assert result.busy and "spread" in result.reason


def test_buffer_is_far_beyond_the_last_level_cache() -> None:
    assert bandwidth_probe.default_buffer_bytes(None) == 512 * MIB
    assert bandwidth_probe.default_buffer_bytes(256 * MIB) == 1024 * MIB
    assert bandwidth_probe.default_buffer_bytes(4096 * MIB) == 2048 * MIB


def test_the_cache_keeps_one_figure_per_machine(tmp_path: Path) -> None:
    key = bandwidth_cache.machine_key("Ryzen 9 7950X", 16, 64 << 30)
    other = bandwidth_cache.machine_key("Ryzen 9 7950X", 16, 128 << 30)

    assert bandwidth_cache.cached_bandwidth(key) is None
    assert bandwidth_cache.store_bandwidth(key, 61.5, "read-only stream")
    hit = bandwidth_cache.cached_bandwidth(key)
    assert hit is not None and hit[0] == 61.5
    assert hit[1].basis is Basis.MEASURED and "cached for this machine" in hit[1].source
    assert bandwidth_cache.cached_bandwidth(other) is None  # more RAM: measure again


@pytest.mark.parametrize(
    "content", ["{not json", '{"k": {"gbps": "fast"}}', '{"k": {"gbps": -3}}', "[]", "x" * 70000]
)
def test_a_damaged_cache_measures_again(content: str) -> None:
    path = bandwidth_cache._path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)

    assert bandwidth_cache.cached_bandwidth("k") is None
    assert bandwidth_cache.store_bandwidth("k", 20.0, "probe")
    assert json.loads(path.read_text())["k"]["gbps"] == 20.0


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("RIGSPARK_CACHE_DIR", str(blocker / "below-a-file"))

    assert bandwidth_cache.store_bandwidth("k", 20.0, "probe") is False
    assert bandwidth_cache.cached_bandwidth("k") is None


# ---------------------------------------------------------------- a busy machine, twice


def test_rounds_are_spread_over_time_and_the_best_sustained_one_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Other work only lowers the figure: the best round's median is kept, with the
    spread between the rounds, and the rounds are apart in time."""
    medians = iter([10.0, 30.0, 20.0])
    monkeypatch.setattr(
        bandwidth_probe, "_round", lambda *a: [next(medians)] * 2
    )  # each round's passes
    pauses: list[float] = []
    monkeypatch.setattr(bandwidth_probe.time, "sleep", pauses.append)
    result = bandwidth_probe.measure_ram_bandwidth(
        8 * MIB, threads=1, repeats=6, rounds=3, check_busy=False
    )
    assert result.bandwidth_gbps == 30.0 and result.rounds == 3 and result.runs == 6
    assert result.spread == pytest.approx((30 - 10) / 30, abs=1e-3)
    assert pauses == [bandwidth_probe.ROUND_PAUSE_S] * 2
    assert "best median of 3 rounds" in result.provenance.source


def test_one_calm_round_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    loads = iter([93.0, 5.0, 93.0])
    monkeypatch.setattr(bandwidth_probe, "busy_percent", lambda: next(loads))
    monkeypatch.setattr(bandwidth_probe.time, "sleep", lambda _s: None)
    result = bandwidth_probe.measure_ram_bandwidth(8 * MIB, threads=1, repeats=3, rounds=3)
    assert not result.busy


def _fake_result(gbps: float, busy: bool) -> bandwidth_probe.BandwidthResult:
    from rigspark_gui.core.rig import Provenance

    return bandwidth_probe.BandwidthResult(
        bandwidth_gbps=gbps,
        buffer_bytes=512 * MIB,
        threads=2,
        runs=9,
        rounds=3,
        spread=0.5 if busy else 0.05,
        busy=busy,
        reason="the machine was busy (95 % CPU in use or more while measuring)" if busy else "",
        provenance=Provenance(basis=Basis.MEASURED, source="read-only stream"),
    )


def test_a_busy_machine_keeps_its_best_figure_until_a_calm_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Run after run on a busy machine, the figure used never drops below the best one
    measured so far (the answer does not follow the load); a calm run replaces it."""
    from rigspark_gui.core.rig import Cpu, Rig
    from rigspark_gui.hardware.detect import machine_key_of, with_measured_bandwidth

    rig = Rig(ram_total_bytes=24 << 30, cpu=Cpu(name="2-vCPU VM", cores=2))
    key = machine_key_of(rig)
    used = []
    for gbps, busy in ((20.0, True), (12.0, True), (24.0, True), (18.0, True), (30.0, False)):
        monkeypatch.setattr(
            bandwidth_probe, "measure_ram_bandwidth", lambda g=gbps, b=busy: _fake_result(g, b)
        )
        measured, result = with_measured_bandwidth(rig)
        used.append(measured.cpu.memory_bandwidth_gbps)
        assert result.busy is busy
        if busy:
            assert bandwidth_cache.cached_bandwidth(key) is None  # retried on the next run
    assert used == [20.0, 20.0, 24.0, 24.0, 30.0]
    assert bandwidth_cache.cached_bandwidth(key) is not None
    assert bandwidth_cache.busy_bandwidth(key) is None  # the calm figure retired it
    stored = json.loads(bandwidth_cache._path().read_text())[key]
    assert stored["spread"] == 0.05


def test_a_vms_vcpus_are_timed_together_and_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a VM the measurement also times the vCPUs together (whole cores or hyperthread
    pairs); the figure is kept with the bandwidth and applied on the next start. A bare
    machine's topology is trusted and not timed."""
    from rigspark_gui.core.rig import Cpu, Rig
    from rigspark_gui.hardware import core_probe
    from rigspark_gui.hardware.detect import machine_key_of, with_measured_bandwidth

    timed: list[int] = []

    def scaling(threads: int) -> core_probe.CoreScaling:
        timed.append(threads)
        return core_probe.CoreScaling(
            threads=threads,
            share=0.55,
            one_thread_gops=2.0,
            rounds=3,
            provenance=Provenance(basis=Basis.MEASURED, source="timed together"),
        )

    monkeypatch.setattr(core_probe, "measure_core_scaling", scaling)
    monkeypatch.setattr(bandwidth_probe, "measure_ram_bandwidth", lambda: _fake_result(30.0, False))
    bare = Rig(ram_total_bytes=24 << 30, cpu=Cpu(name="Ryzen", cores=2, features=("avx2",)))
    assert with_measured_bandwidth(bare)[0].cpu.compute_cores is None and timed == []

    vm = Rig(ram_total_bytes=24 << 30, cpu=Cpu(name="VM", cores=2, features=("hypervisor",)))
    measured, _ = with_measured_bandwidth(vm)
    assert timed == [2] and measured.cpu.compute_cores == 1.1
    assert measured.cpu.basis_of("compute_cores").basis is Basis.MEASURED
    cached = bandwidth_cache.cached_compute_cores(machine_key_of(vm))
    assert cached is not None and cached[0] == 1.1 and "cached" in cached[1].source


def test_a_busy_vm_uses_its_figure_for_now_but_keeps_none(monkeypatch: pytest.MonkeyPatch) -> None:
    from rigspark_gui.core.rig import Cpu, Rig
    from rigspark_gui.hardware import core_probe
    from rigspark_gui.hardware.detect import machine_key_of, with_measured_bandwidth

    def busy(threads: int) -> core_probe.CoreScaling:
        return core_probe.CoreScaling(
            threads=threads,
            share=0.5,
            one_thread_gops=2.0,
            rounds=3,
            busy=True,
            reason="the machine was busy",
            provenance=Provenance(basis=Basis.MEASURED, source="unreliable"),
        )

    monkeypatch.setattr(core_probe, "measure_core_scaling", busy)
    monkeypatch.setattr(bandwidth_probe, "measure_ram_bandwidth", lambda: _fake_result(30.0, False))
    vm = Rig(ram_total_bytes=24 << 30, cpu=Cpu(name="VM", cores=2, features=("hypervisor",)))
    measured, _ = with_measured_bandwidth(vm)
    assert measured.cpu.compute_cores == 1.0  # a measurement, lower than the truth at worst
    assert bandwidth_cache.cached_compute_cores(machine_key_of(vm)) is None  # next run again


def test_a_vm_gets_its_kept_figure_on_the_next_start_and_asks_for_one_until_then(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Detection fills a VM's cores' worth from the cache like its bandwidth; a VM with a
    bandwidth but no cores' worth still needs measuring (a cache from before the vCPUs
    were timed), a bare machine with a bandwidth does not."""
    from rigspark_gui.core.rig import Cpu
    from rigspark_gui.hardware import cpu as cpu_probe
    from rigspark_gui.hardware.detect import detect, needs_measuring

    vm = Cpu(name="AMD EPYC", cores=2, features=("avx2", "hypervisor"))
    host = cpu_probe.CpuProbeResult(cpu=vm, ram_total_bytes=24 << 30)
    monkeypatch.setattr(cpu_probe, "probe_cpu", lambda *_a, **_k: host)
    key = bandwidth_cache.machine_key("AMD EPYC", 2, 24 << 30)
    assert bandwidth_cache.store_bandwidth(key, 33.0, "read-only stream")

    first = detect(models_dir=tmp_path, system="Linux", sysfs_root=tmp_path)
    assert first.cpu.memory_bandwidth_gbps == 33.0 and first.cpu.compute_cores is None
    assert needs_measuring(first.cpu)

    assert bandwidth_cache.store_compute_cores(key, 1.0, "timed together")
    later = detect(models_dir=tmp_path, system="Linux", sysfs_root=tmp_path)
    assert later.cpu.compute_cores == 1.0
    assert "cached for this machine" in later.cpu.basis_of("compute_cores").source
    assert not needs_measuring(later.cpu)
    assert not needs_measuring(Cpu(name="Ryzen", cores=16, memory_bandwidth_gbps=60.0))
    assert needs_measuring(Cpu(name="Ryzen", cores=16))
