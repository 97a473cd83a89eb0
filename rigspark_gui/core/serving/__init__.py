"""Serving engines (vLLM, SGLang) as they size themselves: checkpoint weights on every
GPU, the engine's memory claim, the paged KV pool, and throughput against concurrent
users.

The public face of serving; other packages import from here only."""

from rigspark_gui.core.serving.budget import BLOCK_SIZE, EngineDefaults, engine_defaults
from rigspark_gui.core.serving.checkpoint import (
    AUTO_FORMATS,
    FORMATS,
    ServingFormat,
    checkpoint_bytes,
    pp_partition,
)
from rigspark_gui.core.serving.engine import parallel_problem, size_serving
from rigspark_gui.core.serving.model import ConcurrencyPoint, GpuBudget, ServingPlan

__all__ = [
    "AUTO_FORMATS",
    "BLOCK_SIZE",
    "FORMATS",
    "ConcurrencyPoint",
    "EngineDefaults",
    "GpuBudget",
    "ServingFormat",
    "ServingPlan",
    "checkpoint_bytes",
    "engine_defaults",
    "parallel_problem",
    "pp_partition",
    "size_serving",
]
