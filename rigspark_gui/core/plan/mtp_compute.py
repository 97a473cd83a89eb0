"""The MTP draft context's CPU compute buffer, read off llama.cpp b11434's MTP graphs
(graph_mtp in src/models/qwen35.cpp, deepseek32.cpp, glm-dsa.cpp, nemotron-h-moe.cpp;
build_attn_mha in src/llama-graph.cpp) and the tensors a logging build of ggml-alloc
shows alive at the buffer's peak (validation/mtp_b11434.py).

ggml-alloc puts the graph inputs at the bottom of the buffer: the token ids (4 B a token),
the hidden-state input (one f32 row of n_embd per token), the positions (4 B a token and
position: four under Qwen3.5's M-RoPE, none under Nemotron's NoPE), the K row indices
(8 B a token), the V row indices (8 B a token; per element of the transposed V without
flash attention; none for MLA's K-only cache), the KQ mask (f16 with flash attention,
else f32, n_kv x tokens) and out_ids (4 B an output row). Each tensor is padded to 32 B.
Above them one of four phases is the peak:

- the NextN input: the token embeddings and their concat with the hidden state (three
  rows);
- the attention, over the residual row (eh_proj): Q's projection q (n_head x head_dim_k
  f32 a token), with Qwen's gate twice as wide and its normed copy beside it, then the
  flash-attention output or the f32 scores of every head over the cells; under absorbed
  MLA the roped part of Q, Q's projection, q_nope_absorbed (n_head x kv_lora_rank) and
  the concatenated Q, then the scores above Q where they do not fit the hole the first
  three leave (the transposed latent V takes that hole, a row's, or the top);
- the FFN: its input row, its normed row, gate, up and their product, each in the hole
  the freed inputs leave below out_ids while it fits, else above the inputs (Nemotron
  gathers the output rows first, so its MoE works on n_parallel rows);
- the head: the logits of the output rows over the normed row.

Checked on Qwen3.5 (gated GQA, dense FFN), Nemotron-H MoE (GQA without RoPE) and
DeepSeek V3.2 / GLM-5 (absorbed MLA) synthetic files at 256 to 16384 cells, 1 to 4
sequences, flash attention on and off, unified or not. The MoE FFN phase (the routed
experts' gate, up and product of n_expert_used rows a token) and the GQA attention with
RoPE but no gate (GLM-4.5) follow the same reading but are never the peak there.
"""

from __future__ import annotations

from rigspark_gui.core.memory import DELTANET_ARCHS, kv_cells_per_stream, kv_streams
from rigspark_gui.core.model import Geometry, kv_row_bytes
from rigspark_gui.core.settings import PlanSettings

_F32 = 4
_ALIGN = 32
# build_inp_pos: n_pos_per_embd() positions a token (4 under M-RoPE); NoPE builds none
_MROPE_ARCHS = frozenset({"qwen35", "qwen35moe"})
_NOPE_ARCHS = frozenset({"nemotron_h_moe"})
# graph_mtp gathers the output rows before the FFN (crop_before_ffn)
_CROP_FFN_ARCHS = frozenset({"nemotron_h_moe"})


def _pad(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _mask_bytes(s: PlanSettings, t: int, n_kv: int) -> int:
    return (2 if s.flash_attn else _F32) * n_kv * t


def _inputs(g: Geometry, s: PlanSettings, t: int, n_kv: int, rows_out: int) -> int:
    """The graph inputs at the bottom of the buffer, up to out_ids."""
    n_pos = 0 if g.architecture in _NOPE_ARCHS else 4 if g.architecture in _MROPE_ARCHS else 1
    if g.is_mla:
        v_idxs = 0
    elif s.flash_attn:
        v_idxs = 8 * t
    else:
        v_idxs = 8 * t * g.kv_heads(0) * g.head_dim_v
    mask = _mask_bytes(s, t, n_kv)
    out = _pad(4 * t) + _F32 * g.n_embd * t + _pad(4 * t * n_pos) + _pad(8 * t)
    return out + _pad(v_idxs) + mask + _pad(4 * rows_out)


def _ffn_above(hole: int, sizes: list[int]) -> int:
    """The FFN phase above the inputs: by then every input below out_ids is freed, one
    hole that takes, in turn, the FFN's input row, its normed row, the gate, the up and
    their product while they fit; the rest stacks above the inputs."""
    above = 0
    for n in sizes:
        if n <= hole:
            hole -= n
        else:
            above += n
    return above


def _mla_attention(g: Geometry, s: PlanSettings, t: int, n_kv: int, row: int) -> int:
    """Absorbed MLA's attention phase above the residual row."""
    rank, rope = g.kv_lora_rank or 0, g.rope_head_dim or 0
    q_pe = _F32 * g.n_head * rope * t
    q_proj = _F32 * g.n_head * g.head_dim_k * t
    q_absorbed = _F32 * g.n_head * rank * t
    q = _F32 * g.n_head * (rank + rope) * t
    hole = q_pe + q_proj + q_absorbed
    if s.flash_attn:
        return hole + q
    peak = hole + q
    v_cont = kv_row_bytes(s.kv_k, rank) * n_kv * kv_streams(s)
    if v_cont > max(hole, row):
        peak += v_cont
    elif v_cont > row:
        hole -= v_cont
    scores = _F32 * n_kv * t * g.n_head
    return peak + (scores if scores > hole else 0)


def _gqa_attention(g: Geometry, s: PlanSettings, t: int, n_kv: int) -> int:
    """Grouped-query attention's phase above the residual row."""
    q = _F32 * g.n_head * g.head_dim_k * t
    if g.architecture in DELTANET_ARCHS:
        held = 3 * q  # the gated projection and the normed Q
    elif g.architecture in _NOPE_ARCHS:
        held = q
    else:
        held = 2 * q  # the projection's hole and the roped Q
    return held + (q if s.flash_attn else _F32 * n_kv * t * g.n_head)


def mtp_cpu_compute_bytes(g: Geometry, s: PlanSettings, n_vocab: int) -> int:
    """The MTP context's CPU compute buffer for one MTP block of `g` (a trunk-like
    geometry) with an `n_vocab` head, at `s` (the draft cache types)."""
    t = min(s.context, s.n_ubatch)
    rows_out = min(s.parallel, t)
    n_kv = kv_cells_per_stream(g, 0, s)
    row = _F32 * g.n_embd * t
    base = _inputs(g, s, t, n_kv, rows_out)
    nextn = 3 * row
    if g.is_mla:
        attention = row + _mla_attention(g, s, t, n_kv, row)
    else:
        attention = row + _gqa_attention(g, s, t, n_kv)
    ffn_tokens = rows_out if g.architecture in _CROP_FFN_ARCHS else t
    width = g.n_ff_expert * g.n_expert_used if g.is_moe else g.n_ff
    f = _pad(_F32 * width * ffn_tokens)
    ffn = _ffn_above(base - _pad(4 * rows_out), [row, _F32 * g.n_embd * ffn_tokens, f, f, f])
    head = row + _F32 * n_vocab * rows_out
    return base + max(nextn, attention, ffn, head)
