"""DeepSeek V4's compute buffer (`deepseek4`), read off llama.cpp b11434's graph
(src/models/deepseek4.cpp) and checked on validation/dsv4_b11434.json (CPU).

What grows with the context is a CSA (ratio 4) layer's sparse attention,
build_csa_lid_attention. Every phase sits on the graph inputs, allocated first at the
bottom of the buffer (ggml-alloc): the token embeddings row, the raw window's KQ mask, and
one KQ mask per compressed cache (dsv4_lid_kq_mask, always f16; dsv4_csa_kq_mask and
dsv4_hca_kq_mask, f16 with flash attention and f32 without), each n_cells x n_tokens.
Above them the layer keeps three hyper-connection states (hc_mult rows each: the
residual streams in and out and the mixer's input), Q's matmul output and its norm
(n_head x head_dim f32 per token; the freed matmul output is a hole that nothing as
large reuses) and k_all, the raw window and the compressed rows concatenated in the
K cache type. Then, in order:
- the lightning indexer's masked scores, f32 n_lid x n_tokens (ggml_lightning_indexer);
- build_top_k_mask: a filled copy of the CSA mask and the top-k mask added to it, which
  take the scores' hole (with an f32 mask the sum goes above it), then the concatenated
  mask of the raw and compressed cells on top;
- the attention: with flash attention its output (like Q), without it the f32 scores
  of every head over the raw and compressed cells, above the concatenated mask.
In the last CSA layer the indexer's and CSA's masks are read for the last time: the
filled copy takes the CSA mask in place and the concatenated mask the hole the indexer's
mask leaves, so only the scores sit above the layer there. The window-only and HCA
layers peak at their attention the same way, over their own cells; the MoE FFN and the
head are the generic estimate's phases (compute_buffer takes the larger).

Checked on the CPU rows of validation/dsv4_b11434.json (logging ggml-alloc placements on
b11434): within 1 MiB of the 180 and 185 MiB buffers at 131,072 tokens, at most 8 MiB
over elsewhere, where smaller tensors find holes below. On a GPU the same tensors make
the peak (its inputs are copied into the buffer too), not measured. This assumes the
fused indexer (GGML_OP_LIGHTNING_INDEXER), which llama-context.cpp turns on where the
layer's device supports it: the CPU always, CUDA b11434 for 128-wide indexer heads in
4, 32 or 64 heads (V4 Flash's). Without it the graph materializes every indexer head's
f32 scores (n_lid x indexer_n_head x n_tokens, twice), far more, which is not modelled.
"""

from __future__ import annotations

from rigspark_gui.core.memory.arch_dsv4 import CSA_RATIO, DSV4_ARCHS, HCA_RATIO
from rigspark_gui.core.model import Geometry, kv_row_bytes
from rigspark_gui.core.settings import KV_PAD, PlanSettings

__all__ = ["DSV4_ARCHS", "dsv4_compute_bytes"]

_F32 = 4
_F16 = 2


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _cells(g: Geometry, s: PlanSettings) -> tuple[int, int, int]:
    """Cells per stream of the raw window, CSA (and indexer) and HCA caches
    (src/llama-kv-cache-dsv4.cpp; the same sizes as arch_dsv4)."""
    n_ctx = _pad(s.context, KV_PAD)
    seq = n_ctx if s.kv_unified else _pad(n_ctx // max(s.parallel, 1), KV_PAD)
    window = seq if s.swa_full else min(seq, (g.sliding_window or 0) + s.n_ubatch)

    def comp(ratio: int) -> int:
        return _pad(max(1, -(-seq // ratio)), KV_PAD)

    return _pad(window, KV_PAD), comp(CSA_RATIO), comp(HCA_RATIO)


def dsv4_compute_bytes(g: Geometry, s: PlanSettings, n_tokens: int, layers: list[int]) -> int:
    """Peak scratch bytes of the attention phases of a device running `layers` of a
    DeepSeek V4 model. `n_tokens`: the reserved graph's tokens."""
    if not layers:
        return 0
    t = n_tokens
    n_stream = max(s.parallel, 1)  # a stream per sequence, unified or not
    mask_el = _F16 if s.flash_attn else _F32
    n_raw, n_csa, n_hca = _cells(g, s)
    ratios = [g.compress_ratios[il] if g.compress_ratios else 0 for il in range(g.n_layer)]
    csa_layers = [il for il, r in enumerate(ratios) if r == CSA_RATIO]
    mine = [il for il in csa_layers if il in layers]
    # the inputs the device's layers read
    inputs = _F32 * g.n_embd * t + mask_el * n_raw * t
    if mine:
        inputs += (_F16 + mask_el) * n_csa * t
    if any(ratios[il] == HCA_RATIO for il in layers):
        inputs += mask_el * n_hca * t
    q = _F32 * g.n_head * g.head_dim_k * t
    hc_states = 3 * _F32 * max(g.hc_mult, 1) * g.n_embd * t

    def layer(n_comp: int) -> int:
        k_all = kv_row_bytes(s.kv_k, g.head_dim_k) * (n_raw + n_comp) * n_stream
        return inputs + hc_states + 2 * q + k_all

    def scores_of_heads(n_comp: int) -> int:
        """The attention's own output: like Q with flash attention, else the f32 scores
        of every head (soft_max works in place)."""
        return q if s.flash_attn else _F32 * (n_raw + n_comp) * t * g.n_head

    # a window-only layer (the raw mask, an input) or an HCA one (the raw mask
    # concatenated with the HCA cells'): the attention over its own cells
    peak = max(
        (
            layer(n) + (mask_el * (n_raw + n) * t if n else 0) + scores_of_heads(n)
            for n in {n_hca if ratios[il] else 0 for il in layers if ratios[il] != CSA_RATIO}
        ),
        default=0,
    )
    if mine:
        scores = _F32 * n_csa * t
        filled = mask_el * n_csa * t
        heads = scores_of_heads(n_csa)
        if mine[0] != csa_layers[-1]:  # a CSA layer after it still reads the masks
            # the filled mask and the top-k sum take the scores' hole (the sum goes above
            # it when the masks are f32); the concatenated mask above them; the filled
            # mask, freed, takes the flash-attention output if it fits
            top_k = max(scores, 2 * filled)
            concat = mask_el * (n_raw + n_csa) * t
            csa = top_k + concat + (0 if s.flash_attn and heads <= filled else heads)
        else:
            csa = max(scores, heads)
        peak = max(peak, layer(n_csa) + csa)
    return peak
