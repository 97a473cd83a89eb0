"""A path's quantizations tried best quality first: which ones the path may use, cheap
bounds that skip those too big to fit without synthesizing them, each fitting trial's
decode time, and Auto's choice (the first that reaches the minimum speed, else the
fastest) with the trade-off it made said in one sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from rigspark_gui.core.memory import WeightsLayout, weights_floor, weights_layout
from rigspark_gui.core.model import ModelSpec
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
    last: Trial | None = None
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
