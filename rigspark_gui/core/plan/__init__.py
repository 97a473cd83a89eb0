"""Every path a model can run on, the plan that recommends one, the catalog ranked on a
rig, and the smallest changes that buy a better plan.

The public face of planning; other packages import from here only."""

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
    "PLAN_SCHEMA_VERSION",
    "KvComparisonRow",
    "PathName",
    "PathPlan",
    "Plan",
    "RankVerdict",
    "RankedModel",
    "Suggestion",
    "Verdict",
    "kv_comparison",
    "kv_quant",
    "plan",
    "rank_models",
    "rig_after",
    "suggest",
]
