"""Every path a model can run on, the plan that recommends one, the catalog ranked on a
rig, and the smallest changes that buy a better plan.

The public face of planning; other packages import from here only."""

from rigspark_gui.core.plan.beside_loads import loads_with_beside, rig_beside
from rigspark_gui.core.plan.defaults import (
    LLAMA_SERVER_SLOTS,
    DeviceFlash,
    Resolved,
    resolve_defaults,
)
from rigspark_gui.core.plan.draft import DraftLoad
from rigspark_gui.core.plan.engine_run import SAME_AS_FIT, engine_fit, fit_sentence
from rigspark_gui.core.plan.expert_offload import auto_placement
from rigspark_gui.core.plan.paths import (
    PLAN_SCHEMA_VERSION,
    PathName,
    PathPlan,
    Verdict,
)
from rigspark_gui.core.plan.planner import (
    COMMON_KV_PAIRS,
    KvComparisonRow,
    Plan,
    kv_comparison,
    kv_quant,
    plan,
)
from rigspark_gui.core.plan.projector import (
    claimed_rig,
    plan_projector,
    with_projector,
    with_projector_fit,
)
from rigspark_gui.core.plan.quant_search import QUALITY_FLOOR, SPEED_BAND
from rigspark_gui.core.plan.ranking import (
    RankedModel,
    RankVerdict,
    rank_models,
)
from rigspark_gui.core.plan.suggestions import (
    Suggestion,
    rig_after,
    smaller_models,
    suggest,
)

__all__ = [
    "COMMON_KV_PAIRS",
    "LLAMA_SERVER_SLOTS",
    "PLAN_SCHEMA_VERSION",
    "QUALITY_FLOOR",
    "SAME_AS_FIT",
    "SPEED_BAND",
    "DeviceFlash",
    "DraftLoad",
    "KvComparisonRow",
    "PathName",
    "PathPlan",
    "Plan",
    "RankVerdict",
    "RankedModel",
    "Resolved",
    "Suggestion",
    "Verdict",
    "auto_placement",
    "claimed_rig",
    "engine_fit",
    "fit_sentence",
    "kv_comparison",
    "kv_quant",
    "loads_with_beside",
    "plan",
    "plan_projector",
    "rank_models",
    "resolve_defaults",
    "rig_after",
    "rig_beside",
    "smaller_models",
    "suggest",
    "with_projector",
    "with_projector_fit",
]
