"""Every execution path a rig offers for one model (the idea of `plan.rs`).

Paths: `unified` (shared memory), `gpu` (largest single GPU), `multi-gpu` (all peers of
one vendor), `cpu-offload` (GPUs plus RAM: as many slots on the GPUs as fit), `cpu`.
Each reports fit, the best quantization that fits, required and usable bytes, the
shortfall, a reason, and speed. The recommended path is the first that fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field

from rigspark_gui.core.fit import DeviceTally, FitEvaluator, kv_total_fast
from rigspark_gui.core.model_spec import Frozen, ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    HEADROOM,
    DeviceLoad,
    Placement,
    auto_place,
    device_loads,
    gpu_device,
    llama_cpp_ranges,
    uniform_placement,
)
from rigspark_gui.core.rig import Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.throughput import (
    PerfProfile,
    Prefill,
    Throughput,
    decode_from_reads,
    prefill_from_reads,
)
from rigspark_gui.core.weights import (
    WeightsLayout,
    file_bytes_estimate,
    repack_for,
    weights_layout,
)

PLAN_SCHEMA_VERSION = 1
DISCRETE_VENDORS = (Vendor.NVIDIA, Vendor.AMD, Vendor.INTEL)


class PathName(StrEnum):
    UNIFIED = "unified"
    GPU = "gpu"
    MULTI_GPU = "multi-gpu"
    CPU_OFFLOAD = "cpu-offload"
    CPU = "cpu"


class Reason(StrEnum):
    VRAM = "vram-bound"
    RAM = "ram-bound"
    CONTEXT = "context-bound"
    DISK = "disk-bound"


class MemoryBreakdown(Frozen):
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    reserve_bytes: int


class PathPlan(Frozen):
    path: PathName
    fits: bool
    quant: str | None = Field(description="best quantization that fits, or the one shown")
    required_bytes: int
    usable_bytes: int
    shortfall_bytes: int | None = Field(
        description="extra usable memory needed before the smallest quantization fits"
    )
    reason: Reason | None
    gpu_count: int
    devices: tuple[str, ...]
    ngl: int | None = Field(description="llama.cpp -ngl of this path's placement")
    tensor_split: tuple[float, ...] | None = Field(
        default=None, description="llama.cpp --tensor-split when the default one would not fit"
    )
    breakdown: MemoryBreakdown
    throughput: Throughput
    prefill: Prefill
    file_bytes: int


class PathCandidate:
    """A path's device set and how to place a model on it."""

    def __init__(self, name: PathName, gpu_ids: Sequence[int]) -> None:
        self.name = name
        self.gpu_ids = list(gpu_ids)


def is_discrete(g: Gpu) -> bool:
    return not g.unified and g.vendor in DISCRETE_VENDORS and g.memory_bytes > 0


def candidate_paths(rig: Rig, cpu_only: bool) -> list[PathCandidate]:
    out: list[PathCandidate] = []
    unified = [i for i, g in enumerate(rig.gpus) if g.unified and g.memory_bytes > 0]
    discrete = [i for i, g in enumerate(rig.gpus) if is_discrete(g)]
    if not cpu_only:
        if rig.unified_memory and unified:
            out.append(PathCandidate(PathName.UNIFIED, unified[:1]))
        elif discrete:
            largest = max(discrete, key=lambda i: (rig.gpus[i].capacity_bytes, -i))
            vendor = rig.gpus[largest].vendor
            peers = [i for i in discrete if rig.gpus[i].vendor == vendor]
            out.append(PathCandidate(PathName.GPU, [largest]))
            if len(peers) > 1:
                out.append(PathCandidate(PathName.MULTI_GPU, peers))
            out.append(PathCandidate(PathName.CPU_OFFLOAD, peers))
    out.append(PathCandidate(PathName.CPU, []))
    return out


Ranges = list[tuple[str, int, int]]


