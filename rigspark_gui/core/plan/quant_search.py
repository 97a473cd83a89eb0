"""A path's quantizations tried best quality first: which ones the path may use, cheap
bounds that skip those too big to fit without synthesizing them, each fitting trial's
decode time, and Auto's choice with the trade-off it made said in one sentence.

Auto's rule (docs/architecture.md, "Auto"): the best quality that reaches the minimum
speed; when none does, the fastest among those no worse than the quality floor
("moderate loss" of KL divergence), speeds within the speed band of the fastest counting
as a tie that the better quality wins; below the floor only when nothing above it fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from rigspark_gui.core.memory import WeightsLayout, weights_floor, weights_layout
from rigspark_gui.core.model import ModelSpec, loss_words
from rigspark_gui.core.placement import FitContext, device_capacity
from rigspark_gui.core.plan.expert_offload import expert_trial, experts_win
from rigspark_gui.core.plan.path_fit import Trial, try_quant
from rigspark_gui.core.plan.paths import GPU_ONLY, PathCandidate, PathName, QuantOption
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import (
    DecodeShape,
    DecodeTime,
    SpeedModel,
    Throughput,
    decode_depth,
    decode_time,
    layers_in_ranges,
    remote_runs,
    rpc_seconds,
    throughput_of,
)


def _memory_bound(rig: Rig, cand: PathCandidate) -> int:
    """Everything the path's devices hold, for a cheap lower-bound test of each quant."""
    if cand.name is PathName.CPU:
        return rig.ram_usable_bytes
    usable = sum(rig.gpus[i].capacity_bytes for i in cand.gpu_ids)
    usable += sum(device_capacity(rig, d)[0] for d in cand.order if isinstance(d, str))
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


class PathSearch(NamedTuple):
    """A path's quantization search: the trial Auto chose (or, when nothing fits, the
    last one tried, whose figures are shown), its decode estimate, and the ladder."""

    cand: PathCandidate
    trial: Trial
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


Timed = tuple[Trial, DecodeTime | str | None]  # a fitting trial and its decode time


