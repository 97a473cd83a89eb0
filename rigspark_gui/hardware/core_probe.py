"""How many cores' worth of vector arithmetic this machine's threads give together.

A virtual machine's vCPUs may be whole cores or the two hyperthreads of one core: the
hypervisor sets it per instance type (AWS `ThreadsPerCore`, Azure `vCPUsPerCore`) and the
guest's topology does not tell (it may list every vCPU as a core). llama.cpp's decode is
compute-bound on a few cores, and two hyperthreads share one core's vector units, so it
runs about half as fast on two siblings as on two cores. Nothing reports which; it is
measured: one thread runs a vector kernel on data in its own core's cache, then up to
MAX_THREADS threads run it at once; the rate of all together over the rate of one, per
thread, is each vCPU's share of a whole core (whole cores: about 1; two siblings: about
0.5-0.65), and that share times the vCPUs is their cores' worth.

The kernel is numpy's float32 `exp` over a 256 KiB array: SIMD code that releases the GIL
and spends its time in the vector units, not in memory or in Python. Like the bandwidth
probe, other work only ever lowers a rate, so the best rates of a few rounds are kept,
and rounds that spread too far say the machine was busy.
"""

from __future__ import annotations

import statistics
import threading
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
# A VM's vCPUs are all of one kind (whole cores, or pairs of one core's hyperthreads), so
# a few of them tell the share of all; beyond this many threads, the GIL handed between
# them between kernel calls would begin to show in the figure.
MAX_THREADS = 8
# each thread's share of a whole core below this: hyperthread pairs, or vCPUs that share
# out one core's time
SIBLING_SHARE = 0.75
# rounds whose together-rates spread further than this around the best: other work
# came and went while measuring
MAX_SPREAD = 0.4


@dataclass(frozen=True, slots=True, kw_only=True)
class CoreScaling:
    threads: int  # threads timed together
    share: float  # each one's share of a whole core's vector work (1: whole cores)
    one_thread_gops: float  # kernel elements per second (G) on one thread alone
    rounds: int
    busy: bool = False
    reason: str = ""
    provenance: Provenance

    @property
    def siblings(self) -> bool:
        return self.share < SIBLING_SHARE

    def compute_cores(self, cores: int) -> float:
        """Cores' worth of vector work of `cores` such vCPUs together."""
        return round(self.share * cores, 1)


def _spin(
    seconds: float, start_together: threading.Barrier | None = None
) -> tuple[int, float, float]:
    """Run the kernel for about `seconds` (after every thread reached `start_together`);
    (elements done, start, end)."""
    import numpy as np

    a = np.linspace(-2.0, 2.0, ELEMENTS, dtype=np.float32)
    out = np.empty_like(a)
    np.exp(a, out=out)  # first touch and dispatch outside the timing
    if start_together is not None:
        start_together.wait()
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(16):
            np.exp(a, out=out)
        n += 16
        now = time.perf_counter()
        if now >= end:
            return n * ELEMENTS, start, now


def _rate(runs: list[tuple[int, float, float]]) -> float:
    """All the runs' work over one window, from the first start to the last end (a
    thread that started late and ran alone adds no rate of its own)."""
    window = max(r[2] for r in runs) - min(r[1] for r in runs)
    return sum(r[0] for r in runs) / window if window > 0 else 0.0


def _together(pool: ThreadPoolExecutor, threads: int, seconds: float) -> float:
    barrier = threading.Barrier(threads)
    return _rate(list(pool.map(lambda _i: _spin(seconds, barrier), range(threads))))


def measure_core_scaling(
    threads: int,
    *,
    rounds: int = DEFAULT_ROUNDS,
    slice_s: float | None = None,
    check_busy: bool = True,
) -> CoreScaling:
    """Each vCPU's share of a whole core, from `threads` of them (at most MAX_THREADS)
    timed alone and together: the best together-rate of the rounds over the best
    one-thread rate and the thread count (best against best: other work only ever lowers
    a rate). Rounds that spread too far, or a low share while other work used the CPU
    (with `check_busy`), make the figure untrusted (`busy`)."""
    from rigspark_gui.hardware.bandwidth_probe import BUSY_CPU_PERCENT
    from rigspark_gui.hardware.bandwidth_probe import busy_percent as other_work

    threads = max(1, min(threads, MAX_THREADS))
    slice_s = SLICE_S if slice_s is None else slice_s
    busy_percent = other_work() if check_busy else None
    rounds = max(1, rounds)
    singles: list[float] = []
    togethers: list[float] = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        _together(pool, threads, slice_s / 4)  # warm-up: threads started, clocks up
        for r in range(rounds):
            if r:
                time.sleep(ROUND_PAUSE_S)
            one = _rate([_spin(slice_s)])
            singles.append(one)
            togethers.append(_together(pool, threads, slice_s) if threads > 1 else one)
    best_one, best_all = max(singles), max(togethers)
    share = best_all / (best_one * threads) if best_one > 0 else 1.0
    share = round(min(max(share, 1.0 / threads), 1.0), 2)
    spread = (best_all - min(togethers)) / best_all if best_all > 0 else 0.0
    reason = ""
    if spread > MAX_SPREAD:
        reason = f"the rounds spread {spread:.0%} below the best"
    elif busy_percent is not None and busy_percent > BUSY_CPU_PERCENT and share < SIBLING_SHARE:
        reason = f"the machine was busy ({busy_percent:.0f} % CPU in use)"
    plural = "s" if threads != 1 else ""
    source = (
        f"{threads} thread{plural} together did {share:.0%} of a whole core's vector work "
        f"each (numpy float32 exp in cache, best of {len(togethers)} rounds against the "
        f"best one-thread run, spread {spread:.0%})" + (f"; unreliable: {reason}" if reason else "")
    )
    return CoreScaling(
        threads=threads,
        share=share,
        one_thread_gops=round(statistics.median(singles) / 1e9, 3),
        rounds=len(togethers),
        busy=bool(reason),
        reason=reason,
        provenance=Provenance(basis=Basis.MEASURED, source=source),
    )