def _slots_for(
    ev: FitEvaluator, cand: PathCandidate
) -> tuple[Ranges, int | None, list[float] | None]:
    """Slot runs, -ngl and --tensor-split (None: llama.cpp's default) of a path."""
    n = ev.g.n_layer
    if cand.name is PathName.CPU:
        return [(CPU, 0, n + 1)], 0, None
    if cand.name is PathName.UNIFIED:
        return [(gpu_device(cand.gpu_ids[0]), 0, n + 1)], n + 1, None
    ids = cand.gpu_ids
    ngl = ev.max_ngl(ids) if cand.name is PathName.CPU_OFFLOAD else n + 1
    ranges = llama_cpp_ranges(n, ngl, ev.default_split(ids), ids)
    if cand.name is PathName.MULTI_GPU and not all(
        t.fits for t in ev.tally_ranges(ranges).values()
    ):
        split = ev.fill_split(ids)
        filled = llama_cpp_ranges(n, ngl, split, ids)
        if all(t.fits for t in ev.tally_ranges(filled).values()):
            return filled, ngl, split
    return ranges, ngl, None


def _measure(
    tally: dict[str, DeviceTally], cand: PathCandidate
) -> tuple[bool, int, int, int, MemoryBreakdown]:
    """(fits, required, usable, shortfall, breakdown) of a path from its device tallies."""
    if cand.name in (PathName.GPU, PathName.MULTI_GPU):
        shown = [t for d, t in tally.items() if d != CPU]
    else:
        shown = list(tally.values())
    required = sum(t.required_bytes for t in shown)
    if cand.name is PathName.UNIFIED:
        # one pool: the CPU-side buffers live in the same memory as the GPU's
        usable = sum(t.usable_bytes for d, t in tally.items() if d != CPU)
        fits = required <= usable * (1 - HEADROOM)
        shortfall = max(0, math.ceil(required / (1 - HEADROOM)) - usable)
    else:
        usable = sum(t.usable_bytes for t in shown)
        fits = all(t.fits for t in tally.values())
        shortfall = sum(t.shortfall_bytes for t in tally.values())
    breakdown = MemoryBreakdown(
        weights_bytes=sum(t.weights_bytes for t in shown),
        kv_bytes=sum(t.kv_bytes for t in shown),
        compute_bytes=sum(t.compute_bytes for t in shown),
        reserve_bytes=sum(t.reserve_bytes for t in shown),
    )
    return fits, required, usable, shortfall, breakdown


@dataclass(frozen=True, slots=True)
class _Trial:
    quant: str
    layout: WeightsLayout
    ranges: Ranges
    ngl: int | None
    split: list[float] | None
    fits: bool
    required: int
    usable: int
    shortfall: int
    breakdown: MemoryBreakdown


def _try(spec: ModelSpec, rig: Rig, s: PlanSettings, cand: PathCandidate, quant: str) -> _Trial:
    layout = weights_layout(spec, quant)
    ev = FitEvaluator(spec.geometry, layout, rig, s, repack_for(spec, quant, rig.cpu.features))
    ranges, ngl, split = _slots_for(ev, cand)
    fits, required, usable, shortfall, breakdown = _measure(ev.tally_ranges(ranges), cand)
    return _Trial(quant, layout, ranges, ngl, split, fits, required, usable, shortfall, breakdown)


def _surely_too_big(layout: WeightsLayout, kv_bytes: int, rig: Rig, cand: PathCandidate) -> bool:
    """A cheap lower bound: weights plus KV beyond everything the path's devices hold."""
    need = layout.total_bytes + kv_bytes
    if cand.name is PathName.CPU:
        usable = rig.ram_usable_bytes
    else:
        need -= layout.input_bytes  # stays on the CPU
        usable = sum(rig.gpus[i].capacity_bytes for i in cand.gpu_ids)
        if cand.name is PathName.CPU_OFFLOAD:
            usable += rig.ram_usable_bytes + layout.input_bytes
    return need > usable


def quants_to_try(spec: ModelSpec, s: PlanSettings, cand: PathCandidate) -> list[str]:
    if s.quant is not None:
        return [s.quant]
    quants = [q for q in spec.available_quants]
    if cand.name is not PathName.CPU:
        quants = [q for q in quants if q not in spec.cpu_only_quants]
    return quants


def placement_from_ranges(spec: ModelSpec, rig: Rig, s: PlanSettings, ranges: Ranges) -> Placement:
    slots = [d for d, lo, hi in ranges for _ in range(lo, hi)]
    p = uniform_placement(spec.geometry, rig, s, CPU)
    units = tuple(
        u if u.index < 0 else u.model_copy(update={"device": slots[u.index]}) for u in p.units
    )
    return p.model_copy(update={"units": units})


