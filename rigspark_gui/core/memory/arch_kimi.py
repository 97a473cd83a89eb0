"""Kimi Linear (`kimi-linear`: Kimi-Linear-48B-A3B) as llama.cpp b11434 loads it
(src/models/kimi-linear.cpp, src/llama-hparams.cpp, src/llama-memory-hybrid.cpp).

Layers without KV heads (`head_count_kv` 0) are Kimi Delta Attention (KDA): recurrent,
with n_head heads of `kda_head_dim`, short convolutions over Q, K and V and a gated
output. The others are DeepSeek-style MLA without Q compression (the b11434 loader never
reads q_lora_rank, so `attn_q` is a plain projection), split attn_k_b / attn_v_b as the
converter writes them (conversion/kimi_linear.py), and a K-only latent cache of
kv_lora_rank + rope values per token (is_mla: no V cache).

State per KDA layer and sequence (hparams.n_embd_r / n_embd_s, f32):
r = 3 x (d_conv - 1) x n_head x kda_head_dim (Q, K and V conv states),
s = kda_head_dim^2 x n_head (the delta-rule state of each head). Rollback snapshots are
not supported for this architecture (llm_arch_supports_rs_rollback).

Every block ends in an FFN: dense SwiGLU on the `leading_dense_block_count` layers,
else routed experts, the shared expert (n_ff_expert x expert_shared_count wide) and the
router's score-correction bias.

Cache types b11434 refuses (llama_init_from_model, src/llama-context.cpp): an MLA model
takes K and V of one type only; a quantized V needs flash attention, and flash attention
a V head (the file's value_length, n_embd_head_v) that the type's block divides. The
converter writes config.json's head_dim there (72 for Kimi-Linear-48B), so no quantized
cache loads for that model.
"""

from __future__ import annotations

from rigspark_gui.core.memory.expert_tensors import routed_experts, shared_expert
from rigspark_gui.core.model import GGML_TYPES, Geometry, KvCacheType

__all__ = ["KDA_ARCHS", "kimi_block_tensors", "kimi_kv_refusal"]

KDA_ARCHS = frozenset({"kimi-linear"})

_Tensors = list[tuple[str, tuple[int, ...]]]


def _kda(g: Geometry, p: str) -> _Tensors:
    """A KDA mixer (load_arch_tensors' is_recr branch). The conv weights are 4-D as the
    converter writes them ({d_conv, 1, d_inner, 1}); A is {1, n_head, 1, 1}."""
    e, hd, nh = g.n_embd, g.kda_head_dim, g.n_head
    d_inner = hd * nh
    conv = (g.ssm_d_conv, 1, d_inner, 1)
    return [
        (p + "ssm_conv1d_q.weight", conv),
        (p + "ssm_conv1d_k.weight", conv),
        (p + "ssm_conv1d_v.weight", conv),
        (p + "attn_q.weight", (e, d_inner)),
        (p + "attn_k.weight", (e, d_inner)),
        (p + "attn_v.weight", (e, d_inner)),
        (p + "ssm_f_a.weight", (e, hd)),
        (p + "ssm_f_b.weight", (hd, d_inner)),
        (p + "ssm_beta.weight", (e, nh)),
        (p + "ssm_a", (1, nh, 1, 1)),
        (p + "ssm_dt.bias", (d_inner,)),
        (p + "ssm_g_a.weight", (e, hd)),
        (p + "ssm_g_b.weight", (hd, d_inner)),
        (p + "ssm_norm.weight", (hd,)),
        (p + "attn_output.weight", (d_inner, e)),
    ]


def _mla(g: Geometry, p: str) -> _Tensors:
    """An MLA layer: per-head K of head_dim_k (nope + rope), V of head_dim_v."""
    e, nh, hk, hv = g.n_embd, g.n_head, g.head_dim_k, g.head_dim_v
    rank, rope = g.kv_lora_rank or 0, g.rope_head_dim or 0
    return [
        (p + "attn_kv_a_norm.weight", (rank,)),
        (p + "attn_q.weight", (e, nh * hk)),
        (p + "attn_kv_a_mqa.weight", (e, rank + rope)),
        (p + "attn_k_b.weight", (hk - rope, rank, nh)),
        (p + "attn_v_b.weight", (rank, hv, nh)),
        (p + "attn_output.weight", (nh * hv, e)),
    ]


def kimi_block_tensors(g: Geometry, il: int) -> _Tensors:
    """Names and ggml shapes (ne0 first) of block `il`, in load_arch_tensors order."""
    e, p = g.n_embd, f"blk.{il}."
    out: _Tensors = [(p + "attn_norm.weight", (e,))]
    out += _kda(g, p) if il in g.recurrent_layers else _mla(g, p)
    out.append((p + "ffn_norm.weight", (e,)))
    if not g.is_moe_layer(il):
        return [
            *out,
            (p + "ffn_gate.weight", (e, g.n_ff)),
            (p + "ffn_down.weight", (g.n_ff, e)),
            (p + "ffn_up.weight", (e, g.n_ff)),
        ]
    n, f = g.n_expert, g.n_ff_expert
    fs = g.n_ff_shared_expert
    out += [
        (p + "ffn_gate_inp.weight", (e, n)),
        *routed_experts(p, e, f, n),
    ]
    if fs:  # TENSOR_NOT_REQUIRED in the loader; the converter writes them
        out += shared_expert(p, e, fs)
    return [*out, (p + "exp_probs_b.bias", (n,))]


def kimi_kv_refusal(g: Geometry, k: KvCacheType, v: KvCacheType) -> str | None:
    """Why llama.cpp b11434 refuses a context with this K / V cache pair (None: it loads)."""
    if not (k.llama_cpp and v.llama_cpp):
        return None
    if k is not v:
        return f"{g.architecture} (MLA) takes K and V caches of one type, not {k.value}/{v.value}"
    block = GGML_TYPES[v.value.upper()].block_size
    if v.quantized and g.kda_value_length % block:
        return (
            f"a {v.value} V cache needs flash attention, which needs V heads that are a "
            f"multiple of {block}: this file's value_length is {g.kda_value_length}"
        )
    return None
