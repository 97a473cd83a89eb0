"""One quantization tried on one path: the slots llama.cpp places (-ngl and, when its
default split does not fit a split path, a --tensor-split that does), the device tallies
of that placement, and the fit, required and usable bytes, shortfall and breakdown
measured from them. The next quantization's trial reuses the slots where they carry over.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from rigspark_gui.core.memory import WeightsLayout, repack_for, weights_layout
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    DeviceTally,
    FitContext,
    FitEvaluator,
    Placement,
    gpu_device,
    judge_fit,
    llama_cpp_ranges,
    uniform_placement,
    with_cpu_moe,
)
from rigspark_gui.core.plan.paths import (
    GPU_ONLY,
    SPLIT_PATHS,
    MemoryBreakdown,
    PathCandidate,
    PathName,
)
from rigspark_gui.core.rig import Gpu, Rig
from rigspark_gui.core.settings import KV_PAD, PlanSettings

Ranges = list[tuple[str, int, int]]


Tally = dict[str, DeviceTally]


def path_slots(
    ev: FitEvaluator, cand: PathCandidate
) -> tuple[Ranges, int | None, list[float] | None, Tally]:
    """Slot runs, -ngl, --tensor-split (None: llama.cpp's default) and the device tallies
    of a path."""
    n = ev.g.n_layer
    if cand.name is PathName.CPU:
        ranges: Ranges = [(CPU, 0, n + 1)]
        return ranges, 0, None, ev.tally_ranges(ranges)
    if cand.name is PathName.UNIFIED:
        ranges = [(gpu_device(cand.gpu_ids[0]), 0, n + 1)]
        return ranges, n + 1, None, ev.tally_ranges(ranges)
    ids = cand.order
    ngl = ev.max_ngl(ids) if cand.name is PathName.CPU_OFFLOAD else n + 1
    ranges = llama_cpp_ranges(n, ngl, ev.default_split(ids), ids)
    tally = ev.tally_ranges(ranges)
    if cand.name in SPLIT_PATHS and not all(t.fits for t in tally.values()):
        split = ev.fill_split(ids)
        filled = llama_cpp_ranges(n, ngl, split, ids)
        filled_tally = ev.tally_ranges(filled)
        if all(t.fits for t in filled_tally.values()):
            return filled, ngl, split, filled_tally
    return ranges, ngl, None, tally


class Measure(NamedTuple):
    """A path's fit from its device tallies."""

    fits: bool
    required: int
    usable: int
    shortfall: int
    weights: int
    kv: int
    compute: int
    reserve: int

    def breakdown(self) -> MemoryBreakdown:
        return MemoryBreakdown(
            weights_bytes=self.weights,
            kv_bytes=self.kv,
            compute_bytes=self.compute,
            reserve_bytes=self.reserve,
        )


def measure_path(tally: Tally, cand: PathCandidate) -> Measure:
    """Fit, required, usable, shortfall and breakdown of a path from its device tallies.
    GPU-only paths show their GPUs; RAM paths (and the unified pool) show every device."""
    gpu_only = cand.name in GPU_ONLY and cand.name is not PathName.UNIFIED
    required = usable = weights = kv = compute = reserve = 0
    # one pool on a unified chip: the CPU-side buffers live in the same memory as the GPU's
    pool = tally.keys() if cand.name is PathName.UNIFIED else cand.pool
    fits, shortfall = judge_fit(tally.values(), pool)
    gpu_usable = 0
    for d, t in tally.items():
        if d != CPU:
            gpu_usable += t.usable_bytes
        elif gpu_only:
            continue
        required += t.required_bytes
        usable += t.usable_bytes
        weights += t.weights_bytes
        kv += t.kv_bytes
        compute += t.compute_bytes
        reserve += t.reserve_bytes
    if cand.name is PathName.UNIFIED:
        usable = gpu_usable
    return Measure(fits, required, usable, shortfall, weights, kv, compute, reserve)


def path_gpus(rig: Rig, cand: PathCandidate) -> tuple[Gpu, ...]:
    """The GPUs a path gives layers to (none for the CPU path): an engine that loads
    its own way may load differently without them (core/memory/repack.py reads_in)."""
    return tuple(rig.gpus[i] for i in cand.gpu_ids if 0 <= i < len(rig.gpus))


class Trial(NamedTuple):
    quant: str
    layout: WeightsLayout
    ev: FitEvaluator
    ranges: Ranges
    ngl: int | None
    split: list[float] | None
    m: Measure
    # llama.cpp's --n-cpu-moe: the routed experts of blocks 0..cpu_experts-1 stay in
    # system memory (0: none; n_layer: --cpu-moe)
    cpu_experts: int = 0


def _try(
    spec: ModelSpec, ctx: FitContext, cand: PathCandidate, quant: str, layout: WeightsLayout
) -> Trial:
    rig = ctx.rig
    repack = repack_for(spec, quant, rig.cpu.features, ctx.s, path_gpus(rig, cand))
    ev = FitEvaluator(spec.geometry, layout, rig, ctx.s, repack, ctx)
    ranges, ngl, split, tally = path_slots(ev, cand)
    return Trial(quant, layout, ev, ranges, ngl, split, measure_path(tally, cand))


def _try_same_slots(
    spec: ModelSpec,
    ctx: FitContext,
    cand: PathCandidate,
    quant: str,
    layout: WeightsLayout,
    like: Trial,
) -> Trial:
    """Another quantization on the slots an earlier trial of the path used, without working
    them out again. Only `try_quant` calls it, where the slots cannot depend on the
    quantization."""
    repack = repack_for(spec, quant, ctx.rig.cpu.features, ctx.s, path_gpus(ctx.rig, cand))
    ev = FitEvaluator(spec.geometry, layout, ctx.rig, ctx.s, repack, ctx)
    m = measure_path(ev.tally_ranges(like.ranges), cand)
    return Trial(quant, layout, ev, like.ranges, like.ngl, like.split, m)


def try_quant(
    spec: ModelSpec,
    ctx: FitContext,
    cand: PathCandidate,
    quant: str,
    layout: WeightsLayout,
    like: Trial | None,
) -> Trial:
    """The trial `_try` makes, faster when an earlier trial's slots carry over: on the
    CPU, unified and single-GPU paths every slot's device is fixed, and on the multi-GPU
    path llama.cpp's default split is kept whenever it fits (only when it does not is
    another split sought). The offload path's -ngl depends on the quantization."""
    if like is None or cand.name is PathName.CPU_OFFLOAD or like.split is not None:
        return _try(spec, ctx, cand, quant, layout)
    trial = _try_same_slots(spec, ctx, cand, quant, layout, like)
    if cand.name in SPLIT_PATHS and not trial.m.fits:
        return _try(spec, ctx, cand, quant, layout)
    return trial


def placement_from_ranges(
    spec: ModelSpec, rig: Rig, s: PlanSettings, ranges: Ranges, cpu_experts: int = 0
) -> Placement:
    slots = [d for d, lo, hi in ranges for _ in range(lo, hi)]
    p = uniform_placement(spec.geometry, rig, s, CPU)
    units = tuple(u if u.index < 0 else replace(u, device=slots[u.index]) for u in p.units)
    return with_cpu_moe(replace(p, units=units), spec.geometry, cpu_experts)


def max_context(spec: ModelSpec, rig: Rig, s: PlanSettings, cand: PathCandidate, quant: str) -> int:
    """Largest context (a multiple of 256, up to the trained context) that fits."""
    g = spec.geometry
    layout = weights_layout(spec, quant)
    repack = repack_for(spec, quant, rig.cpu.features, s, path_gpus(rig, cand))

    def fits(units: int) -> bool:
        ev = FitEvaluator(g, layout, rig, replace(s, context=units * KV_PAD), repack)
        return measure_path(path_slots(ev, cand)[3], cand).fits

    top = g.context_length // KV_PAD
    if top == 0:
        return 0
    if fits(top):
        return top * KV_PAD
    lo, hi = 0, top - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo * KV_PAD
