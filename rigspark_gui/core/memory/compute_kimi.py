"""Kimi Linear's compute buffer (`kimi-linear`): the attention phases of its KDA and MLA
layers, read off llama.cpp b11434's graph (src/models/kimi-linear.cpp, the fused
ggml_gated_delta_net of src/models/delta-net-base.cpp, build_attn_mha in
src/llama-graph.cpp) and checked on validation/kimi_b11434.json (CPU).

On the CPU every phase sits on the graph inputs, allocated first at the bottom of the
buffer (ggml-alloc): the token ids, out_ids (4 B a token each), the mixed-batch ids and
slots (4 + 8 B), the latent cache's K row indices (8 B; no V cache under MLA, no
positions: Kimi's MLA has no RoPE), the recurrent state's copy indices (4 B a sequence),
the KQ mask (f16 with flash attention, else f32) and five f32 rows (build_inp_embd: the
unused embeddings input, the mixed-batch copy, the token embeddings, the mixed path's
get_rows and its ggml_dup, never freed). The freed rows are holes that the residual and
the attention norm (one row each) take in every layer.

An MLA layer (absorbed: attn_k_b / attn_v_b, the MQA latent cache) holds, when Q is
assembled, Q's projection (n_head x head_dim_k per token), q_nope_absorbed (n_head x
kv_lora_rank) and the concatenated Q (n_head x (kv_lora_rank + rope)), all f32. With flash
attention its output (like q_nope_absorbed) takes the hole the first two leave. Without
it the f32 scores of every head over the cells (soft_max works in place) go above Q unless
they fit in that hole; the transposed latent V (kv_lora_rank per cell, in the cache type)
takes a row's hole if it fits, else that hole, else the top.

A KDA layer (the fused delta rule, ggml_gated_delta_net, which llama-context.cpp always
enables) projects Q, K and V (d_inner = n_head x kda_head_dim per token, X bytes f32),
concatenates each with its conv state (X' = X plus d_conv - 1 columns per sequence),
convolves, activates and L2-normalizes them, computes the gate g1 and runs the delta
rule, whose output is X plus the new state S (kda_head_dim^2 x n_head f32 per sequence).
The gathered state (S) goes to the hole a row leaves when it fits there: the peak is then
6X + S over the inputs; else it goes to the hole the V projection leaves (S <= X: the
convolutions move above the concatenations, 4X + 3X' + S) or above the concatenations
(3X + 3X' + 2S). This assumes d_inner wider than n_embd (4096 against 2304 in
Kimi-Linear-48B), so no projection fits in a row's hole; on narrower models (the
synthetic ones of the validation) this phase is not the peak and is not checked.

The dense FFN, the MoE and the head are the generic estimate's phases (compute_buffer
takes the larger). At Kimi-Linear-48B's widths the MLA phase is the peak with one or a
few sequences, the KDA phase with many. On a GPU the token embeddings are looked up on
the host: the device receives the activations row and the f32 KQ mask (cast to f16 on it
for flash attention) and keeps the residual and the attention norm beside the same
phases, with no row's hole for the state; not measured.

Checked on the CPU loads of validation/kimi_b11434.json at Kimi-Linear-48B's widths
(512 to 65536 cells, 1 to 16 sequences, flash attention on and off): the buffer to within
100 bytes wherever these phases are the peak, the KDA phase's last form at 16 sequences;
its middle form (S <= X) never peaks there and is not checked.
"""

from __future__ import annotations

from rigspark_gui.core.memory.arch_kimi import KDA_ARCHS
from rigspark_gui.core.memory.kv_cache import kv_cells_per_stream, kv_streams
from rigspark_gui.core.model import Geometry, kv_row_bytes
from rigspark_gui.core.settings import PlanSettings

__all__ = ["KDA_ARCHS", "kimi_compute_bytes"]

