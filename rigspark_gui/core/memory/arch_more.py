"""Four architectures llama.cpp b11434 loads with blocks of their own, as its loaders
create their tensors (src/models/seed-oss.cpp, apertus.cpp, ernie4-5.cpp, minimax-m2.cpp:
load_arch_tensors) from what the converter writes (conversion/olmo.py SeedOssModel,
llama.py ApertusModel, ernie.py Ernie4_5MoeModel, minimax.py MiniMaxM2Model).

- `seed_oss` (Seed-OSS-36B): Q/K/V biases (the release's `attention_bias`), and the norm
  before the FFN stored as `post_attention_norm`, so the block has no `ffn_norm`.
- `apertus` (Apertus 8B / 70B): Q/K norms of one head's width and an ungated FFN (up and
  down only; xIELU's per-layer parameters are metadata, not tensors). The converter's
  llama3 `rope_freqs` table (head_dim / 2 floats) is optional and not listed, as for the
  `llama` entries.
- `ernie4_5-moe` (ERNIE 4.5 21B-A3B, 300B-A47B): every layer from
  `leading_dense_block_count` on carries routed experts with the router's score-correction
  bias and shared experts of `expert_shared_feed_forward_length` (the converter writes
  intermediate_size / num_key_value_heads); the leading layers a dense FFN.
- `minimax-m2` (MiniMax M2 / M2.5 / M2.7): Q and K norms over the whole projection
  (n_head x head_dim and n_head_kv x head_dim), and routed experts with a score-correction
  bias on every layer; no shared expert. The MTP modules are not converted.
- `mistral4` (Mistral Small 4): deepseek2's loader (src/models/deepseek2.cpp) on what
  conversion/mistral3.py writes: MLA with the split attn_k_b / attn_v_b of current files,
  experts already stacked with gate and up fused (`ffn_gate_up_exps`), one shared expert.
  A router score-correction bias is optional there and not listed.

KV caches are the plain per-layer K and V of every layer; MLA's latent cache for mistral4.
"""

from __future__ import annotations

from rigspark_gui.core.memory.expert_tensors import shared_expert
from rigspark_gui.core.model import Geometry

__all__ = ["MORE_ARCHS", "more_block_tensors"]

MORE_ARCHS = frozenset({"seed_oss", "apertus", "ernie4_5-moe", "minimax-m2", "mistral4"})

_Tensors = list[tuple[str, tuple[int, ...]]]


def _attention(g: Geometry, p: str, bias: bool) -> _Tensors:
    e, hk, hv = g.n_embd, g.head_dim_k, g.head_dim_v
    q, k, v = g.n_head * hk, g.n_head_kv * hk, g.n_head_kv * hv
    out: _Tensors = [
        (p + "attn_q.weight", (e, q)),
        (p + "attn_k.weight", (e, k)),
        (p + "attn_v.weight", (e, v)),
    ]
    if bias:
        out += [(p + "attn_q.bias", (q,)), (p + "attn_k.bias", (k,)), (p + "attn_v.bias", (v,))]
    out.append((p + "attn_output.weight", (g.n_head * hv, e)))
    return out


def _experts(g: Geometry, p: str) -> _Tensors:
    e, n, f = g.n_embd, g.n_expert, g.n_ff_expert
    return [
        (p + "ffn_gate_inp.weight", (e, n)),
        (p + "exp_probs_b.bias", (n,)),
        (p + "ffn_gate_exps.weight", (e, f, n)),
        (p + "ffn_down_exps.weight", (f, e, n)),
        (p + "ffn_up_exps.weight", (e, f, n)),
    ]


def _dense(g: Geometry, p: str, gated: bool = True) -> _Tensors:
    e, f = g.n_embd, g.n_ff
    gate: _Tensors = [(p + "ffn_gate.weight", (e, f))] if gated else []
    return [*gate, (p + "ffn_up.weight", (e, f)), (p + "ffn_down.weight", (f, e))]


def _mistral4(g: Geometry, p: str, il: int) -> _Tensors:
    e, nh, hk, hv = g.n_embd, g.n_head, g.head_dim_k, g.head_dim_v
    rank, rope, q_rank = g.kv_lora_rank or 0, g.rope_head_dim or 0, g.q_lora_rank or 0
    out: _Tensors = [(p + "attn_norm.weight", (e,))]
    if q_rank:
        out.append((p + "attn_q_a_norm.weight", (q_rank,)))
    out.append((p + "attn_kv_a_norm.weight", (rank,)))
    if q_rank:
        out += [(p + "attn_q_a.weight", (e, q_rank)), (p + "attn_q_b.weight", (q_rank, nh * hk))]
    else:
        out.append((p + "attn_q.weight", (e, nh * hk)))
    out += [
        (p + "attn_kv_a_mqa.weight", (e, rank + rope)),
        (p + "attn_k_b.weight", (hk - rope, rank, nh)),
        (p + "attn_v_b.weight", (rank, hv, nh)),
        (p + "attn_output.weight", (nh * hv, e)),
        (p + "ffn_norm.weight", (e,)),
    ]
    if not g.is_moe_layer(il):
        return out + _dense(g, p)
    n, f = g.n_expert, g.n_ff_expert
    fs = g.n_ff_shared_expert or f * max(g.n_shared_expert, 1)
    out += [
        (p + "ffn_gate_inp.weight", (e, n)),
        (p + "ffn_down_exps.weight", (f, e, n)),
        (p + "ffn_gate_up_exps.weight", (e, 2 * f, n)),
    ]
    if g.n_shared_expert:
        out += shared_expert(p, e, fs)
    return out


def more_block_tensors(g: Geometry, il: int) -> _Tensors:
    """Names and ggml shapes (ne0 first) of block `il`."""
    e, p, arch = g.n_embd, f"blk.{il}.", g.architecture
    if arch == "mistral4":
        return _mistral4(g, p, il)
    out: _Tensors = [(p + "attn_norm.weight", (e,))]
    if arch == "seed_oss":
        out += _attention(g, p, bias=True)
        out.append((p + "post_attention_norm.weight", (e,)))
        return out + _dense(g, p)
    if arch == "apertus":
        out += _attention(g, p, bias=False)
        out += [
            (p + "ffn_norm.weight", (e,)),
            (p + "attn_q_norm.weight", (g.head_dim_k,)),
            (p + "attn_k_norm.weight", (g.head_dim_k,)),
        ]
        return out + _dense(g, p, gated=False)
    if arch == "minimax-m2":
        out += _attention(g, p, bias=False)
        out += [
            (p + "attn_q_norm.weight", (g.n_head * g.head_dim_k,)),
            (p + "attn_k_norm.weight", (g.n_head_kv * g.head_dim_k,)),
            (p + "ffn_norm.weight", (e,)),
        ]
        return out + _experts(g, p)
    # ernie4_5-moe: experts on every layer past the dense lead (load_arch_tensors does not
    # apply interleave_moe_layer_step; the releases route on every such layer)
    out += _attention(g, p, bias=False)
    out.append((p + "ffn_norm.weight", (e,)))
    if il < g.n_dense_lead or not g.n_expert:
        return out + _dense(g, p)
    out += _experts(g, p)
    if g.n_shared_expert and g.n_ff_shared_expert:
        fs = g.n_ff_shared_expert
        out += shared_expert(p, e, fs)
    return out
