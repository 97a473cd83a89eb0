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

from rigspark_gui.core.kv_cache import kv_cells
from rigspark_gui.core.model_spec import Geometry
from rigspark_gui.core.settings import Backend, PlanSettings

_ACT_ROWS = 6
_HOST_ROWS = 3
# vLLM profiles a peak activation before sizing its KV pool; its sampler and
# activations at max_num_batched_tokens (8192 by default in V1) dominate.
_VLLM_BATCH_TOKENS = 8192


def n_graph_tokens(s: PlanSettings) -> int:
    return min(s.context, s.n_ubatch)


def device_compute_bytes(g: Geometry, s: PlanSettings, layers: list[int], has_output: bool) -> int:
    """Peak scratch bytes on a device that runs `layers` (and the head if `has_output`)."""
    if not layers and not has_output:
        return 0
    if s.backend is Backend.VLLM:
        t = _VLLM_BATCH_TOKENS
        return 4 * t * (g.n_embd * _ACT_ROWS + 2 * max(g.n_ff, g.n_ff_expert)) + (
            4 * g.n_vocab * 256 if has_output else 0
        )
    t = n_graph_tokens(s)
    act = 4 * g.n_embd * t * _ACT_ROWS
    peak = 0
    if layers:
        n_kv = max(kv_cells(g, il, s) for il in layers)
        if s.flash_attn:
            attn = 2 * n_kv * (-(-t // 64) * 64) + 4 * g.head_dim_v * g.n_head * t
        else:
            attn = 4 * n_kv * t * g.n_head
        ff = max(g.n_ff, g.n_ff_expert * max(g.n_expert_used, 1), g.n_ff_shared_expert)
        peak = max(attn, 2 * 4 * ff * t) + act
    if has_output:
        peak = max(peak, 4 * g.n_vocab * t + 4 * g.n_embd * t)
    return peak


def host_compute_bytes(g: Geometry, s: PlanSettings) -> int:
    """The CPU-side staging buffer when any layer runs on a GPU."""
    return 4 * g.n_embd * n_graph_tokens(s) * _HOST_ROWS
