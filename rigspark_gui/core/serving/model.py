"""What a serving plan says: per GPU where the engine's memory goes, the KV pool, and how
throughput grows with concurrent users."""

from __future__ import annotations

from rigspark_gui.core.frozen import Frozen
from rigspark_gui.core.record import Field


class GpuBudget(Frozen):
    """One GPU (one rank) as the engine divides it."""

    device: str
    name: str
    host: str = Field(default="", description="'' = this machine")
    total_bytes: int
    budget_bytes: int = Field(description="what the engine claims (vLLM) or keeps (SGLang)")
    weights_bytes: int
    activation_bytes: int
    cuda_graph_bytes: int
    non_torch_bytes: int
    kv_cache_bytes: int = Field(description="this rank's share of the KV pool (0 when none)")
    kv_needed_bytes: int = Field(
        default=0, description="what one max_model_len request takes of this rank's pool"
    )
    layers: int = Field(description="blocks this rank holds a shard of")


class ConcurrencyPoint(Frozen):
    users: int
    per_user_tok_s: float
    total_tok_s: float
    limit: str = Field(description="memory (bandwidth-bound) or compute")


class ServingPlan(Frozen):
    """The engine's own start-up figures for one path."""

    engine: str
    format: str = Field(description="checkpoint format: BF16, FP8, INT8, AWQ, GPTQ")
    tensor_parallel: int
    pipeline_parallel: int
    memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    weights_bytes: int = Field(description="per GPU, the largest")
    activation_bytes: int
    cuda_graph_bytes: int
    non_torch_bytes: int
    kv_cache_bytes: int = Field(description="the whole pool over every GPU")
    kv_cache_tokens: int
    max_model_len: int
    max_concurrency: float
    largest_max_model_len: int = Field(description="the longest max_model_len it accepts")
    fits: bool = Field(description="serves one request of max_model_len tokens")
    starts: bool = Field(
        default=True, description="the engine starts (SGLang starts and rejects long requests)"
    )
    refusal: str | None = Field(default=None, description="the engine's own error, when it stops")
    refusal_kind: str | None = Field(
        default=None, description="layout, context, memory, ram or pool (max_model_len)"
    )
    cpu_offload_bytes: int = 0
    gpus: tuple[GpuBudget, ...]
    concurrency: tuple[ConcurrencyPoint, ...] = ()
    speed_basis: str = ""
    notes: tuple[str, ...] = ()
