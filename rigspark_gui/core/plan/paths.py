"""Every execution path a rig offers for one model (the idea of `plan.rs`).

Paths: `unified` (shared memory), `gpu` (largest single GPU), `multi-gpu` (all peers of
one vendor), `multi-host` (those peers on every host of the rig, over llama.cpp RPC),
`cpu-offload` (GPUs plus RAM: as many slots on the GPUs as fit), `cpu`.
Each reports fit, the best quantization that fits, required and usable bytes, the
shortfall, a reason, and speed. The recommended path is the first that fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NamedTuple, Protocol, TypeVar

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.memory import (
    WeightsLayout,
    file_bytes_estimate,
    repack_for,
    weights_floor,
    weights_layout,
)
from rigspark_gui.core.model import ModelSpec, QuantQuality
from rigspark_gui.core.placement import (
    CPU,
    HEADROOM,
    DeviceLoad,
    DeviceTally,
    FitContext,
    FitEvaluator,
    Placement,
    auto_place,
    device_loads,
    gpu_device,
    llama_cpp_ranges,
    rig_devices,
    uniform_placement,
)
from rigspark_gui.core.rig import Gpu, Rig, Vendor
from rigspark_gui.core.serving import ServingPlan
from rigspark_gui.core.settings import Backend, PlanSettings
from rigspark_gui.core.speed import (
    DecodeShape,
    DecodeTime,
    Prefill,
    SpeedModel,
    Throughput,
    decode_depth,
    decode_time,
    estimate_prefill_reads,
    layers_in_ranges,
    remote_runs,
    rpc_seconds,
    throughput_of,
)

PLAN_SCHEMA_VERSION = 1
DISCRETE_VENDORS = (Vendor.NVIDIA, Vendor.AMD, Vendor.INTEL)


class PathName(StrEnum):
    UNIFIED = "unified"
    GPU = "gpu"
    MULTI_GPU = "multi-gpu"
    MULTI_HOST = "multi-host"
    CPU_OFFLOAD = "cpu-offload"
    CPU = "cpu"


class Reason(StrEnum):
    VRAM = "vram-bound"
    RAM = "ram-bound"
    CONTEXT = "context-bound"
    DISK = "disk-bound"
    LAYOUT = "layout-bound"

    @property
    def words(self) -> str:
        """What limits the path, as a person says it."""
        return REASON_WORDS[self]


REASON_WORDS = {
    Reason.VRAM: "GPU memory",
    Reason.RAM: "system RAM",
    Reason.CONTEXT: "the model's trained context",
    Reason.DISK: "free disk space",
    Reason.LAYOUT: "how the heads split over the GPUs",
}

# One verdict vocabulary for chart, table, lanes, report and CLI: a path that fits with
# less than this share of its usable memory to spare is "tight".
TIGHT_SHARE = 0.10


class Verdict(StrEnum):
    FITS = "fits"
    TIGHT = "tight"
    NO = "does not fit"

    @property
    def mark(self) -> str:
        return {"fits": "✓", "tight": "⚠", "does not fit": "✗"}[self.value]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    reserve_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantOption:
    """One rung of a path's quality/speed ladder: a quantization that fits there."""

    quant: str
    required_bytes: int
    # decode point estimate; None when unknown
    tok_s: float | None
    # its measured quality cost
    quality: QuantQuality | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PathPlan:
    path: PathName
    fits: bool
    # best quantization that fits, or the one shown
    quant: str | None
    required_bytes: int
    usable_bytes: int
    # extra usable memory needed before the smallest quantization fits
    shortfall_bytes: int | None
    reason: Reason | None
    gpu_count: int
    devices: tuple[str, ...]
    # llama.cpp -ngl of this path's placement
    ngl: int | None
    # llama.cpp --tensor-split when the default one would not fit
    tensor_split: tuple[float, ...] | None = None
    breakdown: MemoryBreakdown
    throughput: Throughput
    prefill: Prefill
    file_bytes: int
    # every quantization that fits on this path, best quality first
    ladder: tuple[QuantOption, ...] = ()
    # why this quantization, in one sentence
    choice: str = ""
    # the quantization's measured quality cost, with its basis
    quality: QuantQuality | None = None
    # a serving engine's own start-up figures (vLLM, SGLang)
    serving: ServingPlan | None = None

    @property
    def tok_s(self) -> float | None:
        return self.throughput.tok_s

    @property
    def verdict(self) -> Verdict:
        """fits, tight (under 10 % of usable memory to spare) or does not fit."""
        if not self.fits:
            return Verdict.NO
        if self.usable_bytes - self.required_bytes < TIGHT_SHARE * max(self.usable_bytes, 1):
            return Verdict.TIGHT
        return Verdict.FITS


