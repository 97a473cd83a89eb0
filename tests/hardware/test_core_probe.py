"""The cores'-worth probe: one thread is one core's worth; threads that share one CPU
give one core's worth together, as two hyperthreads of a core nearly do."""

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


def test_one_thread_is_one_cores_worth() -> None:
    r = core_probe.measure_core_scaling(1, rounds=2, slice_s=0.05)

    assert r.compute_cores == 1.0 and r.threads == 1 and not r.siblings
    assert r.one_thread_gops > 0
    assert r.provenance.basis is Basis.MEASURED and "1 thread together" in r.provenance.source


def test_the_ratio_of_all_threads_to_one_is_the_cores_worth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # each thread alone 10 G/s; together (pool threads) 6 G/s each: 4 threads = 2.4 cores
    def spin(_seconds: float) -> float:
        return 10e9 if threading.current_thread() is threading.main_thread() else 6e9

    monkeypatch.setattr(core_probe, "_spin", spin)
    r = core_probe.measure_core_scaling(4, rounds=2)
    assert r.compute_cores == 2.4 and r.siblings
    monkeypatch.setattr(core_probe, "_spin", lambda _s: 10e9)
    assert core_probe.measure_core_scaling(4, rounds=1).compute_cores == 4.0  # capped


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
    reason="needs thread affinity (Linux) and two CPUs",
)
def test_two_threads_sharing_one_cpu_give_one_cores_worth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two threads on one CPU: what a guest whose two vCPUs are one core's hyperthreads
    sees, at the limit. Threads inherit the affinity of the thread that starts them."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        r = core_probe.measure_core_scaling(2, rounds=2)
    finally:
        os.sched_setaffinity(0, before)
    assert r.compute_cores <= 1.3 and r.siblings


@pytest.mark.skipif(sys.platform != "linux", reason="needs thread affinity (Linux)")
def test_a_low_figure_on_a_busy_machine_is_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bandwidth_probe, "busy_percent", lambda: 90.0)
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        r = core_probe.measure_core_scaling(2, rounds=1)
    finally:
        os.sched_setaffinity(0, before)
    assert r.busy and "busy" in r.reason and "unreliable" in r.provenance.source
