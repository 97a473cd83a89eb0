"""Compute (scratch) buffer per device, an estimate of ggml-alloc's peak.

llama.cpp reserves the graph for min(n_ctx, n_ubatch) tokens against the full KV.
The peak is the largest of three phases, each plus the activations alive beside it:
- attention: without flash attention the f32 score matrix 4 * n_kv * n_tokens * n_head;
  with it the f16 mask 2 * n_kv * n_tokens and the f32 output;
- the FFN's gate and up activations, 2 * 4 * n_ff * n_tokens;
- on the device holding the output head, the logits tile 4 * n_vocab * n_tokens.
The activation term (six f32 rows of n_embd per token) matches llama.cpp's CUDA buffers
for Llama-3-8B at 8K context: 560 MiB without flash attention, 258.5 MiB with it. The
host keeps three such rows per token for the hand-off when layers are offloaded.
"""

from __future__ import annotations

from rigspark_gui.core.kv_cache import kv_cells_per_stream
from rigspark_gui.core.model_spec import Geometry
from rigspark_gui.core.settings import Backend, PlanSettings

_ACT_ROWS = 6
_HOST_ROWS = 3
# CPU backend (fitted, see _cpu_compute_bytes): f32 rows of n_embd per token alive beside
# the FFN activations (7.0 measured at n_embd 512) and beside the attention scores (5.5).
_CPU_FFN_ROWS = 7
_CPU_ATTN_ROWS = 6
# vLLM profiles a peak activation before sizing its KV pool; its sampler and
# activations at max_num_batched_tokens (8192 by default in V1) dominate.
_VLLM_BATCH_TOKENS = 8192


def n_graph_tokens(s: PlanSettings) -> int:
    return min(s.context, s.n_ubatch)


def device_compute_bytes(
    g: Geometry, s: PlanSettings, layers: list[int], has_output: bool, cpu: bool = False
) -> int:
    """Peak scratch bytes on a device that runs `layers` (and the head if `has_output`)."""
    if not layers and not has_output:
        return 0
    if s.backend is Backend.VLLM:
        t = _VLLM_BATCH_TOKENS
        return 4 * t * (g.n_embd * _ACT_ROWS + 2 * max(g.n_ff, g.n_ff_expert)) + (
            4 * g.n_vocab * 256 if has_output else 0
        )
    if cpu:
        return _cpu_compute_bytes(g, s, layers, has_output)
    t = n_graph_tokens(s)
    act = 4 * g.n_embd * t * _ACT_ROWS
    peak = 0
    if layers:
        n_kv = max(kv_cells_per_stream(g, il, s) for il in layers)
        if s.flash_attn:
            attn = 2 * n_kv * (-(-t // 64) * 64) + 4 * g.head_dim_v * g.n_head * t
        else:
            attn = 4 * n_kv * t * g.n_head
        peak = max(attn, 2 * 4 * _ffn_width(g) * t) + act
    if has_output:
        peak = max(peak, 4 * g.n_vocab * t + 4 * g.n_embd * t)
    return peak


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


def host_compute_bytes(g: Geometry, s: PlanSettings) -> int:
    """The CPU-side staging buffer when any layer runs on a GPU."""
    return 4 * g.n_embd * n_graph_tokens(s) * _HOST_ROWS