class PathCandidate:
    """A path's device set and how to place a model on it."""

    def __init__(self, name: PathName, gpu_ids: Sequence[int]) -> None:
        self.name = name
        self.gpu_ids = list(gpu_ids)


def is_discrete(g: Gpu) -> bool:
    return not g.unified and g.vendor in DISCRETE_VENDORS and g.memory_bytes > 0


def engine_paths(cands: list[PathCandidate], rig: Rig, backend: Backend) -> list[PathCandidate]:
    """The paths an engine can run: MLX only Apple silicon's unified memory, vLLM only
    GPUs (it places no single layer on the CPU); the llama.cpp family every path. An
    engine that can run none here is a clear error, said where it is chosen."""
    if backend is Backend.MLX:
        apple = [c for c in cands if c.name is PathName.UNIFIED and any(
            rig.gpus[i].vendor is Vendor.APPLE for i in c.gpu_ids)]  # fmt: skip
        if not apple:
            raise InvalidSettingsError(
                "MLX runs on Apple silicon only, and this rig has none: choose llama.cpp "
                "(or Ollama, LM Studio, koboldcpp)"
            )
        return apple
    if backend is Backend.VLLM:
        gpus = [c for c in cands if c.name in GPU_ONLY]
        if not gpus:
            raise InvalidSettingsError(
                "vLLM runs on GPUs and this rig has none it can use: choose llama.cpp to "
                "plan the CPU"
            )
        return gpus
    return cands


def candidate_paths(rig: Rig, cpu_only: bool) -> list[PathCandidate]:
    """Single-host paths use this machine's GPUs; `multi-host` adds the other hosts'
    (theirs first: llama.cpp lists RPC devices before local ones, so the head and the
    last layers stay on this machine)."""
    out: list[PathCandidate] = []
    local = rig.local_gpus
    unified = [i for i in local if rig.gpus[i].unified and rig.gpus[i].memory_bytes > 0]
    discrete = [i for i in local if is_discrete(rig.gpus[i])]
    if not cpu_only:
        # a unified-memory SoC (Apple, GB10, Strix Halo) plans on its one pool, also when
        # a rig file names the chip without setting unified_memory
        if unified and (rig.unified_memory or not discrete):
            out.append(PathCandidate(PathName.UNIFIED, unified[:1]))
        elif discrete:
            largest = max(discrete, key=lambda i: (rig.gpus[i].capacity_bytes, -i))
            vendor = rig.gpus[largest].vendor
            peers = [i for i in discrete if rig.gpus[i].vendor == vendor]
            out.append(PathCandidate(PathName.GPU, [largest]))
            if len(peers) > 1:
                out.append(PathCandidate(PathName.MULTI_GPU, peers))
            remote = remote_peers(rig, vendor)
            if remote:
                out.append(PathCandidate(PathName.MULTI_HOST, [*remote, *peers]))
            out.append(PathCandidate(PathName.CPU_OFFLOAD, peers))
        elif not unified:
            # no GPU here, some on other hosts: the layers run there, driven from here
            remote = remote_peers(rig, None)
            if remote:
                out.append(PathCandidate(PathName.MULTI_HOST, remote))
    out.append(PathCandidate(PathName.CPU, []))
    return out


