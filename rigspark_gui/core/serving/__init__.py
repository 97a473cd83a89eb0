"""Serving engines (vLLM, SGLang) as they size themselves: checkpoint weights on every
GPU, the engine's memory claim, the paged KV pool, and throughput against concurrent
users.

The public face of serving; other packages import from here only."""

from rigspark_gui.core.serving.budget import (
    BLOCK_SIZE,
    CUDA_CONTEXT_BYTES,
    EngineDefaults,
    Pool,
    engine_defaults,
    kv_bytes_per_token,
    sglang_pool,
    vllm_hybrid_pool,
    vllm_pool,
)
from rigspark_gui.core.serving.checkpoint import (
    AUTO_FORMATS,
    FORMATS,
    ServingFormat,
    checkpoint_bytes,
    pp_partition,
)
from rigspark_gui.core.serving.engine import parallel_problem, size_serving, tp_fits_heads
from rigspark_gui.core.serving.model import ConcurrencyPoint, GpuBudget, ServingPlan

__all__ = [
    "AUTO_FORMATS",
    "BLOCK_SIZE",
    "CUDA_CONTEXT_BYTES",
    "FORMATS",
    "ConcurrencyPoint",
    "EngineDefaults",
    "GpuBudget",
    "Pool",
    "ServingFormat",
    "ServingPlan",
    "checkpoint_bytes",
    "engine_defaults",
    "kv_bytes_per_token",
    "parallel_problem",
    "pp_partition",
    "sglang_pool",
    "size_serving",
    "tp_fits_heads",
    "vllm_hybrid_pool",
    "vllm_pool",
]
