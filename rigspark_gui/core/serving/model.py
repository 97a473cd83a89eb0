"""What a serving plan says: per GPU where the engine's memory goes, the KV pool, and how
throughput grows with concurrent users."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuBudget:
    """One GPU (one rank) as the engine divides it."""

    device: str
    name: str
    # '' = this machine
    host: str = ""
    total_bytes: int
    # what the engine claims (vLLM) or keeps (SGLang)
    budget_bytes: int
    weights_bytes: int
    activation_bytes: int
    cuda_graph_bytes: int
    non_torch_bytes: int
    # this rank's share of the KV pool (0 when none)
    kv_cache_bytes: int
    # what one max_model_len request takes of this rank's pool
    kv_needed_bytes: int = 0
    # blocks this rank holds a shard of
    layers: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConcurrencyPoint:
    users: int
    per_user_tok_s: float
    total_tok_s: float
    # memory (bandwidth-bound) or compute
    limit: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingPlan:
    """The engine's own start-up figures for one path."""

    engine: str
    # checkpoint format: BF16, FP8, INT8, AWQ, GPTQ
    format: str
    tensor_parallel: int
    pipeline_parallel: int
    memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    # per GPU, the largest
    weights_bytes: int
    activation_bytes: int
    cuda_graph_bytes: int
    non_torch_bytes: int
    # the whole pool over every GPU
    kv_cache_bytes: int
    kv_cache_tokens: int
    max_model_len: int
    max_concurrency: float
    # the longest max_model_len it accepts
    largest_max_model_len: int
    # serves one request of max_model_len tokens
    fits: bool
    # the engine starts (SGLang starts and rejects long requests)
    starts: bool = True
    # the engine's own error, when it stops
    refusal: str | None = None
    # layout, context, memory, ram or pool (max_model_len)
    refusal_kind: str | None = None
    cpu_offload_bytes: int = 0
    gpus: tuple[GpuBudget, ...]
    concurrency: tuple[ConcurrencyPoint, ...] = ()
    speed_basis: str = ""
    notes: tuple[str, ...] = ()
