"""Routed experts in system memory the way llama.cpp's own flags put them there.

`--n-cpu-moe N` keeps the routed experts of blocks 0..N-1 in system memory and
`--cpu-moe` those of every block (common/arg.cpp: one `blk\\.I\\.ffn_(up|down|gate|
gate_up)_(ch|)exps` override per block, or one for all); the rest of each block
(attention, router, shared experts, norms) and its KV stay where -ngl puts the block.
Here: that placement made from any layer placement, and the N a placement's experts
are exactly that shape for (the launch commands then say the flag, not `-ot` rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rigspark_gui.core.memory import WeightsLayout
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.placement.layout import (
    INPUT,
    OUTPUT,
    Placement,
    auto_place,
    device_loads,
)
from rigspark_gui.core.placement.verdict import CPU, Verdict
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings


def with_cpu_moe(placement: Placement, g: Geometry, n: int) -> Placement:
    """`placement`'s layers with the experts exactly as `--n-cpu-moe n` sets them: those
    of MoE blocks 0..n-1 off the CPU in system memory, every other block's with it
    (n >= n_layer: `--cpu-moe`; 0: every expert back with its block)."""
    units = tuple(
        u
        if u.unit in (INPUT, OUTPUT)
        else replace(
            u,
            experts_device=(
                CPU if u.index < n and u.device != CPU and g.is_moe_layer(u.index) else None
            ),
        )
        for u in placement.units
    )
    return replace(placement, units=units)


def _covered(placement: Placement, n: int, g: Geometry | None) -> bool:
    """Whether every block below `n` off the CPU has its experts in system memory (a
    block `g` says has none needs no rule; without `g` every block must say so)."""
    return all(
        u.experts_device == CPU
        or u.device == CPU
        or (g is not None and not g.is_moe_layer(u.index))
        for u in placement.blocks
        if u.index < n
    )


def cpu_moe_count(placement: Placement, g: Geometry | None = None) -> int | None:
    """The N for which `--n-cpu-moe N` gives exactly `placement`'s experts (0: none kept
    apart; the smallest such N), or None when they are not that shape (kept apart on a
    GPU, or a block below the last one kept apart still holds its experts)."""
    away = [u for u in placement.blocks if u.experts_device not in (None, u.device)]
    if not away:
        return 0
    if any(u.experts_device != CPU for u in away):
        return None
    n = max(u.index for u in away) + 1
    return n if _covered(placement, n, g) else None


def is_cpu_moe(placement: Placement, g: Geometry | None = None) -> bool:
    """Whether `--cpu-moe` (every block's experts in system memory) gives exactly
    `placement`'s experts."""
    n = cpu_moe_count(placement, g)
    return bool(n) and _covered(placement, len(placement.blocks), g)


def fit_cpu_moe(
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    kv_layers: Sequence[int] | None = None,
    gpu_ids: Sequence[int] | None = None,
) -> Placement | None:
    """Every slot on the GPUs (llama.cpp's split by free memory) with the experts of the
    fewest first blocks in system memory (`--n-cpu-moe N`) that leaves no device over;
    None for a dense model, a rig without GPUs, or when not even `--cpu-moe` fits."""
    if not g.is_moe or not rig.gpus:
        return None
    base = auto_place(g, rig, s, gpu_ids=gpu_ids)

    def over(n: int) -> list[str]:
        loads = device_loads(with_cpu_moe(base, g, n), g, layout, rig, s, kv_layers)
        return [x.device for x in loads if x.verdict is Verdict.OVER]

    def gpus_fit(n: int) -> bool:
        return all(d == CPU for d in over(n))

    # more experts in system memory never load a GPU more: the fewest that fit them
    lo, hi = 0, g.n_layer
    if not gpus_fit(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if gpus_fit(mid):
            hi = mid
        else:
            lo = mid + 1
    # and the fewest load system memory least: if it is over there, so is every other
    return None if over(lo) else with_cpu_moe(base, g, lo)


__all__ = ["cpu_moe_count", "fit_cpu_moe", "is_cpu_moe", "with_cpu_moe"]
