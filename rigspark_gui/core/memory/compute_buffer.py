"""Compute (scratch) buffer per device, an estimate of ggml-alloc's peak.

llama.cpp reserves the graph for min(n_ctx, n_ubatch) tokens against the full KV.
On a GPU the peak is the largest of three phases, each with what stays alive beside it
(an f32 row is 4 * n_embd * n_tokens bytes):
- attention without flash attention: the f32 scores 4 * n_kv * n_tokens * n_head, the
  f32 KQ mask 4 * n_kv * n_tokens and four rows (six where Q, K and V come out of one
  fused matrix); with flash attention the f16 mask, the output and the same rows;
- the FFN: gate and up activations 2 * 4 * n_ff * n_tokens beside three rows;
- on the device holding the output head, the logits 4 * n_vocab * n_tokens and a row.
These reproduce llama.cpp's CUDA0 compute buffer to the MiB in ten published full-offload
logs (Llama, Mistral, Qwen2, GPT-NeoX; 512 to 81920 cells; flash attention on and off;
tests/core/test_compute_buffer.py), and with pipeline parallelism (several GPUs) the
per-device buffers of three more. The pinned host buffer holds the input row and the
f32 mask. The CPU backend has its own fitted formula (`_cpu_compute_bytes`).
"""

from __future__ import annotations

from rigspark_gui.core.memory.kv_cache import attention_kinds, kv_cells_per_stream
from rigspark_gui.core.memory.tensors import FUSED_QKV_ARCHS
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.settings import Backend, PlanSettings

# f32 rows of n_embd per token alive beside the attention scores (fused QKV: more),
# fitted on llama.cpp's CUDA logs (see the module docstring), and beside the FFN
# activations. No published log has the FFN phase as its peak: 3 rows is the most the
# open-llama 512-cell log allows (its logits phase, 70.50 MiB, must stay the larger),
# so FFN-bound models (wide n_ff, small vocabulary, flash attention) are the least
# checked case. The flash-attention phase uses the same rows, unchecked for the same
# reason (every flash-attention log peaks at the logits).
_ATTN_ROWS = 4
_FUSED_QKV_ATTN_ROWS = 6
_FFN_ROWS = 3
_VLLM_ACT_ROWS = 6
# CPU backend (fitted, see _cpu_compute_bytes): f32 rows of n_embd per token alive beside
# the FFN activations (7.0 measured at n_embd 512) and beside the attention scores (5.5).
_CPU_FFN_ROWS = 7
_CPU_ATTN_ROWS = 6
# vLLM profiles a peak activation before sizing its KV pool; its sampler and
# activations at max_num_batched_tokens (8192 by default in V1) dominate.
_VLLM_BATCH_TOKENS = 8192
# ggml-backend.cpp GGML_SCHED_MAX_COPIES: input copies per device under pipeline parallelism
PIPELINE_COPIES = 4


def n_graph_tokens(s: PlanSettings) -> int:
    return min(s.context, s.n_ubatch)


def device_compute_bytes(
    g: Geometry,
    s: PlanSettings,
    layers: list[int],
    has_output: bool,
    cpu: bool = False,
    copies: int = 1,
) -> int:
    """Peak scratch bytes on a device that runs `layers` (and the head if `has_output`).

    `copies` > 1: llama.cpp's pipeline parallelism (see `pipeline_copies`) keeps that
    many copies of each input the device receives (the activation row and the f32 KQ
    mask) for the whole graph, beside the peak phase."""
    if not layers and not has_output:
        return 0
    if s.backend is Backend.VLLM:
        t = _VLLM_BATCH_TOKENS
        return 4 * t * (g.n_embd * _VLLM_ACT_ROWS + 2 * max(g.n_ff, g.n_ff_expert)) + (
            4 * g.n_vocab * 256 if has_output else 0
        )
    if cpu:
        return _cpu_compute_bytes(g, s, layers, has_output)
    t = n_graph_tokens(s)
    row = 4 * g.n_embd * t
    peak = 0
    inputs = row  # the activations (or embeddings) the device receives
    if layers:
        n_kv = max(kv_cells_per_stream(g, il, s) for il in layers)
        mask = 4 * n_kv * t
        inputs += mask
        rows = _FUSED_QKV_ATTN_ROWS if g.architecture in FUSED_QKV_ARCHS else _ATTN_ROWS
        if s.flash_attn:
            attn = 2 * n_kv * _pad(t, 64) + 4 * g.head_dim_v * g.n_head * t + rows * row
        else:
            # a single copy of the mask lives through the attention; pipeline copies
            # are counted with the inputs below
            attn = 4 * n_kv * t * g.n_head + (mask if copies == 1 else 0) + rows * row
        ffn = 2 * 4 * _ffn_width(g) * t + _FFN_ROWS * row
        peak = max(attn, ffn)
    if has_output:
        peak = max(peak, 4 * g.n_vocab * t + row)
    return peak + (copies * inputs if copies > 1 else 0)