def plan_path(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    perf: PerfProfile,
    cand: PathCandidate,
) -> tuple[PathPlan, WeightsLayout]:
    g = spec.geometry
    quants = quants_to_try(spec, s, cand)
    if not quants:
        raise ValueError("no quantization to plan")
    chosen: _Trial | None = None
    last: _Trial | None = None
    context_ok = s.context <= g.context_length
    kv_bytes = kv_total_fast(g, s)  # the same for every quantization
    for i, q in enumerate(quants):
        if i < len(quants) - 1 and _surely_too_big(weights_layout(spec, q), kv_bytes, rig, cand):
            continue  # the last quant is always tried in full: its figures are shown
        trial = _try(spec, rig, s, cand, q)
        last = trial
        if trial.fits and context_ok:
            chosen = trial
            break
    shown = chosen or last
    assert shown is not None
    fits = chosen is not None
    file_bytes = (
        spec.published[shown.quant].file_bytes
        if shown.quant in spec.published
        else file_bytes_estimate(shown.layout, g)
    )
    reason: Reason | None = None
    shortfall: int | None = None
    disk_short = rig.disk_free_bytes is not None and file_bytes > rig.disk_free_bytes
    if not context_ok:
        reason, fits = Reason.CONTEXT, False
    elif not fits:
        reason = Reason.RAM if cand.name in (PathName.CPU, PathName.CPU_OFFLOAD) else Reason.VRAM
        shortfall = shown.shortfall
    elif disk_short:
        reason = Reason.DISK
    if fits:
        ev = FitEvaluator(g, shown.layout, rig, s)
        depth = min(s.prompt_tokens, s.context)
        throughput = decode_from_reads(
            ev.read_bytes(shown.ranges, s.context),
            ev.read_bytes(shown.ranges, depth),
            max(len([r for r in shown.ranges if r[2] > 0]) - 1, 0),
            rig,
            s,
            perf,
        )
        prefill = prefill_from_reads(ev.read_bytes(shown.ranges, 0), shown.layout, rig, s, perf)
    else:
        throughput = Throughput(basis="unknown: does not fit")
        prefill = Prefill(
            prompt_tokens=min(s.prompt_tokens, s.context), basis="unknown: does not fit"
        )
    devices = tuple(sorted({d for d, _, _ in shown.ranges} | {CPU}, key=lambda d: (d != CPU, d)))
    plan = PathPlan(
        path=cand.name,
        fits=fits,
        quant=shown.quant,
        required_bytes=shown.required,
        usable_bytes=shown.usable,
        shortfall_bytes=shortfall,
        reason=reason,
        gpu_count=len(cand.gpu_ids),
        devices=devices,
        ngl=shown.ngl,
        tensor_split=tuple(shown.split) if shown.split else None,
        breakdown=shown.breakdown,
        throughput=throughput,
        prefill=prefill,
        file_bytes=file_bytes,
    )
    return plan, shown.layout


GPU_ONLY = (PathName.UNIFIED, PathName.GPU, PathName.MULTI_GPU)


def choose_recommended(paths: Sequence[PathPlan], spec: ModelSpec) -> PathPlan | None:
    """The first path that fits, unless a later GPU-only path fits a better quantization:
    two GPUs at Q6_K beat one GPU at Q2_K, while RAM offload never wins on quality
    alone (it is an order of magnitude slower)."""
    fitting = [p for p in paths if p.fits]
    gpu_only = [p for p in fitting if p.path in GPU_ONLY]
    if not gpu_only:
        return fitting[0] if fitting else None
    order = {q: i for i, q in enumerate(spec.available_quants)}
    return min(gpu_only, key=lambda p: (order.get(p.quant or "", len(order)), paths.index(p)))


def recommended_placement(
    spec: ModelSpec, rig: Rig, s: PlanSettings, path: PathPlan
) -> tuple[Placement, tuple[DeviceLoad, ...]]:
    layout = weights_layout(spec, path.quant or spec.available_quants[-1])
    if path.path is PathName.CPU:
        placement = uniform_placement(spec.geometry, rig, s, CPU)
    else:
        ids = [int(d.split(":")[1]) for d in path.devices if d != CPU]
        placement = auto_place(
            spec.geometry, rig, s, ngl=path.ngl, tensor_split=path.tensor_split, gpu_ids=ids
        )
    quant = path.quant or spec.available_quants[-1]
    repack = repack_for(spec, quant, rig.cpu.features)
    return placement, device_loads(placement, spec.geometry, layout, rig, s, cpu_repack=repack)
