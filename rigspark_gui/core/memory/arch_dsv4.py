"""DeepSeek V4 (`deepseek4`) as llama.cpp b11434 loads it (src/models/deepseek4.cpp) and
sizes its memory (src/llama-kv-cache-dsv4.cpp).

Every layer attends over a sliding window of raw tokens; `compress_ratios` adds, per
layer, a cache of compressed rows: ratio 4 (CSA) one row per 4 tokens plus a lightning
indexer's own compressed key cache, ratio 128 (HCA) one row per 128 tokens, ratio 0
none. The raw cache is llama_kv_cache_iswa with every layer sliding (set_swa_pattern(0))
and K-only rows of head_dim x n_head_kv (dsv4_make_k_only: llama_kv_cache allocates
K-only storage when is_mla()); the compressed caches are K-only llama_kv_caches of
GGML_PAD(max(1, ceil(n_ctx_seq / ratio)), 256) cells, the indexer's of one
indexer_head_size head. All of them keep one stream per sequence, unified KV or not
("Keep DSV4 KV/state streams per sequence even when public KV mode is unified"), each
stream as long as n_ctx_seq. Beside them, each compressing layer keeps f32 compressor
states (llama_dsv4_comp_state): a kv and a score tensor of n_embd_state x state_size x
n_seq x (1 + n_rs_seq) - CSA 2 x head_dim x 8, HCA head_dim x 128, indexer
2 x indexer_head_size x 8.

Blocks: q through a LoRA (attn_q_a / attn_q_b), one shared K row (attn_kv), a grouped
low-rank output (attn_output_a / _b), attention sinks, hyper-connection mixers before
attention and FFN, each compressor's kv / gate / positional (ape) / norm tensors and the
indexer's on CSA layers, and routed experts with a shared one, routed by a token-id
table (I32 tid2eid) on the leading `n_hash_layers` layers and by the score-correction
bias elsewhere.
"""

from __future__ import annotations

from rigspark_gui.core.memory.expert_tensors import routed_experts, shared_expert
from rigspark_gui.core.model import Geometry, KvCacheType, kv_row_bytes
from rigspark_gui.core.settings import KV_PAD, PlanSettings

__all__ = [
    "CSA_RATIO",
    "DSV4_ARCHS",
    "HCA_RATIO",
    "dsv4_block_tensors",
    "dsv4_global_tensors",
    "dsv4_layer_keys",
    "dsv4_layer_kv_bytes",
    "dsv4_layer_state_bytes",
    "dsv4_raw_row_bytes",
]

DSV4_ARCHS = frozenset({"deepseek4"})
CSA_RATIO = 4  # DSV4_CSA_RATIO: compressed sparse attention, with the indexer
HCA_RATIO = 128  # DSV4_HCA_RATIO: heavily compressed attention
_CSA_STATE_ROWS = 2 * CSA_RATIO  # the overlapped compressor keeps two blocks
_HCA_STATE_ROWS = HCA_RATIO
_F32 = 4

_Tensors = list[tuple[str, tuple[int, ...]]]


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def ratio_of(g: Geometry, il: int) -> int:
    return g.compress_ratios[il] if g.compress_ratios is not None else 0


def dsv4_global_tensors(g: Geometry) -> _Tensors:
    """The output hyper-connection head (LLM_TENSOR_LAYER_OUTPUT): collapses the hc_mult
    residual streams before the output norm."""
    hc = g.hc_mult
    return [
        ("output_hc_fn.weight", (hc * g.n_embd, hc)),
        ("output_hc_base.weight", (hc,)),
        ("output_hc_scale.weight", (1,)),
    ]


def dsv4_layer_keys(g: Geometry) -> tuple[tuple[bool, int, bool, int], ...]:
    """Blocks differ by compression ratio and by hash routing."""
    return tuple((il < g.n_hash_layers, ratio_of(g, il), True, 0) for il in range(g.n_layer))


