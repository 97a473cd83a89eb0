"""Every catalog model ranked for one rig at the current context and KV choice."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.model_spec import Frozen, ModelSpec
from rigspark_gui.core.paths import (
    GPU_ONLY,
    PathName,
    PathPlan,
    candidate_paths,
    choose_recommended,
    plan_path,
)
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.throughput import PerfProfile
from rigspark_gui.core.weights import weights_layout

# Below this many tokens per second (the low end of the estimate) a chat feels slow:
# roughly reading speed.
SLOW_TOK_S = 8.0


class Verdict(StrEnum):
    FITS = "fits"
    SLOW = "slow"
    NO = "no"


class RankedModel(Frozen):
    model_id: str
    name: str
    family: str
    params: int
    verdict: Verdict
    path: PathName | None
    quant: str | None
    required_bytes: int
    low_tok_s: float | None
    high_tok_s: float | None
    note: str = ""


def _first_fit(
    spec: ModelSpec, rig: Rig, s: PlanSettings, perf: PerfProfile
) -> tuple[PathPlan | None, list[PathPlan]]:
    """The recommended path (first that fits), planning no further than needed."""
    tried: list[PathPlan] = []
    cpu_only = bool(spec.cpu_only_quants) and set(spec.available_quants) <= set(
        spec.cpu_only_quants
    )
    for cand in candidate_paths(rig, cpu_only):
        p, _ = plan_path(spec, rig, s, perf, cand)
        tried.append(p)
        if p.fits and (cand.name not in GPU_ONLY or p.quant == spec.available_quants[0]):
            break  # nothing later can be recommended over it
    return choose_recommended(tried, spec), tried


def rank_model(spec: ModelSpec, rig: Rig, s: PlanSettings, perf: PerfProfile) -> RankedModel:
    """One model's verdict, best path, quant, memory and speed (context capped at its own)."""
    ctx = min(s.context, spec.geometry.context_length)
    settings = s.model_copy(update={"context": ctx, "quant": None})
    base = {
        "model_id": spec.id,
        "name": spec.name,
        "family": spec.family,
        "params": weights_layout(spec, spec.available_quants[0]).n_params,
    }
    try:
        best, tried = _first_fit(spec, rig, settings, perf)
    except RigSparkError as err:
        return RankedModel(
            **base, verdict=Verdict.NO, path=None, quant=None, required_bytes=0,
            low_tok_s=None, high_tok_s=None, note=str(err),
        )  # fmt: skip
    if best is None:
        smallest = min(tried, key=lambda x: x.shortfall_bytes or 0)
        return RankedModel(
            **base, verdict=Verdict.NO, path=None, quant=smallest.quant,
            required_bytes=smallest.required_bytes, low_tok_s=None, high_tok_s=None,
            note=f"needs {smallest.shortfall_bytes or 0:,} B more on {smallest.path}",
        )  # fmt: skip
    t = best.throughput
    slow = t.known and t.low_tok_s is not None and t.low_tok_s < SLOW_TOK_S
    return RankedModel(
        **base, verdict=Verdict.SLOW if slow else Verdict.FITS, path=best.path,
        quant=best.quant, required_bytes=best.required_bytes, low_tok_s=t.low_tok_s,
        high_tok_s=t.high_tok_s, note="" if ctx == s.context else f"context capped at {ctx}",
    )  # fmt: skip


def rank_models(
    specs: Sequence[ModelSpec], rig: Rig, s: PlanSettings, perf: PerfProfile
) -> list[RankedModel]:
    """Every model ranked: those that fit first (biggest first), then slow, then no."""
    rows = [rank_model(spec, rig, s, perf) for spec in specs]
    order = {Verdict.FITS: 0, Verdict.SLOW: 1, Verdict.NO: 2}
    rows.sort(key=lambda r: (order[r.verdict], -r.params))
    return rows
