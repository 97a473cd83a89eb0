"""DeepSeek sparse attention (`deepseek32`: DeepSeek V3.2; `glm-dsa`: GLM-5 / 5.1) as
llama.cpp b11434 loads it (src/models/deepseek32.cpp, src/models/glm-dsa.cpp,
src/llama-kv-cache-dsa.cpp).

The attention is DeepSeek's MLA (a K-only latent cache of kv_lora_rank + rope values per
token and layer) plus a lightning indexer that picks the top-k tokens to attend. The
indexer keeps its own key cache beside the latent one: a second llama_kv_cache with one
head of `indexer_head_size` values per token, of the K cache type, over the same cells.
DeepSeek V3.2 has one on every trunk layer; GLM-5.2 only on its "full indexer" layers
(`indexer_layers`; GLM-5 and 5.1 files without the metadata have it everywhere). NextN
layers get neither (the trunk's filters stop at n_layer()).

Blocks: MLA with the current converter's split attn_k_b / attn_v_b, the indexer's
k_norm (weight and bias), proj, attn_k and attn_q_b, then a dense FFN on the leading
layers or routed experts with a shared expert and the router's score-correction bias.
"""

from __future__ import annotations

from rigspark_gui.core.memory.expert_tensors import routed_experts, shared_expert
from rigspark_gui.core.model import Geometry, KvCacheType, kv_row_bytes

__all__ = ["DSA_ARCHS", "dsa_block_tensors", "dsa_indexer_row_bytes"]

DSA_ARCHS = frozenset({"deepseek32", "glm-dsa"})

_Tensors = list[tuple[str, tuple[int, ...]]]


def dsa_indexer_row_bytes(g: Geometry, layer: int, k: KvCacheType) -> int:
    """Bytes one token adds to `layer`'s indexer key cache (0 without one)."""
    if not g.has_indexer(layer):
        return 0
    return kv_row_bytes(k, g.indexer_head_size)


def dsa_block_tensors(g: Geometry, il: int) -> _Tensors:
    """Names and ggml shapes of block `il` in load_tensors order. An MTP block is skipped
    at load but for its router bias (created without the MTP flags)."""
    e, p = g.n_embd, f"blk.{il}."
    if il >= g.n_layer - g.n_layer_nextn:
        return [(p + "exp_probs_b.bias", (g.n_expert,))] if g.is_moe_layer(il) else []
    rank = g.kv_lora_rank or 0
    rope = g.rope_head_dim or 0
    q_rank = g.q_lora_rank or 0
    hk, hv, nh = g.head_dim_k, g.head_dim_v, g.n_head
    ih, isz = g.indexer_n_head, g.indexer_head_size
    out: _Tensors = [
        (p + "attn_norm.weight", (e,)),
        (p + "attn_q_a_norm.weight", (q_rank,)),
        (p + "attn_kv_a_norm.weight", (rank,)),
        (p + "attn_q_a.weight", (e, q_rank)),
        (p + "attn_q_b.weight", (q_rank, nh * hk)),
        (p + "attn_kv_a_mqa.weight", (e, rank + rope)),
        (p + "attn_k_b.weight", (hk - rope, rank, nh)),
        (p + "attn_v_b.weight", (rank, hv, nh)),
        (p + "attn_output.weight", (nh * hv, e)),
        (p + "ffn_norm.weight", (e,)),
    ]
    if g.has_indexer(il) or g.architecture == "deepseek32":
        out += [
            (p + "indexer.k_norm.weight", (isz,)),
            (p + "indexer.k_norm.bias", (isz,)),
            (p + "indexer.proj.weight", (e, ih)),
            (p + "indexer.attn_k.weight", (e, isz)),
            (p + "indexer.attn_q_b.weight", (q_rank, ih * isz)),
        ]
    if not g.is_moe_layer(il):
        out += [
            (p + "ffn_gate.weight", (e, g.n_ff)),
            (p + "ffn_down.weight", (g.n_ff, e)),
            (p + "ffn_up.weight", (e, g.n_ff)),
        ]
        return out
    n, f = g.n_expert, g.n_ff_expert
    fs = g.n_ff_shared_expert or f * max(g.n_shared_expert, 1)
    out += [
        (p + "ffn_gate_inp.weight", (e, n)),
        (p + "exp_probs_b.bias", (n,)),
        *routed_experts(p, e, f, n),
        *shared_expert(p, e, fs),
    ]
    return out


def dsa_indexer_compute_bytes(g: Geometry, s_flash_attn: bool, n_kv: int, n_tokens: int) -> int:
    """What the lightning indexer adds to a device's compute buffer: its own KQ mask (f16
    with flash attention, f32 without, like the attention's) and the f32 scores of every
    cached token for every token of the batch, from which top_k picks (deepseek32.cpp:
    indexer_score). Fitted on validation/arch_b11434.json (within 4 MiB there)."""
    if not g.indexer_head_size:
        return 0
    return ((2 if s_flash_attn else 4) + 4) * n_kv * n_tokens