def remote_peers(rig: Rig, vendor: Vendor | None) -> list[int]:
    """The other hosts' discrete GPUs of one vendor (None: the vendor most of them are),
    host by host in the rig's order."""
    order = {name: i for i, name in enumerate(rig.host_names)}
    theirs = [i for i, g in enumerate(rig.gpus) if g.host and is_discrete(g)]
    if vendor is None and theirs:
        vendors = [rig.gpus[i].vendor for i in theirs]
        vendor = max(set(vendors), key=vendors.count)
    ids = [i for i in theirs if rig.gpus[i].vendor == vendor]
    return sorted(ids, key=lambda i: (order.get(rig.gpus[i].host, len(order)), i))


GPU_ONLY = (PathName.UNIFIED, PathName.GPU, PathName.MULTI_GPU, PathName.MULTI_HOST)
SPLIT_PATHS = (PathName.MULTI_GPU, PathName.MULTI_HOST)


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
    ids = cand.gpu_ids
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
    required = usable = shortfall = weights = kv = compute = reserve = 0
    fits = True
    gpu_usable = 0
    for d, t in tally.items():
        fits = fits and t.fits
        shortfall += t.shortfall_bytes
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
        # one pool: the CPU-side buffers live in the same memory as the GPU's
        usable = gpu_usable
        fits = required <= usable * (1 - HEADROOM)
        shortfall = max(0, math.ceil(required / (1 - HEADROOM)) - usable)
    return Measure(fits, required, usable, shortfall, weights, kv, compute, reserve)


class _Trial(NamedTuple):
    quant: str
    layout: WeightsLayout
    ev: FitEvaluator
    ranges: Ranges
    ngl: int | None
    split: list[float] | None
    m: Measure


def _try(
    spec: ModelSpec, ctx: FitContext, cand: PathCandidate, quant: str, layout: WeightsLayout
) -> _Trial:
    rig = ctx.rig
    repack = repack_for(spec, quant, rig.cpu.features)
    ev = FitEvaluator(spec.geometry, layout, rig, ctx.s, repack, ctx)
    ranges, ngl, split, tally = path_slots(ev, cand)
    return _Trial(quant, layout, ev, ranges, ngl, split, measure_path(tally, cand))


def _try_same_slots(
    spec: ModelSpec,
    ctx: FitContext,
    cand: PathCandidate,
    quant: str,
    layout: WeightsLayout,
    like: _Trial,
) -> _Trial:
    """Another quantization on the slots an earlier trial of the path used, without working
    them out again. Only `_try_next` calls it, where the slots cannot depend on the
    quantization."""
    repack = repack_for(spec, quant, ctx.rig.cpu.features)
    ev = FitEvaluator(spec.geometry, layout, ctx.rig, ctx.s, repack, ctx)
    m = measure_path(ev.tally_ranges(like.ranges), cand)
    return _Trial(quant, layout, ev, like.ranges, like.ngl, like.split, m)


def _try_next(
    spec: ModelSpec,
    ctx: FitContext,
    cand: PathCandidate,
    quant: str,
    layout: WeightsLayout,
    like: _Trial | None,
) -> _Trial:
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


def _memory_bound(rig: Rig, cand: PathCandidate) -> int:
    """Everything the path's devices hold, for a cheap lower-bound test of each quant."""
    if cand.name is PathName.CPU:
        return rig.ram_usable_bytes
    usable = sum(rig.gpus[i].capacity_bytes for i in cand.gpu_ids)
    if cand.name is PathName.CPU_OFFLOAD:
        usable += rig.ram_usable_bytes
    return usable


def _surely_too_big(layout: WeightsLayout, kv_bytes: int, bound: int, cand: PathCandidate) -> bool:
    """Weights plus KV beyond `_memory_bound` (the embeddings stay on the CPU, so a GPU-only
    path does not count them)."""
    need = layout.total_bytes + kv_bytes
    if cand.name in GPU_ONLY and cand.name is not PathName.UNIFIED:
        need -= layout.input_bytes
    return need > bound


