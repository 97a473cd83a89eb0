"""How vLLM (V1 engine) and SGLang size GPU memory at start-up, one GPU (rank) at a time.

vLLM (vllm/v1/worker/gpu_worker.py, determine_available_memory): it claims
`gpu_memory_utilization` × total memory, loads the weights, runs one profiling forward
pass of `max_num_batched_tokens` tokens plus a dummy sampling step over `max_num_seqs`
rows, and hands what is left of the claim after weights, the activation peak and the
non-torch growth (cuBLAS workspaces, NCCL buffers) to the KV cache. CUDA graphs are
captured afterwards, out of the memory outside the claim.

SGLang (python/sglang/srt/model_executor/model_runner.py, profile_max_num_token): after
loading the weights it measures free memory and gives the KV pool everything above
`(1 - mem_fraction_static)` × total memory; activations and CUDA graphs live in that
remainder.
"""

from __future__ import annotations

from typing import NamedTuple

from rigspark_gui.core.model import Geometry
from rigspark_gui.core.rig import Gpu
from rigspark_gui.core.settings import Backend, PlanSettings

GIB = 1 << 30
BLOCK_SIZE = 16  # vLLM's default KV block (tokens) on CUDA
VLLM_DEFAULT_UTIL = 0.9
# The CUDA context and the libraries loaded with it take this much before vLLM's or
# SGLang's first measurement: it is not in any budget but must be free.
CUDA_CONTEXT_BYTES = 500 << 20


class EngineDefaults(NamedTuple):
    memory_utilization: float
    max_num_seqs: int
    max_num_batched_tokens: int


def vllm_defaults(gpu: Gpu) -> EngineDefaults:
    """`vllm serve` defaults (vllm/engine/arg_utils.py, _set_default_args): larger batches
    on GPUs of 70 GiB or more other than the A100."""
    total = gpu.memory_total_bytes or 0
    big = total >= 70 * GIB and "a100" not in gpu.name.lower()
    return EngineDefaults(VLLM_DEFAULT_UTIL, 1024 if big else 256, 8192 if big else 2048)


# SGLang 0.5.3+ defaults by the smallest GPU's memory (python/sglang/srt/server_args.py,
# _handle_gpu_memory_settings): upper bound in GiB -> (chunked_prefill_size,
# cuda_graph_max_bs below TP 4, at TP 4 and above).
_SGLANG_TIERS = (
    (20, 2048, 8, 8),
    (35, 2048, 24, 80),
    (60, 4096, 32, 160),
    (90, 8192, 256, 512),
    (160, 8192, 256, 512),
    (1 << 30, 16384, 512, 512),
)


def sglang_defaults(gpu: Gpu, tp: int, pp: int = 1) -> EngineDefaults:
    """mem_fraction_static = (memory - reserved) / memory, reserved (MiB) = 512 +
    1.5 x chunked_prefill_size + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024, at least
    10 GiB on GPUs over 60 GiB; memory is nvidia-smi's total in MiB."""
    mib = (gpu.memory_total_bytes or 0) / (1 << 20)
    chunk, small_bs, big_bs = next((c, a, b) for top, c, a, b in _SGLANG_TIERS if mib < top * 1024)
    graph_bs = small_bs if tp < 4 else big_bs
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + tp * pp / 8 * 1024
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    fraction = round((mib - reserved) / mib, 3) if mib > reserved else 0.5
    return EngineDefaults(fraction, graph_bs, chunk)


def engine_defaults(backend: Backend, gpu: Gpu, tp: int, pp: int = 1) -> EngineDefaults:
    """For SGLang, max_num_seqs carries cuda_graph_max_bs (its running-request limit
    follows from the pool instead)."""
    if backend is Backend.SGLANG:
        return sglang_defaults(gpu, tp, pp)
    return vllm_defaults(gpu)


