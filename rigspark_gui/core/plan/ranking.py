"""Every catalog model ranked for one rig at the current context and KV choice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.memory import param_count
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import FitContext
from rigspark_gui.core.plan.beside_loads import plan_beside
from rigspark_gui.core.plan.defaults import resolve_defaults
from rigspark_gui.core.plan.engine_run import settle
from rigspark_gui.core.plan.path_fit import Trial
from rigspark_gui.core.plan.path_plans import choose_recommended
from rigspark_gui.core.plan.paths import (
    GPU_ONLY,
    PathCandidate,
    PathName,
    candidate_paths,
    cpu_only_model,
    engine_paths,
)
from rigspark_gui.core.plan.projector import placement_gpus, plan_projector
from rigspark_gui.core.plan.quant_search import (
    PathSearch,
    above_floor,
    meets,
    quants_to_try,
    search_path,
)
from rigspark_gui.core.plan.serving_paths import serving_paths
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import DEFAULT_MIN_TOK_S, PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.core.units import gib

# Below this many tokens per second (the point estimate) a chat feels slow: roughly
# reading speed. The user's minimum speed replaces it when set.
SLOW_TOK_S = DEFAULT_MIN_TOK_S


class RankVerdict(StrEnum):
    """A catalog model on a rig: fits at the minimum speed, fits but slowly, or not."""

    FITS = "fits"
    SLOW = "slow"
    NO = "no"


@dataclass(frozen=True, slots=True, kw_only=True)
class RankedModel:
    model_id: str
    name: str
    family: str
    params: int
    verdict: RankVerdict
    path: PathName | None
    quant: str | None
    required_bytes: int
    tok_s: float | None = None
    low_tok_s: float | None
    high_tok_s: float | None
    note: str = ""
    # the quantization's quality cost in words
    quality: str = ""


def _first_fit(
    spec: ModelSpec, rig: Rig, s: PlanSettings, cands: Sequence[PathCandidate], speed: SpeedModel
) -> tuple[PathSearch | None, list[PathSearch]]:
    """The path `choose_recommended` would pick over every path, searching no further
    than needed: once a GPU-only path fits at the minimum speed, RAM paths cannot win and
    later GPU-only paths only with a better quantization, so only those are tried."""
    tried: list[PathSearch] = []
    order = {q: i for i, q in enumerate(spec.available_quants)}
    best_rank: int | None = None  # quant order of the best fast GPU-only fit so far
    ctx = FitContext(spec.geometry, rig, s)
    for cand in cands:
        if best_rank is None:
            p = search_path(spec, rig, s, cand, ctx=ctx, speed=speed)
        elif cand.name not in GPU_ONLY:
            break
        else:
            better = [q for q in quants_to_try(spec, s, cand) if order[q] < best_rank]
            if not better:
                continue
            p = search_path(spec, rig, s, cand, better, ctx, speed)
            if not p.fits or not meets(p.time, s.min_tok_s):
                continue  # its figures for a worse or slow quant are never shown here
        tried.append(p)
        # a fast fit below Auto's quality floor may still lose to a slower one above it
        if p.fits and meets(p.time, s.min_tok_s) and above_floor(spec, p.trial.quant):
            if cand.name not in GPU_ONLY:
                break  # the first fast fit, and no GPU-only path reached the speed before it
            best_rank = order[p.trial.quant]
            if best_rank == 0:
                break
    return choose_recommended(tried, spec, s.min_tok_s), tried


def rank_model(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    cands: dict[bool, list[PathCandidate] | RigSparkError] | None = None,
) -> RankedModel:
    """One model's verdict, best path, quant, memory and speed (context capped at its own):
    what `plan` recommends, without building every path's report. `cands`: the rig's
    candidate paths by cpu-only flag, when ranking many models."""
    s, _ = resolve_defaults(spec, rig, s)
    beside: dict[str, int] = {}
    row: RankedModel | None = None
    if spec.projector is not None or spec.draft is not None:
        own_rig, own_s = rig, s
        s, rig, beside = plan_beside(spec, own_rig, own_s)  # set aside first, as plan() does
        row = _rank_resolved(spec, rig, s, speed, cands, beside)
        # llama-server puts the projector on the first GPU the path's command shows
        seen = _path_gpus(own_rig, own_s, row.path)
        at = plan_projector(spec, own_rig, own_s)
        moved = plan_projector(spec, own_rig, own_s, seen)
        if at is not None and moved is not None and at.device != moved.device:
            s, rig, beside = plan_beside(spec, own_rig, own_s, seen)
            row = None
    if row is None:
        row = _rank_resolved(spec, rig, s, speed, cands, beside)
    if row.path is None or row.quant is None:
        return row
    _, bigger = settle(spec, rig, s, row.quant, row.path, True)
    if bigger is None:
        return row
    return _rank_resolved(spec, rig, replace(s, context=bigger), speed, cands, beside)


def _path_gpus(rig: Rig, s: PlanSettings, path: PathName | None) -> list[int] | None:
    """The GPUs a path's launch command shows (None: all of them), as `plan` finds them
    from its placement."""
    cand = next((c for c in candidate_paths(rig, False) if c.name is path), None)
    if cand is None:
        return None
    return placement_gpus([i for i in cand.gpu_ids if i in rig.local_gpus], rig, s)


def _beside_bytes(trial: Trial, path: PathName, beside: Mapping[str, int]) -> int:
    """What loads beside the model on a path's devices, as `plan` counts it in the
    path's required memory (`paths_beside`): its GPUs' share, and system memory's on
    the paths that plan it."""
    used = {d for d, _, _ in trial.ranges}
    ram = path in (PathName.CPU, PathName.CPU_OFFLOAD)
    return sum(n for d, n in beside.items() if (d in used and d != "cpu") or (d == "cpu" and ram))


def _rank_resolved(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    cands: dict[bool, list[PathCandidate] | RigSparkError] | None = None,
    beside: Mapping[str, int] | None = None,
) -> RankedModel:
    """`beside`: the projector's and draft's bytes per device, counted in the memory
    shown (the fit decisions saw them set aside on the rig)."""
    beside = beside or {}
    ctx = min(s.context, spec.geometry.context_length)
    settings = s
    if ctx != s.context or s.quant is not None:
        settings = replace(s, context=ctx, quant=None)
    base: dict[str, Any] = {
        "model_id": spec.id,
        "name": spec.name,
        "family": spec.family,
        "params": param_count(spec).total,
    }
    if s.backend.serving:
        return _rank_serving(spec, rig, settings, speed, base, ctx != s.context)
    cpu_only = cpu_only_model(spec)
    try:
        # the engine may run no path for this model here (vLLM and a CPU-only model)
        paths = (
            cands[cpu_only]
            if cands is not None
            else engine_paths(candidate_paths(rig, cpu_only), rig, s.backend)
        )
        if isinstance(paths, RigSparkError):
            raise paths
        best, tried = _first_fit(spec, rig, settings, paths, speed)
    except RigSparkError as err:
        return RankedModel(
            **base, verdict=RankVerdict.NO, path=None, quant=None, required_bytes=0,
            low_tok_s=None, high_tok_s=None, note=str(err),
        )  # fmt: skip
    if best is None:
        smallest = min(tried, key=lambda x: x.trial.m.shortfall)
        return RankedModel(
            **base, verdict=RankVerdict.NO, path=None, quant=smallest.quant,
            required_bytes=smallest.trial.m.required
            + _beside_bytes(smallest.trial, smallest.path, beside), low_tok_s=None, high_tok_s=None,
            note=f"needs {gib(smallest.trial.m.shortfall)} more on {smallest.path}",
        )  # fmt: skip
    t = best.speed
    line = s.min_tok_s or SLOW_TOK_S
    slow = t is not None and t.tok_s is not None and t.tok_s < line
    note = "" if ctx == s.context else f"context capped at {ctx}"
    return RankedModel(
        **base, verdict=RankVerdict.SLOW if slow else RankVerdict.FITS, path=best.path,
        quant=best.quant,
        required_bytes=best.trial.m.required + _beside_bytes(best.trial, best.path, beside),
        quality=q.label if (q := spec.quality.get(best.quant or "")) is not None else "",
        tok_s=t.tok_s if t else None, low_tok_s=t.low_tok_s if t else None,
        high_tok_s=t.high_tok_s if t else None, note=note,
    )  # fmt: skip


def _rank_serving(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    base: dict[str, Any],
    capped: bool,
) -> RankedModel:
    """vLLM and SGLang: the serving plan's recommendation (checkpoint formats)."""
    try:
        paths = serving_paths(spec, rig, s, speed, ladders=False)
    except RigSparkError as err:
        return RankedModel(**
            {**base, "verdict": RankVerdict.NO, "path": None, "quant": None, "required_bytes": 0,
             "low_tok_s": None, "high_tok_s": None, "note": str(err)}
        )  # fmt: skip
    best = choose_recommended(paths, spec, s.min_tok_s)
    if best is None:
        near = min(paths, key=lambda p: p.shortfall_bytes or 0)
        short = near.shortfall_bytes
        refusal = near.serving.refusal if near.serving is not None else None
        note = f"needs {gib(short)} more on {near.path}" if short else (refusal or "")
        return RankedModel(**
            {**base, "verdict": RankVerdict.NO, "path": None, "quant": near.quant,
             "required_bytes": near.required_bytes, "low_tok_s": None, "high_tok_s": None,
             "note": note[:200]}
        )  # fmt: skip
    t = best.throughput
    line = s.min_tok_s or SLOW_TOK_S
    slow = t.tok_s is not None and t.tok_s < line
    return RankedModel(**
        {**base, "verdict": RankVerdict.SLOW if slow else RankVerdict.FITS, "path": best.path,
         "quant": best.quant, "required_bytes": best.required_bytes, "tok_s": t.tok_s,
         "low_tok_s": t.low_tok_s, "high_tok_s": t.high_tok_s,
         "note": f"context capped at {s.context}" if capped else ""}
    )  # fmt: skip


def rank_models(
    specs: Sequence[ModelSpec], rig: Rig, s: PlanSettings, speed: SpeedModel
) -> list[RankedModel]:
    """Every model ranked: those that fit first (biggest first), then slow, then no."""
    cands: dict[bool, list[PathCandidate] | RigSparkError] = {}
    for flag in (False, True):
        try:
            cands[flag] = engine_paths(candidate_paths(rig, flag), rig, s.backend)
        except RigSparkError as err:  # said per model, as its verdict's note
            cands[flag] = err
    rows = [rank_model(spec, rig, s, speed, cands) for spec in specs]
    order = {RankVerdict.FITS: 0, RankVerdict.SLOW: 1, RankVerdict.NO: 2}
    rows.sort(key=lambda r: (order[r.verdict], -r.params))
    return rows