_F32 = 4
_F16 = 2
_ALIGN = 32  # the CPU buffer's alignment (ggml-alloc pads every tensor to it)


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _cpu_inputs(g: Geometry, s: PlanSettings, t: int, n_kv: int) -> int:
    """The graph inputs and the five embedding rows at the bottom of a CPU buffer."""
    row = _F32 * g.n_embd * t
    mask = (_F16 if s.flash_attn else _F32) * n_kv * t
    ids = 4 * t + 4 * t + 12 * t + 8 * t  # tokens, out_ids, mixed ids + slots, K rows
    rs_copy = _pad(4 * max(s.parallel, 1), _ALIGN)
    return 5 * row + ids + rs_copy + mask


def _gpu_inputs(g: Geometry, s: PlanSettings, t: int, n_kv: int) -> int:
    """The activations row and the f32 mask (with its f16 cast for flash attention), and
    the residual and attention-norm rows beside each mixer."""
    row = _F32 * g.n_embd * t
    cast = _F16 * n_kv * _pad(t, 64) if s.flash_attn else 0
    return 3 * row + _F32 * n_kv * t + cast


def _mla_bytes(g: Geometry, s: PlanSettings, t: int, n_kv: int, row: int) -> int:
    """An absorbed MLA layer's peak above the inputs."""
    rank, rope = g.kv_lora_rank or 0, g.rope_head_dim or 0
    q_proj = _F32 * g.n_head * g.head_dim_k * t
    q_absorbed = _F32 * g.n_head * rank * t
    q = _F32 * g.n_head * (rank + rope) * t
    peak = q_proj + q_absorbed + q
    if s.flash_attn:  # the output, like q_absorbed, takes their hole
        return peak
    hole = q_proj + q_absorbed
    v_cont = kv_row_bytes(s.kv_k, rank) * n_kv * kv_streams(s)
    if v_cont > hole:
        peak += v_cont
    elif v_cont > row:
        hole -= v_cont
    scores = _F32 * n_kv * t * g.n_head
    return peak + (scores if scores > hole else 0)


def _kda_bytes(g: Geometry, t: int, n_seqs: int, state_hole: int) -> int:
    """A KDA layer's peak above the inputs: up to the delta rule's output."""
    d_inner = g.n_head * g.kda_head_dim
    x = _F32 * d_inner * t
    x_concat = x + _F32 * d_inner * (g.ssm_d_conv - 1) * n_seqs
    state = _F32 * g.kda_head_dim**2 * g.n_head * n_seqs
    if state <= state_hole:
        return 6 * x + state
    return 3 * x + 3 * x_concat + state + max(state, x)


def kimi_compute_bytes(
    g: Geometry, s: PlanSettings, n_tokens: int, layers: list[int], cpu: bool
) -> int:
    """Peak scratch bytes of the mixers of a device running `layers` of a Kimi Linear
    model. `n_tokens`: the reserved graph's tokens."""
    if not layers:
        return 0
    mla = [il for il in layers if il not in g.recurrent_layers]
    n_kv = max((kv_cells_per_stream(g, il, s) for il in mla), default=0)

    def graph(t: int, n_seqs: int) -> int:
        row = _F32 * g.n_embd * t
        if cpu:
            inputs = _cpu_inputs(g, s, t, n_kv)
            state_hole = row + 12 * t  # the mixed-batch ids, slots and copy, freed
        else:
            inputs = _gpu_inputs(g, s, t, n_kv)
            state_hole = 0
        peak = _mla_bytes(g, s, t, n_kv, row) if mla else 0
        if len(mla) < len(layers):
            peak = max(peak, _kda_bytes(g, t, n_seqs, state_hole))
        return inputs + peak

    # sched_reserve (src/llama-context.cpp) reserves the prompt graph with one ubatch of
    # n_seq_max sequences, its tokens rounded up to a multiple of them (graph_reserve),
    # then for Kimi Linear with one sequence; the buffer fits the larger
    n_seqs = max(s.parallel, 1)
    return max(graph(_pad(n_tokens, n_seqs), n_seqs), graph(n_tokens, 1))