def trial_time(trial: Trial, rig: Rig, s: PlanSettings, speed: SpeedModel) -> DecodeTime | str:
    """Decode time of one trial's placement (or why it is unknown)."""
    depth = decode_depth(s)
    shape = DecodeShape(
        trial.ev.read_bytes(trial.ranges, depth, trial.cpu_experts),
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


# Speeds within this share of the fastest are a tie that the better quality wins: a
# CPU's RAM bandwidth measured on a busy machine moves by about this much around its mean
# (22.7 to 34.4 GB/s on one 2-vCPU VM within half an hour, issue #29), and every CPU
# estimate with it, so closer speeds are not told apart.
SPEED_BAND = 0.25
# How far the measured RAM bandwidth may be from the machine's own (the same busy-machine
# spread, rounded up): a quantization within SPEED_BAND of the fastest at every bandwidth
# in that range is a tie. Where decoding turns from memory- to compute-bound inside the
# range, the speeds' ratios move with the bandwidth and a tie judged at one figure flips
# with the measurement; at the low end every quantization is memory-bound and the speeds
# scale together, so a tie that must also hold there moves far less.
BANDWIDTH_SPREAD = 0.30
# When nothing reaches the minimum speed, Auto trades quality for speed no further than
# this (the words of core/model/quality.py, best first).
QUALITY_FLOOR = "moderate loss"
_LOSS_ORDER = (
    "no loss",
    "no visible loss",
    "very small loss",
    "small loss",
    "moderate loss",
    "large loss",
    "severe loss",
)


def above_floor(spec: ModelSpec, quant: str, floor: str = QUALITY_FLOOR) -> bool:
    """Whether a quantization's measured quality is no worse than `floor` (an unmeasured
    one cannot be held against it)."""
    q = spec.quality.get(quant)
    if q is None or q.kld is None:
        return True
    return _LOSS_ORDER.index(loss_words(q.kld)) <= _LOSS_ORDER.index(floor)


def _words(spec: ModelSpec, quant: str) -> str:
    q = spec.quality.get(quant)
    return f"{quant} ({q.words})" if q is not None and q.kld is not None else quant


def _fastest(fitting: list[Timed], spread: Sequence[Sequence[float]] = ()) -> Timed:
    """The fastest fitting trial; speeds within SPEED_BAND of it are a tie that the best
    quality (listed first) wins. `spread`: each trial's speeds at the other bandwidths the
    measurement allows (same order); a trial ties only when it is within the band at every
    one of them too (quality is bought only with speed surely near the best)."""
    columns = [[_tok_s(f[1]) or 0.0 for f in fitting], *zip(*spread, strict=False)]
    tops = [max(col) for col in columns]

    def ties(i: int, cols: Sequence[Sequence[float]], top: Sequence[float]) -> bool:
        return all(col[i] >= t * (1 - SPEED_BAND) for col, t in zip(cols, top, strict=True))

    everywhere = next((f for i, f in enumerate(fitting) if ties(i, columns, tops)), None)
    if everywhere is not None:
        return everywhere
    # no trial near the best at every bandwidth: the tie at the measured one decides
    return next(f for i, f in enumerate(fitting) if ties(i, columns[:1], tops[:1]))


def trade_off(
    spec: ModelSpec, fitting: list[Timed], spread: Sequence[Sequence[float]] = ()
) -> Timed:
    """Auto's pick when nothing reaches the minimum speed: the fastest above the quality
    floor, near-ties to the better quality; the fastest of all when nothing above it fits.
    `spread`: each trial's speeds at the RAM bandwidths within BANDWIDTH_SPREAD."""
    kept = [i for i, f in enumerate(fitting) if above_floor(spec, f[0].quant)] or list(
        range(len(fitting))
    )
    rows = [spread[i] for i in kept] if spread else []
    return _fastest([fitting[i] for i in kept], rows)


def bandwidth_spread(
    fitting: list[Timed], rig: Rig, s: PlanSettings, speed: SpeedModel | None
) -> list[list[float]]:
    """Each trial's decode speed with the CPU's RAM bandwidth BANDWIDTH_SPREAD below and
    above the figure measured ([] when it is unknown or there is no speed model)."""
    bw = rig.cpu.memory_bandwidth_gbps
    if speed is None or not bw:
        return []
    rigs = [
        replace(rig, cpu=replace(rig.cpu, memory_bandwidth_gbps=bw * k))
        for k in (1 - BANDWIDTH_SPREAD, 1 + BANDWIDTH_SPREAD)
    ]
    return [[_tok_s(trial_time(f[0], r, s, speed)) or 0.0 for r in rigs] for f in fitting]


def _trade_off_words(spec: ModelSpec, fitting: list[Timed], chosen: Timed) -> str:
    """Why the chosen one and not a faster one: the band, or the floor."""
    speed = _tok_s(chosen[1]) or 0.0
    faster = [f for f in fitting if (_tok_s(f[1]) or 0.0) > speed]
    if not faster:
        return ""
    top = max(faster, key=lambda f: _tok_s(f[1]) or 0.0)
    name = f"{_words(spec, top[0].quant)} at {_fmt(_tok_s(top[1]))}"
    if not above_floor(spec, chosen[0].quant):
        return f" (nothing no worse than {QUALITY_FLOOR} fits)"
    if above_floor(spec, top[0].quant):
        band = f"{SPEED_BAND * 100:.0f} %"
        return f" ({name} is within the {band} speed band: a tie kept at the better quality)"
    return f" ({name} would lose more than {QUALITY_FLOOR} for it)"


def _choice(spec: ModelSpec, fitting: list[Timed], chosen: Timed, min_tok_s: float) -> str:
    """The trade-off Auto made, in one sentence ("" when the best quality was fast)."""
    best_trial, best_t = fitting[0]
    speed = _fmt(_tok_s(chosen[1]))
    if meets(chosen[1], min_tok_s):
        if chosen[0] is best_trial:
            return ""
        floor = (
            ""
            if above_floor(spec, chosen[0].quant)
            else (f" (nothing no worse than {QUALITY_FLOOR} fits)")
        )
        return (
            f"{best_trial.quant} fits at {_fmt(_tok_s(best_t))}, below the {min_tok_s:g} "
            f"tok/s minimum; {chosen[0].quant} reaches {speed}{floor}"
        )
    why = _trade_off_words(spec, fitting, chosen)
    below = next((f for f in fitting if meets(f[1], min_tok_s)), None)
    reach = (
        f"only quantizations below the {QUALITY_FLOOR} floor reach {min_tok_s:g} tok/s "
        f"here ({_words(spec, below[0].quant)} at {_fmt(_tok_s(below[1]))})"
        if below is not None
        else f"no quantization reaches {min_tok_s:g} tok/s here"
    )
    return f"{reach}; {_words(spec, chosen[0].quant)} at {speed} is the best trade-off{why}"


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
    best trade-off (`trade_off`). `full_ladder` keeps trying to list every quantization
    that fits.
    `ctx` shares what the quantizations have in common across searches of one model."""
    quants = quants_to_try(spec, s, cand) if quants is None else quants
    if not quants:
        raise ValueError("no quantization to plan")
    chosen: Timed | None = None
    last: Trial | None = None
    fitting: list[Timed] = []
    context_ok = s.context <= spec.geometry.context_length
    ctx = FitContext(spec.geometry, rig, s) if ctx is None else ctx
    bound = _memory_bound(rig, cand)
    gpu_only = cand.name in GPU_ONLY and cand.name is not PathName.UNIFIED
    # the best quality below the quality floor that reaches the speed: Auto's pick only
    # when nothing above the floor fits
    fast_below: Timed | None = None
    for i, q in enumerate(quants):
        last_one = i == len(quants) - 1
        kept = s.quant is not None or above_floor(spec, q)
        if not kept and not full_ladder and any(above_floor(spec, f[0].quant) for f in fitting):
            break  # the floor holds: a quantization above it fits
        if not last_one and weights_floor(spec, q, gpu_only) + ctx.kv_total > bound:
            continue  # too big even at its floor: no need to synthesize its layout
        layout = weights_layout(spec, q)
        if not last_one and _surely_too_big(layout, ctx.kv_total, bound, cand):
            continue  # the last quant is always tried in full: its figures are shown
        trial = try_quant(spec, ctx, cand, q, layout, last)
        last = trial
        experts = expert_trial(cand, trial)
        if not ((trial.m.fits or experts is not None) and context_ok):
            continue
        t = trial_time(trial, rig, s, speed) if speed is not None and trial.m.fits else None
        if experts is not None:
            # MoE on GPUs + RAM: the experts in system memory, unless the layer split
            # decodes faster
            t_exp = trial_time(experts, rig, s, speed) if speed is not None else None
            if not trial.m.fits or experts_win(t_exp, t):
                trial, t = experts, t_exp
                last = trial
        fitting.append((trial, t))
        if chosen is None and meets(t, s.min_tok_s):
            if kept:
                chosen = (trial, t)
                if not full_ladder:
                    break
            elif fast_below is None:
                fast_below = (trial, t)
                if not full_ladder and not any(above_floor(spec, f[0].quant) for f in fitting):
                    break  # worse ones are all below the floor too: this is the best of them
    if chosen is None and fitting:
        above = any(above_floor(spec, f[0].quant) for f in fitting)
        if fast_below is not None and not above:
            chosen = fast_below
        else:
            chosen = trade_off(spec, fitting, bandwidth_spread(fitting, rig, s, speed))
    choice = ""
    if chosen is not None and s.quant is None and s.min_tok_s > 0:
        choice = _choice(spec, fitting, chosen, s.min_tok_s)
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