def dsv4_block_tensors(g: Geometry, il: int) -> _Tensors:
    """Names and ggml shapes of block `il` in load_arch_tensors order (attn_output_a as
    the file holds it, 2-D: the loader reshapes it to one matrix per group)."""
    e, p = g.n_embd, f"blk.{il}."
    hd, nh = g.head_dim_k, g.n_head
    q_rank = g.q_lora_rank or 0
    og, o_rank, hc = g.o_groups, g.o_lora_rank, g.hc_mult
    mix = (2 + hc) * hc
    out: _Tensors = [
        (p + "attn_norm.weight", (e,)),
        (p + "attn_sinks.weight", (nh,)),
        (p + "attn_q_a.weight", (e, q_rank)),
        (p + "attn_q_a_norm.weight", (q_rank,)),
        (p + "attn_q_b.weight", (q_rank, nh * hd)),
        (p + "attn_kv.weight", (e, hd)),
        (p + "attn_kv_a_norm.weight", (hd,)),
        (p + "attn_output_a.weight", (nh * hd // og, o_rank * og)),
        (p + "attn_output_b.weight", (og * o_rank, e)),
    ]
    for part in ("attn", "ffn"):
        out += [
            (p + f"hc_{part}_fn.weight", (hc * e, mix)),
            (p + f"hc_{part}_base.weight", (mix,)),
            (p + f"hc_{part}_scale.weight", (3,)),
        ]
    ratio = ratio_of(g, il)
    if ratio:
        coff = 2 if ratio == CSA_RATIO else 1  # CSA compresses overlapping blocks
        out += [
            (p + "attn_compressor_kv.weight", (e, coff * hd)),
            (p + "attn_compressor_gate.weight", (e, coff * hd)),
            (p + "attn_compressor_ape.weight", (coff * hd, ratio)),
            (p + "attn_compressor_norm.weight", (hd,)),
        ]
        if ratio == CSA_RATIO:
            ih, isz = g.indexer_n_head, g.indexer_head_size
            out += [
                (p + "indexer.proj.weight", (e, ih)),
                (p + "indexer.attn_q_b.weight", (q_rank, ih * isz)),
                (p + "indexer_compressor_kv.weight", (e, 2 * isz)),
                (p + "indexer_compressor_gate.weight", (e, 2 * isz)),
                (p + "indexer_compressor_ape.weight", (2 * isz, ratio)),
                (p + "indexer_compressor_norm.weight", (isz,)),
            ]
    n, f = g.n_expert, g.n_ff_expert
    fs = f * max(g.n_shared_expert, 1)  # the loader sizes it n_ff_exp * n_expert_shared
    out.append((p + "ffn_gate_inp.weight", (e, n)))
    if il < g.n_hash_layers:
        out.append((p + "ffn_gate_tid2eid.weight", (g.n_expert_used, g.n_vocab)))
    else:
        out.append((p + "exp_probs_b.bias", (n,)))
    out += [
        (p + "ffn_norm.weight", (e,)),
        *routed_experts(p, e, f, n),
        *shared_expert(p, e, fs),
    ]
    return out


def dsv4_raw_row_bytes(g: Geometry, layer: int, k: KvCacheType) -> int:
    """Bytes of one cell of `layer`'s raw (sliding-window) cache: K only."""
    return kv_row_bytes(k, g.head_dim_k * g.kv_heads(layer))


def _seq_cells(s: PlanSettings) -> int:
    """cparams.n_ctx_seq: the whole padded context with a unified cache, else its share
    per sequence padded to 256 (src/llama-context.cpp)."""
    n_ctx = _pad(s.context, KV_PAD)
    return n_ctx if s.kv_unified else _pad(n_ctx // max(s.parallel, 1), KV_PAD)


def _comp_cells(n_ctx_seq: int, ratio: int) -> int:
    """GGML_PAD(dsv4_comp_size(kv_size, ratio), 256): compressed cells per stream."""
    return _pad(max(1, -(-n_ctx_seq // ratio)), KV_PAD)


def dsv4_layer_kv_bytes(g: Geometry, layer: int, s: PlanSettings, n_rs_seq: int = 0) -> int:
    """Everything `layer` holds for context: its raw window cache, its compressed (and
    indexer) caches and its f32 compressor states, over all sequences. `n_rs_seq`: the
    rollback snapshots of each compressor state (0 unless drafting)."""
    if not g.owns_kv(layer) or g.kv_heads(layer) == 0:
        return 0
    n_seq = max(s.parallel, 1)
    seq = _seq_cells(s)
    window = seq if s.swa_full else min(seq, (g.sliding_window or 0) + s.n_ubatch)
    k_row = dsv4_raw_row_bytes(g, layer, s.kv_k)
    total = k_row * _pad(window, KV_PAD) * n_seq
    ratio = ratio_of(g, layer)
    if not ratio:
        return total
    comp = _comp_cells(seq, ratio) * n_seq
    total += k_row * comp
    if ratio == CSA_RATIO:
        total += kv_row_bytes(s.kv_k, g.indexer_head_size) * comp
    return total + dsv4_layer_state_bytes(g, layer, s, n_rs_seq)


def dsv4_layer_state_bytes(g: Geometry, layer: int, s: PlanSettings, n_rs_seq: int = 0) -> int:
    """The f32 compressor states of `layer` alone (a kv and a score tensor each): CSA's
    and its indexer's of 2 x width by 8 rows, HCA's of width by 128 rows, per sequence
    and rollback snapshot (llama_dsv4_comp_state)."""
    ratio = ratio_of(g, layer)
    if not ratio or not g.owns_kv(layer):
        return 0
    planes = max(s.parallel, 1) * (1 + n_rs_seq)
    hd = g.head_dim_k
    if ratio == CSA_RATIO:
        return 2 * _F32 * _CSA_STATE_ROWS * planes * (2 * hd + 2 * g.indexer_head_size)
    return 2 * _F32 * _HCA_STATE_ROWS * planes * hd
