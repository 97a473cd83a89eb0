"""Every path a model can run on, the plan that recommends one, the catalog ranked on a
rig, and the smallest changes that buy a better plan.

The public face of planning; other packages import from here only."""

from rigspark_gui.core.plan.defaults import (
    LLAMA_SERVER_SLOTS,
    DeviceFlash,
    Resolved,
    resolve_defaults,
)
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
from rigspark_gui.core.plan.ranking import (
    RankedModel,
    RankVerdict,
    rank_models,
)
from rigspark_gui.core.plan.suggestions import (
    Suggestion,
    rig_after,
    suggest,
)

__all__ = [
    "COMMON_KV_PAIRS",
    "LLAMA_SERVER_SLOTS",
    "PLAN_SCHEMA_VERSION",
    "SAME_AS_FIT",
    "DeviceFlash",
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
    "engine_fit",
    "fit_sentence",
    "kv_comparison",
    "kv_quant",
    "plan",
    "rank_models",
    "resolve_defaults",
    "rig_after",
    "suggest",
]
