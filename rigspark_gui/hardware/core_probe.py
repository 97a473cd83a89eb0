"""How many cores' worth of vector arithmetic this machine's threads give together.

A virtual machine's vCPUs may be whole cores or the two hyperthreads of one core: the
hypervisor sets it per instance type (AWS `ThreadsPerCore`, Azure `vCPUsPerCore`) and the
guest's topology does not tell (it may list every vCPU as a core). llama.cpp's decode is
compute-bound on a few cores, and two hyperthreads share one core's vector units, so it
runs about half as fast on two siblings as on two cores. Nothing reports which; it is
measured: one thread runs a vector kernel on data in its own core's cache, then every
thread runs it at once, and the rate of all together over the rate of one is the number
of cores' worth (two cores: about 2; two siblings: about 1-1.3).

The kernel is numpy's float32 `exp` over a 256 KiB array: SIMD code that releases the GIL
and spends its time in the vector units, not in memory or in Python. Like the bandwidth
probe, other work only ever lowers a round, so the best of a few rounds is kept and a
machine busy in every round says so.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rigspark_gui.core.rig import Basis, Provenance

# float32, 256 KiB in and out: in a core's own L2 on most CPUs (L3 otherwise, still far
# from memory-bound for exp), and long enough a call (tens of µs) that the GIL taken
# between calls does not serialize the threads
ELEMENTS = 65536
SLICE_S = 0.12  # one timed run of the kernel, per thread
DEFAULT_ROUNDS = 3
ROUND_PAUSE_S = 0.2
MAX_THREADS = 32
# all threads together below this share of their count per thread: siblings, or cores
# that only share out one core's time
SIBLING_SHARE = 0.75


@dataclass(frozen=True, slots=True, kw_only=True)
class CoreScaling:
    threads: int
    compute_cores: float  # cores' worth of vector work all threads give together
    one_thread_gops: float  # kernel elements per second (G) on one thread alone
    rounds: int
    busy: bool = False
    reason: str = ""
    provenance: Provenance

    @property
    def siblings(self) -> bool:
        return self.compute_cores < SIBLING_SHARE * self.threads


def _spin(seconds: float) -> float:
    """Run the kernel for about `seconds`; elements per second."""
    import numpy as np

    a = np.linspace(-2.0, 2.0, ELEMENTS, dtype=np.float32)
    out = np.empty_like(a)
    np.exp(a, out=out)  # first touch and dispatch outside the timing
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(16):
            np.exp(a, out=out)
        n += 16
        now = time.perf_counter()
        if now >= end:
            return n * ELEMENTS / (now - start)


def _together(pool: ThreadPoolExecutor, threads: int, seconds: float) -> float:
    return sum(pool.map(_spin, [seconds] * threads))


def measure_core_scaling(
    threads: int,
    *,
    rounds: int = DEFAULT_ROUNDS,
    slice_s: float = SLICE_S,
    check_busy: bool = True,
) -> CoreScaling:
    """Cores' worth of vector compute of `threads` threads together (at most `threads`).
    With `check_busy`, other work using the CPU while it measures makes a low result
    untrusted (`busy`): other work only ever lowers it."""
    from rigspark_gui.hardware.bandwidth_probe import busy_percent as other_work

    threads = max(1, min(threads, MAX_THREADS))
    busy_percent = other_work() if check_busy else None
    rounds = max(1, rounds)
    ratios: list[float] = []
    singles: list[float] = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        _together(pool, threads, slice_s / 4)  # warm-up: threads started, clocks up
        for r in range(rounds):
            if r:
                time.sleep(ROUND_PAUSE_S)
            one = _spin(slice_s)
            together = _together(pool, threads, slice_s) if threads > 1 else one
            singles.append(one)
            ratios.append(together / one if one > 0 else 0.0)
    best = max(ratios)
    cores = round(min(max(best, 1.0), float(threads)), 1)
    spread = (best - min(ratios)) / best if best > 0 else 0.0
    reason = ""
    if busy_percent is not None and busy_percent > 40.0 and cores < SIBLING_SHARE * threads:
        reason = f"the machine was busy ({busy_percent:.0f} % CPU in use)"
    plural = "s" if threads != 1 else ""
    worth = "core's worth" if cores == 1 else "cores' worth"
    source = (
        f"{threads} thread{plural} together did {cores:g} {worth} of one thread's vector "
        f"work (numpy float32 exp in cache, best of {len(ratios)} rounds, spread {spread:.0%})"
        + (f"; unreliable: {reason}" if reason else "")
    )
    return CoreScaling(
        threads=threads,
        compute_cores=cores,
        one_thread_gops=round(statistics.median(singles) / 1e9, 3),
        rounds=len(ratios),
        busy=bool(reason),
        reason=reason,
        provenance=Provenance(basis=Basis.MEASURED, source=source),
    )