def pipeline_copies(gpus_seen: int, all_on_gpus: bool, s: PlanSettings) -> int:
    """Input copies llama.cpp's scheduler keeps per device: 4 (GGML_SCHED_MAX_COPIES)
    with pipeline parallelism, which llama-context.cpp turns on when the backend sees
    more than one GPU, every layer and the head are offloaded, layers are split (not
    rows), KV is offloaded and no -ot override is given, on devices with async compute
    and events (CUDA and HIP). `gpus_seen`: GPUs of that backend in the machine, used
    or not (a --tensor-split of 0 still counts a device)."""
    pp = s.backend.ggml_based and gpus_seen > 1 and all_on_gpus
    return PIPELINE_COPIES if pp else 1


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _ffn_width(g: Geometry) -> int:
    return max(g.n_ff, g.n_ff_expert * max(g.n_expert_used, 1), g.n_ff_shared_expert)


def _cpu_compute_bytes(g: Geometry, s: PlanSettings, layers: list[int], has_output: bool) -> int:
    """The CPU backend's buffer, fitted on llama.cpp's own CPU buffers (docs/validation.md).

    The KQ mask is a graph input, alive for the whole graph: n_kv x n_tokens cells (per
    stream, all streams together), f32 without flash attention and f16 with it. On top
    of it the largest of three phases:
    - without flash attention, the f32 scores 4 * n_kv * n_tokens * n_head beside
      _CPU_ATTN_ROWS f32 rows of n_embd per token (Q, the attention output);
    - the FFN: gate and up activations 2 * 4 * n_ff * n_tokens beside _CPU_FFN_ROWS rows;
    - the head: logits 4 * n_vocab * n_tokens beside one row.
    Fitted on Llama-, Qwen2-, Gemma-2-, OLMoE-, Phi-3- and DeepSeek-V2-shaped models
    at 512-32768 cells: slopes are exact, intercepts within ~3 MiB at n_embd 512."""
    t = n_graph_tokens(s)
    row = 4 * g.n_embd * t
    peak = 0
    mask = 0
    if layers:
        n_kv = max(kv_cells_per_stream(g, il, s) for il in layers)
        mask = (2 if s.flash_attn else 4) * n_kv * t
        ffn = 2 * 4 * _ffn_width(g) * t + _CPU_FFN_ROWS * row
        attn = 0 if s.flash_attn else 4 * n_kv * t * g.n_head + _CPU_ATTN_ROWS * row
        peak = max(ffn, attn)
    if has_output:
        peak = max(peak, 4 * g.n_vocab * t + row)
    return mask + peak


def output_buffer_bytes(g: Geometry, s: PlanSettings) -> int:
    """The logits buffer in host memory: n_vocab floats for each of n_seq outputs, which
    is what llama_context reserves at creation (src/llama-context.cpp, output_reserve
    called with n_seq_max). It grows only if a batch asks for more logits."""
    if s.backend is Backend.VLLM:
        return 0
    return 4 * g.n_vocab * s.parallel


def host_compute_bytes(g: Geometry, s: PlanSettings, copies: int = 1) -> int:
    """The pinned host buffer when layers run on a GPU: the input embeddings row and the
    f32 KQ mask (built on the host even for flash attention, which casts it on the GPU);
    with pipeline parallelism `copies` of the mask, a graph input."""
    t = n_graph_tokens(s)
    n_kv = max((kv_cells_per_stream(g, il, s) for il in attention_kinds(g)), default=0)
    return 4 * g.n_embd * t + copies * 4 * n_kv * t
