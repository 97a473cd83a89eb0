"""From a path's quantization search to what a plan shows: each path's `PathPlan`
(reason, shortfall, file size, speed and prefill), the path recommended among them, and
that path's placement with its per-device loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from rigspark_gui.core.flash_attn import attention_shape
from rigspark_gui.core.memory import WeightsLayout, file_bytes_estimate, repack_for, weights_layout
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    DeviceLoad,
    FitContext,
    Placement,
    auto_place,
    device_loads,
    rig_devices,
    uniform_placement,
    with_cpu_moe,
)
from rigspark_gui.core.plan.cpu_loading import cpu_loading
from rigspark_gui.core.plan.path_fit import path_gpus
from rigspark_gui.core.plan.paths import GPU_ONLY, PathCandidate, PathName, PathPlan, Reason
from rigspark_gui.core.plan.quant_search import above_floor, search_path
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import (
    Prefill,
    SpeedModel,
    Throughput,
    estimate_prefill_reads,
    layers_in_ranges,
)


def plan_path(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    cand: PathCandidate,
    ctx: FitContext | None = None,
    *,
    full_ladder: bool = True,
) -> tuple[PathPlan, WeightsLayout]:
    search = search_path(spec, rig, s, cand, ctx=ctx, speed=speed, full_ladder=full_ladder)
    shown, fits = search.trial, search.fits
    g = spec.geometry
    file_bytes = (
        spec.published[shown.quant].file_bytes
        if shown.quant in spec.published
        else file_bytes_estimate(shown.layout, g)
    )
    reason: Reason | None = None
    shortfall: int | None = None
    disk_short = rig.disk_free_bytes is not None and file_bytes > rig.disk_free_bytes
    if not search.context_ok:
        reason = Reason.CONTEXT
    elif not fits:
        reason = Reason.RAM if cand.name in (PathName.CPU, PathName.CPU_OFFLOAD) else Reason.VRAM
        shortfall = shown.m.shortfall
    elif disk_short:
        reason = Reason.DISK
    if fits and search.speed is not None:
        throughput = search.speed
        prefill = estimate_prefill_reads(
            shown.ev.read_bytes(shown.ranges, 0, shown.cpu_experts, state=False),
            layers_in_ranges(shown.ranges, g.n_layer),
            shown.layout,
            rig,
            s,
            speed,
            g.n_embd,  # the attention width the calibration was fitted with
            shape=attention_shape(g),
        )
    else:
        throughput = Throughput(basis="unknown: does not fit")
        prefill = Prefill(
            prompt_tokens=min(s.prompt_tokens, s.context), basis="unknown: does not fit"
        )
    used = {d for d, _, _ in shown.ranges} | {CPU}
    devices = tuple(d for d in rig_devices(rig) if d in used)
    plan = PathPlan(
        path=cand.name,
        fits=fits,
        quant=shown.quant,
        required_bytes=shown.m.required,
        usable_bytes=shown.m.usable,
        shortfall_bytes=shortfall,
        reason=reason,
        gpu_count=len(cand.gpu_ids),
        devices=devices,
        ngl=shown.ngl,
        tensor_split=tuple(shown.split) if shown.split else None,
        n_cpu_moe=shown.cpu_experts or None,
        breakdown=shown.m.breakdown(),
        throughput=throughput,
        prefill=prefill,
        file_bytes=file_bytes,
        ladder=search.ladder,
        choice=search.choice,
        quality=spec.quality.get(shown.quant),
        cpu_loading=cpu_loading(spec, rig, s, cand, shown) if fits else None,
    )
    return plan, shown.layout


class Choosable(Protocol):
    @property
    def fits(self) -> bool: ...
    @property
    def path(self) -> PathName: ...
    @property
    def quant(self) -> str | None: ...
    @property
    def tok_s(self) -> float | None: ...


C = TypeVar("C", bound=Choosable)


def choose_recommended(paths: Sequence[C], spec: ModelSpec, min_tok_s: float = 0.0) -> C | None:
    """Among the paths that fit and reach the minimum speed: the first, unless a later
    GPU-only path fits a better quantization (two GPUs at Q6_K beat one GPU at Q2_K, while
    RAM offload never wins on quality alone). When none reaches it: the fastest."""
    fitting = [p for p in paths if p.fits]
    if min_tok_s > 0 and any(above_floor(spec, p.quant or "") for p in fitting):
        # Auto's quality floor holds across paths as within one (quant_search)
        fitting = [p for p in fitting if above_floor(spec, p.quant or "")]
    # an unknown speed cannot be held against a path, but a path holding weights in
    # system memory does not win on an unknown (its CPU's bandwidth) over paths whose
    # speed is known
    known = any(p.tok_s is not None for p in fitting)
    fast = [
        p
        for p in fitting
        if min_tok_s <= 0
        or (p.tok_s is None and (p.path in GPU_ONLY or not known))
        or (p.tok_s is not None and p.tok_s >= min_tok_s)
    ]
    if not fast:
        return max(fitting, key=lambda p: p.tok_s or 0.0) if fitting else None
    gpu_only = [p for p in fast if p.path in GPU_ONLY]
    if not gpu_only:
        return fast[0]
    order = {q: i for i, q in enumerate(spec.available_quants)}
    return min(gpu_only, key=lambda p: (order.get(p.quant or "", len(order)), paths.index(p)))


def recommended_placement(
    spec: ModelSpec, rig: Rig, s: PlanSettings, path: PathPlan, cand: PathCandidate
) -> tuple[Placement, tuple[DeviceLoad, ...]]:
    """The placement the path was measured with: its -ngl and --tensor-split over the
    candidate's devices (the split counts every one of them, idle ones included)."""
    layout = weights_layout(spec, path.quant or spec.available_quants[-1])
    if path.path is PathName.CPU:
        placement = uniform_placement(spec.geometry, rig, s, CPU)
    else:
        placement = auto_place(
            spec.geometry, rig, s, ngl=path.ngl, tensor_split=path.tensor_split, gpu_ids=cand.order
        )
        if path.n_cpu_moe:
            placement = with_cpu_moe(placement, spec.geometry, path.n_cpu_moe)
    quant = path.quant or spec.available_quants[-1]
    repack = repack_for(spec, quant, rig.cpu.features, s, path_gpus(rig, cand))
    return placement, device_loads(placement, spec.geometry, layout, rig, s, cpu_repack=repack)