def activation_peak(g: Geometry, tp: int, batched_tokens: int, seqs: int) -> int:
    """vLLM's profiled torch peak (vllm/v1/worker/gpu_model_runner.py, profile_run): the
    larger of its two phases, a forward pass and a dummy sampling step."""
    return max(forward_peak(g, tp, batched_tokens), sampler_peak(g, batched_tokens, seqs))


def forward_peak(g: Geometry, tp: int, batched_tokens: int) -> int:
    """Forward pass over `batched_tokens` tokens: the residual stream, QKV and attention
    output, the MLP's gate/up and activation (MoE: per routed token and expert), 16-bit."""
    q_width = g.n_head * g.head_dim_k
    ff = g.n_ff_expert * g.n_expert_used + g.n_ff_shared_expert if g.n_expert else g.n_ff
    per_token = 2 * (4 * g.n_embd + 3 * q_width // tp + 3 * ff // tp)
    return batched_tokens * per_token


def sampler_peak(g: Geometry, batched_tokens: int, seqs: int) -> int:
    """The dummy sampling step over min(seqs, batched_tokens) rows of full-vocabulary
    logits (vLLM samples on every rank, after gathering the vocabulary shards)."""
    return int(min(seqs, batched_tokens) * g.n_vocab * SAMPLER_BYTES_PER_LOGIT)


# Bytes per logit alive at the dummy sampler's peak. Counting vllm/v1/sample/sampler.py
# and ops/topk_topp_sampler.py (apply_top_k_top_p) gives ~30: the gathered 16-bit logits
# (2), their float32 copy (4), the sort's values (4) and int64 indices (8), the sort's
# scratch (~12). The allocator's peak is higher: vllm#21429 prints it ("torch peak
# memory increase: 5.62GiB" for 1024 rows of Qwen3's 151,936-token vocabulary, whose
# forward pass peaks far lower), 38.8 bytes a logit. Fitted on that log alone; held out
# and within 0.15 GiB: gpt-oss-120b on one H100 at 1024 rows of a 201,088-token
# vocabulary (vllm#23278: -2.14 GiB left for KV; vllm#27508: 1.71 GiB).
SAMPLER_BYTES_PER_LOGIT = 38.8


def non_torch_bytes(tp: int, pp: int, nvswitch: bool = False) -> int:
    """Memory vLLM sees grow outside torch during profiling: cuBLAS workspaces (0.07-0.35
    GiB on one GPU in vLLM's logs), plus NCCL's and the custom all-reduce's buffers when
    ranks talk: ~0.2 GiB over PCIe (vllm#14447, 4 GPUs), ~2 GiB on NVLink-switched
    Hopper GPUs, where NCCL sets up NVLink SHARP buffers (vllm#21429, 4x H200). NCCL
    builds those only for a communicator of more than two GPUs (src/transport/nvls.cc,
    ncclNvlsInit returns early when gpuCount <= 2), so a TP 2 group on the same
    GPUs grows by the PCIe figure (0.55 GiB logged on 2x H100, llm-d-benchmark)."""
    base = 200 << 20
    if tp * pp == 1:
        return base
    return base + ((1900 << 20) if nvswitch and tp > 2 else (200 << 20))


def cuda_graph_bytes(g: Geometry, tp: int, max_batch: int) -> int:
    """Memory CUDA-graph capture takes (outside vLLM's claim, inside SGLang's remainder):
    the graph pool's activation buffers for the largest captured batch plus per-graph
    bookkeeping."""
    ff = max(g.n_ff, g.n_ff_expert * max(g.n_expert_used, 1))
    per_token = 2 * (4 * g.n_embd + 3 * ff // tp)
    return max_batch * per_token + g.n_layer * (4 << 20)


def sliding_layers(g: Geometry, s: PlanSettings) -> frozenset[int]:
    """Layers vLLM's hybrid manager holds at their window (none when the cache is asked
    to be full size, as --disable-hybrid-kv-cache-manager does)."""
    if s.swa_full or not g.sliding_window:
        return frozenset()
    return frozenset(il for il in range(g.n_layer) if g.is_sliding(il) and g.kv_heads(il))


def kv_bytes_per_token(g: Geometry, layers: range, tp: int, kv_bytes: int) -> int:
    """KV bytes one token takes on one rank over `layers`: K and V of the rank's heads
    (whole heads replicated when TP exceeds them); MLA keeps one latent row per layer."""
    total = 0
    for il in layers:
        heads = g.kv_heads(il)
        if heads == 0:
            continue
        if g.is_mla:
            total += ((g.kv_lora_rank or 0) + (g.rope_head_dim or 0)) * kv_bytes
            continue
        per_rank = max(heads // tp, 1)
        total += per_rank * (g.head_dim_k + g.head_dim_v) * kv_bytes
    return total


class Pool(NamedTuple):
    """A paged pool over one rank's KV memory."""

    blocks: int
    tokens: int
    max_concurrency: float  # full-length requests it holds at once
    needed_bytes: int  # what one max_model_len request needs on this rank
    largest_max_model_len: int  # the longest request it holds (a block multiple)


def vllm_pool(available: int, per_token: int, max_model_len: int) -> Pool:
    """vLLM's pool (vllm/v1/core/kv_cache_utils.py): num_blocks = available // page //
    layers (page already summed over layers in `per_token`); concurrency = blocks /
    ceil(max_model_len / 16); the estimated length is the block-aligned largest that fits."""
    page = BLOCK_SIZE * per_token
    blocks = max(available, 0) // page if page else 0
    per_request = -(-max_model_len // BLOCK_SIZE)
    return Pool(
        blocks,
        blocks * BLOCK_SIZE,
        blocks / per_request if per_request else 0.0,
        per_request * page,
        blocks * BLOCK_SIZE,
    )


def sglang_pool(available: int, per_token: int, context_len: int) -> Pool:
    """SGLang's pool (model_runner.py, profile_max_num_token): one token a cell."""
    tokens = max(available, 0) // per_token if per_token else 0
    return Pool(
        tokens,
        tokens,
        tokens / context_len if context_len else 0.0,
        context_len * per_token,
        tokens,
    )


def vllm_hybrid_pool(
    available: int,
    layer_token_bytes: int,
    n_full: int,
    n_sliding: int,
    window: int,
    batched_tokens: int,
    max_model_len: int,
    trained_context: int,
) -> Pool:
    """vLLM's hybrid KV cache manager (0.10+) for models mixing full and sliding-window
    attention (kv_cache_utils.py, _get_kv_cache_groups_uniform_page_size): layers go in
    groups of the smaller type's count (padded), a block holds one page of every group's
    layer, `num_blocks = available // (page × group size)`; "GPU KV cache size" is
    blocks // groups × 16 tokens of full-attention context; a request needs
    ⌈L / 16⌉ blocks per full group and ⌈min(window − 1 + batched, L) / 16⌉ + 1 per
    sliding group (kv_cache_interface.py, max_memory_usage_bytes)."""
    group = min(n_full, n_sliding) or max(n_full, n_sliding)
    full_groups = -(-n_full // group) if n_full else 0
    sliding_groups = -(-n_sliding // group) if n_sliding else 0
    n_groups = full_groups + sliding_groups
    page = BLOCK_SIZE * layer_token_bytes

    def per_request(length: int) -> int:
        sliding = -(-min(window - 1 + batched_tokens, length) // BLOCK_SIZE) + 1
        return full_groups * -(-length // BLOCK_SIZE) + sliding_groups * sliding

    blocks = max(available, 0) // (page * group) if page else 0
    need = per_request(max_model_len)
    lo, hi = 0, max(max_model_len, trained_context)
    while lo < hi:  # the estimated maximum model length, as vLLM's binary search finds it
        mid = (lo + hi + 1) // 2
        if per_request(mid) <= blocks:
            lo = mid
        else:
            hi = mid - 1
    return Pool(
        blocks,
        blocks // max(n_groups, 1) * BLOCK_SIZE,
        blocks / need if need else 0.0,
        need * page * group,
        lo,
    )
