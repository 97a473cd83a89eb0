from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rigspark_gui.core.rig import MIB, Basis
from rigspark_gui.hardware import bandwidth_probe


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    bandwidth_probe.clear_cache()
    yield
    bandwidth_probe.clear_cache()


def test_measures_a_positive_bandwidth_and_caches_it() -> None:
    first = bandwidth_probe.measure_ram_bandwidth(16 * MIB, threads=2, repeats=3)

    assert first.bandwidth_gbps > 0
    assert first.provenance.basis is Basis.MEASURED
    assert 1 <= first.runs <= 3 and first.threads == 2
    assert bandwidth_probe.measure_ram_bandwidth(16 * MIB, threads=2) is first


def test_time_budget_bounds_the_runs() -> None:
    start = time.perf_counter()
    result = bandwidth_probe.measure_ram_bandwidth(
        32 * MIB, threads=1, repeats=10_000, time_budget_s=0.2
    )

    assert time.perf_counter() - start < 2.0
    assert result.runs < 10_000


def test_rejects_a_useless_buffer() -> None:
    with pytest.raises(ValueError):
        bandwidth_probe.measure_ram_bandwidth(1024)
