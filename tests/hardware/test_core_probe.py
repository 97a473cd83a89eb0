"""The vCPU probe: one thread is one whole core; threads that share one CPU each give
half of one, as two hyperthreads of a core nearly do."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from rigspark_gui.core.rig import Basis
from rigspark_gui.hardware import bandwidth_probe, core_probe


@pytest.fixture(autouse=True)
def _short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core_probe, "SLICE_S", 0.05)
    monkeypatch.setattr(core_probe, "ROUND_PAUSE_S", 0.0)
    monkeypatch.setattr(bandwidth_probe, "busy_percent", lambda: 2.0)


def test_one_thread_is_a_whole_core() -> None:
    r = core_probe.measure_core_scaling(1, rounds=2, slice_s=0.05)

    assert r.share == 1.0 and r.threads == 1 and not r.siblings
    assert r.compute_cores(1) == 1.0 and r.one_thread_gops > 0
    assert r.provenance.basis is Basis.MEASURED and "1 thread together" in r.provenance.source


def _fake_spin(alone: int, together: int):  # type: ignore[no-untyped-def]
    """Elements a 1-second run does: `alone` on the calling thread, `together` each on
    the pool's threads."""

    def spin(_seconds: float, _barrier: object = None) -> tuple[int, float, float]:
        main = threading.current_thread() is threading.main_thread()
        return (alone if main else together), 0.0, 1.0

    return spin


def test_the_share_is_all_threads_against_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # alone 10 G/s; together 6 G/s each: each vCPU does 0.6 of a core
    monkeypatch.setattr(core_probe, "_spin", _fake_spin(10_000_000_000, 6_000_000_000))
    r = core_probe.measure_core_scaling(4, rounds=2)
    assert r.share == 0.6 and r.siblings and r.compute_cores(4) == 2.4


def test_a_large_vm_is_timed_on_a_few_threads_and_scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 whole-core vCPUs: timed on MAX_THREADS of them, all 64 count."""
    monkeypatch.setattr(core_probe, "_spin", _fake_spin(10, 10))
    r = core_probe.measure_core_scaling(64, rounds=1)
    assert r.threads == core_probe.MAX_THREADS
    assert r.share == 1.0 and r.compute_cores(64) == 64.0


def test_rounds_that_spread_too_far_are_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    rates = iter([10, 10])  # one thread alone, each round

    def spin(_seconds: float, _barrier: object = None) -> tuple[int, float, float]:
        main = threading.current_thread() is threading.main_thread()
        return (next(rates) if main else pool_rates.pop(0)), 0.0, 1.0

    pool_rates = [10, 10, 10, 10, 3, 3]  # warm-up, round 1, round 2 (another job came)
    monkeypatch.setattr(core_probe, "_spin", spin)
    r = core_probe.measure_core_scaling(2, rounds=2)
    assert r.busy and "spread" in r.reason and "unreliable" in r.provenance.source


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
    reason="needs thread affinity (Linux) and two CPUs",
)
def test_two_threads_sharing_one_cpu_each_give_half_a_core() -> None:
    """Two threads on one CPU: what a guest whose two vCPUs are one core's hyperthreads
    sees, at the limit. Threads inherit the affinity of the thread that starts them."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        r = core_probe.measure_core_scaling(2, rounds=2)
    finally:
        os.sched_setaffinity(0, before)
    assert r.share <= 0.65 and r.siblings and r.compute_cores(2) <= 1.3


@pytest.mark.skipif(sys.platform != "linux", reason="needs thread affinity (Linux)")
def test_a_low_share_on_a_busy_machine_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bandwidth_probe, "busy_percent", lambda: 90.0)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        r = core_probe.measure_core_scaling(2, rounds=1)
    finally:
        os.sched_setaffinity(0, before)
    assert r.busy and "busy" in r.reason and "unreliable" in r.provenance.source
