"""A stable measurement of RAM bandwidth, the figure CPU decode speed rests on.

No OS API reports it. We stream *read-only* over a buffer far beyond the last-level
cache (decode reads weights, it writes almost nothing), one thread per physical core
(numpy releases the GIL in reductions; one core alone cannot saturate several memory
channels), after a warm-up pass. Other work on the machine only ever lowers the figure,
so the passes are taken in a few short rounds spread over a second or two, each round's
median is its sustained figure, and the best round is kept, with the spread between the
rounds. A machine busy in every round (or whose rounds spread too far) gives a figure
that says so and is not cached (bandwidth_cache): the next start measures again.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from rigspark_gui.core.rig import MIB, Basis, Provenance

MIN_BUFFER_BYTES = 512 * MIB
MAX_BUFFER_BYTES = 2048 * MIB
DEFAULT_REPEATS = 9
DEFAULT_TIME_BUDGET_S = 3.0
# the passes are split into this many rounds, this far apart
DEFAULT_ROUNDS = 3
ROUND_PAUSE_S = 0.4
MAX_THREADS = 32
# Another process using more than this share of the CPU, or runs spreading more than
# this around their median, makes the figure untrustworthy.
BUSY_CPU_PERCENT = 40.0
MAX_SPREAD = 0.4


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthResult:
    bandwidth_gbps: float  # the best round's median: the best sustained figure
    buffer_bytes: int
    threads: int
    runs: int
    spread: float = 0.0  # (best - worst) / best of the rounds' medians
    rounds: int = 1
    busy: bool = False  # measured while the machine was busy or unstable: not to be cached
    reason: str = ""
    provenance: Provenance


_cache: dict[tuple[int, int], BandwidthResult] = {}
_lock = threading.Lock()


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def physical_cores() -> int:
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except Exception:  # psutil missing or failing: the logical count is the best we have
        n = None
    return max(1, min(n or os.cpu_count() or 1, MAX_THREADS))


def default_buffer_bytes(l3_bytes: int | None = None) -> int:
    """Four times the last-level cache, at least 512 MiB, at most 2 GiB."""
    want = 4 * l3_bytes if l3_bytes else MIN_BUFFER_BYTES
    return int(min(max(want, MIN_BUFFER_BYTES), MAX_BUFFER_BYTES))


def busy_percent() -> float | None:
    """CPU use by everything else right now (psutil's system-wide figure)."""
    try:
        import psutil

        return float(psutil.cpu_percent(interval=0.2))
    except Exception:
        return None


def _round(
    pool: ThreadPoolExecutor, parts: list[Any], nbytes: int, passes: int, deadline: float
) -> list[float]:
    """One round: up to `passes` timed passes, stopping rather than overrunning."""
    import numpy as np

    rates: list[float] = []
    while len(rates) < passes:
        start = time.perf_counter()
        list(pool.map(np.max, parts))
        elapsed = time.perf_counter() - start
        rates.append(nbytes / elapsed / 1e9)
        if time.perf_counter() + elapsed > deadline:
            break
    return rates


def _measure(
    buffer_bytes: int,
    threads: int,
    repeats: int,
    time_budget_s: float,
    check_busy: bool,
    rounds: int = DEFAULT_ROUNDS,
) -> BandwidthResult:
    import numpy as np  # only when measuring: ~0.3 s of the window's start-up otherwise

    # Filling the buffer first makes the OS map every page, so the timed passes measure
    # memory, not page faults; the first pass after it is a warm-up and is not timed.
    data = np.ones(buffer_bytes // 8, dtype=np.uint64)
    parts = np.array_split(data, threads)
    rounds = max(1, min(rounds, repeats))
    per_round = max(1, repeats // rounds)
    budget = time_budget_s / rounds
    medians: list[float] = []
    loads: list[float] = []
    n_runs = 0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(np.max, parts))
        for r in range(rounds):
            if r:
                time.sleep(ROUND_PAUSE_S)  # spread over time: a burst of other work passes
            load = busy_percent() if check_busy else None
            if load is not None:
                loads.append(load)
            passes = per_round if r < rounds - 1 else repeats - per_round * (rounds - 1)
            rates = _round(pool, parts, data.nbytes, max(1, passes), time.perf_counter() + budget)
            n_runs += len(rates)
            medians.append(statistics.median(rates))
    best = max(medians)
    spread = (best - min(medians)) / best if best > 0 else 0.0
    reason = ""
    calm = [x for x in loads if x <= BUSY_CPU_PERCENT]
    if loads and not calm:
        reason = f"the machine was busy ({min(loads):.0f} % CPU in use or more while measuring)"
    elif spread > MAX_SPREAD:
        reason = f"the rounds spread {spread:.0%} below the best"
    gbps = round(best, 1)
    plural = "s" if threads != 1 else ""
    return BandwidthResult(
        bandwidth_gbps=gbps,
        buffer_bytes=data.nbytes,
        threads=threads,
        runs=n_runs,
        spread=round(spread, 3),
        rounds=len(medians),
        busy=bool(reason),
        reason=reason,
        provenance=Provenance(
            basis=Basis.MEASURED,
            source=(
                f"read-only stream over {data.nbytes // MIB} MiB on {threads} thread{plural}, "
                f"best median of {len(medians)} rounds {ROUND_PAUSE_S:g} s apart, "
                f"{n_runs} runs (spread {spread:.0%})"
                + (f"; unreliable: {reason}" if reason else "")
            ),
        ),
    )


def measure_ram_bandwidth(
    buffer_bytes: int | None = None,
    *,
    threads: int | None = None,
    repeats: int = DEFAULT_REPEATS,
    time_budget_s: float = DEFAULT_TIME_BUDGET_S,
    check_busy: bool = True,
    rounds: int = DEFAULT_ROUNDS,
) -> BandwidthResult:
    """Measure once per process and buffer/thread setting; later calls return the
    in-process cache (a busy result is not kept)."""
    n_threads = threads or physical_cores()
    size = buffer_bytes or default_buffer_bytes()
    if n_threads < 1 or size < MIB:
        raise ValueError("need at least one thread and a buffer of at least 1 MiB")
    key = (size, n_threads)
    with _lock:
        cached = _cache.get(key)
        if cached is None:
            cached = _measure(size, n_threads, max(1, repeats), time_budget_s, check_busy, rounds)
            if not cached.busy:
                _cache[key] = cached
    return cached
