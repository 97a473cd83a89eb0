"""A short, bounded measurement of RAM bandwidth (run on request only).

Decode speed on the CPU path is bound by RAM bandwidth, which no OS API reports. We
time a numpy copy of a buffer far larger than any CPU cache, split across a few
threads (numpy releases the GIL for the copy) because one core alone cannot saturate
several memory channels. The figure is a lower bound of the peak: STREAM-style copy,
counting bytes read plus bytes written.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from pydantic import BaseModel, ConfigDict

from rigspark_gui.core.rig import MIB, Basis, Provenance

DEFAULT_BUFFER_BYTES = 256 * MIB
DEFAULT_REPEATS = 5
DEFAULT_TIME_BUDGET_S = 1.0
MAX_THREADS = 8


class BandwidthResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    bandwidth_gbps: float
    buffer_bytes: int
    threads: int
    runs: int
    provenance: Provenance


_cache: dict[tuple[int, int], BandwidthResult] = {}
_lock = threading.Lock()


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def _default_threads() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_THREADS))


def _measure(
    buffer_bytes: int, threads: int, repeats: int, time_budget_s: float
) -> BandwidthResult:
    # Filling both buffers first makes the OS map every page, so the timed copies
    # measure memory, not page faults.
    src = np.ones(buffer_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)
    dst.fill(0.0)
    src_parts = np.array_split(src, threads)
    dst_parts = np.array_split(dst, threads)
    moved = 2 * src.nbytes  # each byte read once and written once
    # The budget bounds the timed copies; allocating and touching the buffers above
    # costs about one more copy.
    deadline = time.perf_counter() + time_budget_s

    best_s = float("inf")
    runs = 0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        while runs < repeats:
            start = time.perf_counter()
            list(pool.map(np.copyto, dst_parts, src_parts))
            elapsed = time.perf_counter() - start
            best_s = min(best_s, elapsed)
            runs += 1
            # Stop early rather than overrun: the next run would take about as long.
            if time.perf_counter() + elapsed > deadline:
                break
    gbps = round(moved / best_s / 1e9, 1)
    return BandwidthResult(
        bandwidth_gbps=gbps,
        buffer_bytes=src.nbytes,
        threads=threads,
        runs=runs,
        provenance=Provenance(
            basis=Basis.MEASURED,
            source=(
                f"numpy copy of {src.nbytes // MIB} MiB on {threads} thread"
                f"{'s' if threads != 1 else ''}, best of {runs}: a lower bound of peak"
            ),
        ),
    )


def measure_ram_bandwidth(
    buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    *,
    threads: int | None = None,
    repeats: int = DEFAULT_REPEATS,
    time_budget_s: float = DEFAULT_TIME_BUDGET_S,
) -> BandwidthResult:
    """Measure once per process and buffer/thread setting; later calls return the cache."""
    n_threads = threads or _default_threads()
    if n_threads < 1 or buffer_bytes < MIB:
        raise ValueError("need at least one thread and a buffer of at least 1 MiB")
    key = (buffer_bytes, n_threads)
    with _lock:
        cached = _cache.get(key)
        if cached is None:
            cached = _measure(buffer_bytes, n_threads, max(1, repeats), time_budget_s)
            _cache[key] = cached
    return cached
