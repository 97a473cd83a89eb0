"""Whole-placement strategies behind the editor's buttons, all llama.cpp-shaped.

Each returns a placement that `-ngl` and `--tensor-split` alone express, so the launch
command of a strategy's result never needs `-ot` rules.
"""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.memory import WeightsLayout
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.placement.layout import (
    Placement,
    auto_place,
    device_loads,
    gpu_device,
    llama_gpu_order,
)
from rigspark_gui.core.placement.verdict import Verdict
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings


def even_split(g: Geometry, rig: Rig, s: PlanSettings) -> Placement:
    """Every slot on a GPU, the same number of layers on each."""
    n = len(rig.gpus)
    return auto_place(g, rig, s, tensor_split=[1.0] * n if n else None)


def _place_counts(g: Geometry, rig: Rig, s: PlanSettings, counts: Sequence[int]) -> Placement:
    """`counts` by GPU number, laid out in llama.cpp's device order."""
    ngl = sum(counts)
    if ngl == 0:
        return auto_place(g, rig, s, ngl=0)
    split = [float(counts[i]) for i in llama_gpu_order(rig)]
    return auto_place(g, rig, s, ngl=ngl, tensor_split=split)


def _over(
    p: Placement,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    kv_layers: Sequence[int] | None,
) -> list[str]:
    loads = device_loads(p, g, layout, rig, s, kv_layers)
    # GPUs only: the strategies place on this rig's GPUs (not other hosts' CPUs)
    return [x.device for x in loads if x.device.startswith("gpu:") and x.verdict is Verdict.OVER]


def fill_fastest_first(
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    kv_layers: Sequence[int] | None = None,
) -> Placement:
    """As many layers as fit on the highest-bandwidth GPU, then the next, the rest on the CPU.

    Counts are found by bisection against the real per-device loads; llama.cpp then lays
    them out in GPU order, so the head lands on the last GPU holding any layer.
    """
    slots = g.n_layer + 1
    order = sorted(range(len(rig.gpus)), key=lambda i: (-(rig.gpus[i].bandwidth_gbps or 0.0), i))
    counts = [0] * len(rig.gpus)
    remaining = slots
    for i in order:
        lo, hi = 0, remaining
        while lo < hi:
            mid = (lo + hi + 1) // 2
            trial = list(counts)
            trial[i] = mid
            if gpu_device(i) in _over(
                _place_counts(g, rig, s, trial), g, layout, rig, s, kv_layers
            ):
                hi = mid - 1
            else:
                lo = mid
        counts[i] = lo
        remaining -= lo
    # The head moves to the last GPU in order as counts grow; shed layers until none is over.
    for _ in range(slots):
        over = _over(_place_counts(g, rig, s, counts), g, layout, rig, s, kv_layers)
        if not over:
            break
        for d in over:
            idx = int(d.split(":")[1])
            counts[idx] = max(counts[idx] - 1, 0)
    return _place_counts(g, rig, s, counts)


def fit_by_ngl(
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    kv_layers: Sequence[int] | None = None,
) -> Placement:
    """llama.cpp's own rule (split by free memory) at the largest -ngl no GPU is over at."""
    if not rig.gpus:
        return auto_place(g, rig, s, ngl=0)
    lo, hi = 0, g.n_layer + 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _over(auto_place(g, rig, s, ngl=mid), g, layout, rig, s, kv_layers):
            hi = mid - 1
        else:
            lo = mid
    return auto_place(g, rig, s, ngl=lo)