def quants_to_try(spec: ModelSpec, s: PlanSettings, cand: PathCandidate) -> list[str]:
    if s.quant is not None:
        return [s.quant]
    quants = list(spec.auto_quants)
    if cand.name is not PathName.CPU:
        quants = [q for q in quants if q not in spec.cpu_only_quants]
    return quants


def placement_from_ranges(spec: ModelSpec, rig: Rig, s: PlanSettings, ranges: Ranges) -> Placement:
    slots = [d for d, lo, hi in ranges for _ in range(lo, hi)]
    p = uniform_placement(spec.geometry, rig, s, CPU)
    units = tuple(u if u.index < 0 else replace(u, device=slots[u.index]) for u in p.units)
    return replace(p, units=units)


class PathSearch(NamedTuple):
    """A path's quantization search: the trial Auto chose (or, when nothing fits, the
    last one tried, whose figures are shown), its decode estimate, and the ladder."""

    cand: PathCandidate
    trial: _Trial
    fits: bool
    context_ok: bool
    time: DecodeTime | str | None  # the chosen trial's decode time (str: why unknown)
    ladder: tuple[QuantOption, ...]
    choice: str
    speed_model: SpeedModel | None
    depth: int

    @property
    def speed(self) -> Throughput | None:
        """The chosen trial's decode estimate as plans show it (built on demand: a
        catalog ranking compares thousands of searches and shows one per model)."""
        if self.time is None or self.speed_model is None:
            return None
        return throughput_of(self.time, self.depth, self.speed_model)

    @property
    def path(self) -> PathName:
        return self.cand.name

    @property
    def quant(self) -> str | None:
        return self.trial.quant

    @property
    def tok_s(self) -> float | None:
        return _tok_s(self.time)


Timed = tuple[_Trial, DecodeTime | str | None]  # a fitting trial and its decode time


def trial_time(trial: _Trial, rig: Rig, s: PlanSettings, speed: SpeedModel) -> DecodeTime | str:
    """Decode time of one trial's placement (or why it is unknown)."""
    depth = decode_depth(s)
    shape = DecodeShape(
        trial.ev.read_bytes(trial.ranges, depth),
        layers_in_ranges(trial.ranges, trial.ev.g.n_layer),
        max(len(trial.ranges) - 1, 0),
        depth,
    )
    t = decode_time(shape, trial.layout, rig, s, speed)
    runs = remote_runs(trial.ranges, rig) if rig.hosts else 0
    if runs and not isinstance(t, str):
        t = t._replace(seconds=t.seconds + rpc_seconds(runs, rig, trial.ev.g.n_embd))
    return t


def _tok_s(t: DecodeTime | str | Throughput | None) -> float | None:
    if t is None or isinstance(t, str):
        return None
    return t.tok_s


def meets(t: DecodeTime | str | Throughput | None, min_tok_s: float) -> bool:
    """Whether a decode estimate reaches the minimum speed (an unknown one cannot be held
    against a plan)."""
    v = _tok_s(t)
    return min_tok_s <= 0 or v is None or v >= min_tok_s


def _fmt(tok_s: float | None) -> str:
    if tok_s is None:
        return "unknown speed"
    return f"{tok_s:.1f} tok/s" if tok_s < 100 else f"{tok_s:.0f} tok/s"


# Speeds within this share of the fastest are a tie (the band is wider): the better
# quality among them counts as the fastest.
SPEED_TIE = 0.05


def _fastest(fitting: list[Timed]) -> Timed:
    """The fastest fitting trial; among near-ties, the best quality (listed first)."""
    top = max(_tok_s(f[1]) or 0.0 for f in fitting)
    return next(f for f in fitting if (_tok_s(f[1]) or 0.0) >= top * (1 - SPEED_TIE))


def _choice(fitting: list[Timed], chosen: Timed, min_tok_s: float) -> str:
    """The trade-off Auto made, in one sentence ("" when the best quality was fast)."""
    best_trial, best_t = fitting[0]
    speed = _fmt(_tok_s(chosen[1]))
    if chosen[0] is not best_trial:
        head = (
            f"{best_trial.quant} fits at {_fmt(_tok_s(best_t))}, below the {min_tok_s:g} "
            "tok/s minimum; "
        )
        if meets(chosen[1], min_tok_s):
            return head + f"{chosen[0].quant} reaches {speed}"
        return head + f"none reaches it, {chosen[0].quant} is the fastest at {speed}"
    if not meets(chosen[1], min_tok_s):
        return (
            f"no quantization reaches {min_tok_s:g} tok/s here; {chosen[0].quant} runs at {speed}"
        )
    return ""


def search_path(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    cand: PathCandidate,
    quants: Sequence[str] | None = None,
    ctx: FitContext | None = None,
    speed: SpeedModel | None = None,
    *,
    full_ladder: bool = False,
) -> PathSearch:
    """Try `quants` (default: every quantization the path may use) best quality first.
    Auto takes the first that fits and reaches `s.min_tok_s`; when none reaches it, the
    fastest that fits. `full_ladder` keeps trying to list every quantization that fits.
    `ctx` shares what the quantizations have in common across searches of one model."""
    quants = quants_to_try(spec, s, cand) if quants is None else quants
    if not quants:
        raise ValueError("no quantization to plan")
    chosen: Timed | None = None
    last: _Trial | None = None
    fitting: list[Timed] = []
    context_ok = s.context <= spec.geometry.context_length
    ctx = FitContext(spec.geometry, rig, s) if ctx is None else ctx
    bound = _memory_bound(rig, cand)
    gpu_only = cand.name in GPU_ONLY and cand.name is not PathName.UNIFIED
    for i, q in enumerate(quants):
        last_one = i == len(quants) - 1
        if not last_one and weights_floor(spec, q, gpu_only) + ctx.kv_total > bound:
            continue  # too big even at its floor: no need to synthesize its layout
        layout = weights_layout(spec, q)
        if not last_one and _surely_too_big(layout, ctx.kv_total, bound, cand):
            continue  # the last quant is always tried in full: its figures are shown
        trial = _try_next(spec, ctx, cand, q, layout, last)
        last = trial
        if not (trial.m.fits and context_ok):
            continue
        t = trial_time(trial, rig, s, speed) if speed is not None else None
        fitting.append((trial, t))
        if chosen is None and meets(t, s.min_tok_s):
            chosen = (trial, t)
            if not full_ladder:
                break
    if chosen is None and fitting:
        chosen = _fastest(fitting)
    choice = ""
    if chosen is not None and s.quant is None and s.min_tok_s > 0:
        choice = _choice(fitting, chosen, s.min_tok_s)
    shown = chosen[0] if chosen is not None else last
    assert shown is not None
    ladder = tuple(
        QuantOption(
            quant=tr.quant,
            required_bytes=tr.m.required,
            tok_s=_tok_s(t),
            quality=spec.quality.get(tr.quant),
        )
        for tr, t in fitting
    )
    time = chosen[1] if chosen is not None else None
    return PathSearch(
        cand, shown, chosen is not None, context_ok, time, ladder, choice, speed, decode_depth(s)
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
            shown.ev.read_bytes(shown.ranges, 0),
            layers_in_ranges(shown.ranges, g.n_layer),
            shown.layout,
            rig,
            s,
            speed,
            g.n_embd,  # the attention width the calibration was fitted with
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
        breakdown=shown.m.breakdown(),
        throughput=throughput,
        prefill=prefill,
        file_bytes=file_bytes,
        ladder=search.ladder,
        choice=search.choice,
        quality=spec.quality.get(shown.quant),
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
    fast = [p for p in fitting if min_tok_s <= 0 or p.tok_s is None or p.tok_s >= min_tok_s]
    if not fast:
        return max(fitting, key=lambda p: p.tok_s or 0.0) if fitting else None
    gpu_only = [p for p in fast if p.path in GPU_ONLY]
    if not gpu_only:
        return fast[0]
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
