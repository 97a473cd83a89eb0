"""Hybrid and recurrent architectures as llama.cpp b11434 loads them: each block's tensors
(names and ggml shapes, `load_arch_tensors` in src/models/*.cpp) and the rows of the
recurrent state (src/llama-memory-recurrent.cpp).

- `qwen35`, `qwen35moe`, `qwen3next` (Gated DeltaNet): every `full_attention_interval`-th
  layer attends (gated Q: the Q projection is twice n_head x head_dim), the others hold a
  conv state of (d_conv - 1) x (d_inner + 2 n_group d_state) and a d_state x d_inner
  delta-rule state. Blocks have `post_attention_norm` instead of `ffn_norm`.
- `nemotron_h`, `nemotron_h_moe` (Mamba-2): each layer is Mamba-2, attention or FFN/MoE
  alone (`n_ff_per_layer` > 0 marks the FFN ones); FFNs are ungated (ReLU^2).
- `granitehybrid` (Mamba-2): Mamba-2 or attention, then an FFN or MoE in every block.
- `lfm2`, `lfm2moe`: short gated convolutions (a conv state of n_embd x (L - 1)) or
  attention, then an FFN or MoE.
- `kimi-linear`: Kimi Delta Attention or MLA, then an FFN or MoE (arch_kimi.py).

MTP / NextN blocks after the trunk (`n_layer_nextn`) are skipped at load unless MTP
drafting is asked for (`TENSOR_SKIP` without `load_mtp`): they stay placement slots (-ngl
counts them) with no tensors, KV or state.
"""

from __future__ import annotations

from rigspark_gui.core.memory.arch_kimi import KDA_ARCHS, kimi_block_tensors
from rigspark_gui.core.model import Geometry

__all__ = [
    "DELTANET_ARCHS",
    "HYBRID_ARCHS",
    "MAMBA2_ARCHS",
    "ROLLBACK_ARCHS",
    "SHORTCONV_ARCHS",
    "STATE_PASSES",
    "hybrid_block_tensors",
    "hybrid_output_norm",
    "state_rows",
]

DELTANET_ARCHS = frozenset({"qwen35", "qwen35moe", "qwen3next"})
MAMBA2_ARCHS = frozenset({"nemotron_h", "nemotron_h_moe", "granitehybrid"})
SHORTCONV_ARCHS = frozenset({"lfm2", "lfm2moe"})
# Kimi Linear (KDA + MLA): core/memory/arch_kimi.py
HYBRID_ARCHS = DELTANET_ARCHS | MAMBA2_ARCHS | SHORTCONV_ARCHS | KDA_ARCHS
# llm_arch_supports_rs_rollback (src/llama-arch.cpp): state rows per sequence grow with
# the draft length of MTP / EAGLE3 / DFlash drafting (common.h need_n_rs_seq)
ROLLBACK_ARCHS = frozenset(
    {"qwen35", "qwen35moe", "nemotron_h", "nemotron_h_moe", "lfm2", "lfm2moe"}
)

# Passes over one sequence's state per decoded token: each recurrent layer reads its conv
# and ssm / delta-rule state rows (build_rs in src/llama-graph.cpp) and writes the updated
# rows back (the ggml_cpy into get_r_l / get_s_l in src/models/delta-net-base.cpp,
# mamba-base.cpp, lfm2.cpp). The gather's contiguous copy and the op's own output are
# intermediates of the compute buffer, not counted.
STATE_PASSES = 2

_Tensors = list[tuple[str, tuple[int, ...]]]


def state_rows(g: Geometry, n_seq: int, n_rs_seq: int = 0) -> int:
    """Rows of every recurrent layer's r and s tensors: mem_size x (1 + n_rs_seq), with
    mem_size = max(1, n_seq_max) (llama_model::create_memory) and n_rs_seq the rollback
    snapshots (0 unless drafting on an architecture that allows rollback)."""
    snapshots = n_rs_seq if g.architecture in ROLLBACK_ARCHS else 0
    return max(1, n_seq) * (1 + snapshots)


def hybrid_output_norm(g: Geometry) -> str:
    """LFM2 names its final norm after the embedding (LLM_TENSOR_OUTPUT_NORM_LFM2)."""
    return "token_embd_norm.weight" if g.architecture in SHORTCONV_ARCHS else "output_norm.weight"


def _attention(g: Geometry, p: str, il: int, q_rows: int) -> _Tensors:
    kv = g.kv_heads(il)
    return [
        (p + "attn_q.weight", (g.n_embd, q_rows)),
        (p + "attn_k.weight", (g.n_embd, kv * g.head_dim_k)),
        (p + "attn_v.weight", (g.n_embd, kv * g.head_dim_v)),
    ]


def _moe(g: Geometry, p: str, gated: bool, width: int) -> _Tensors:
    e, n, f = g.n_embd, g.n_expert, g.n_ff_expert
    out: _Tensors = [(p + "ffn_gate_inp.weight", (e, n))]
    if gated:
        out.append((p + "ffn_gate_exps.weight", (width, f, n)))
    out += [(p + "ffn_up_exps.weight", (width, f, n)), (p + "ffn_down_exps.weight", (f, width, n))]
    return out


def _shared(g: Geometry, p: str, gated: bool) -> _Tensors:
    e, fs = g.n_embd, g.n_ff_shared_expert
    if not fs:
        return []
    out: _Tensors = [(p + "ffn_gate_shexp.weight", (e, fs))] if gated else []
    return [*out, (p + "ffn_up_shexp.weight", (e, fs)), (p + "ffn_down_shexp.weight", (fs, e))]


def _dense(e: int, f: int, p: str, gated: bool) -> _Tensors:
    out: _Tensors = [(p + "ffn_gate.weight", (e, f))] if gated else []
    return [*out, (p + "ffn_up.weight", (e, f)), (p + "ffn_down.weight", (f, e))]


def _deltanet(g: Geometry, p: str, il: int) -> _Tensors:
    """qwen35 / qwen35moe / qwen3next blocks (src/models/qwen35*.cpp, qwen3next.cpp)."""
    e, hk = g.n_embd, g.head_dim_k
    out: _Tensors = [(p + "attn_norm.weight", (e,)), (p + "post_attention_norm.weight", (e,))]
    if il in g.recurrent_layers:
        key_dim = g.ssm_d_state * g.ssm_n_group
        value_dim = g.ssm_d_state * g.ssm_dt_rank  # head_v_dim = ssm_d_state in the loader
        conv_dim = 2 * key_dim + value_dim
        heads = g.ssm_dt_rank
        out += [
            (p + "attn_qkv.weight", (e, conv_dim)),
            (p + "attn_gate.weight", (e, value_dim)),
            (p + "ssm_conv1d.weight", (g.ssm_d_conv, conv_dim)),
            (p + "ssm_dt.bias", (heads,)),
            (p + "ssm_a", (heads,)),
        ]
        if g.architecture == "qwen3next":
            out.append((p + "ssm_ba.weight", (e, 2 * heads)))
        else:
            out += [(p + "ssm_beta.weight", (e, heads)), (p + "ssm_alpha.weight", (e, heads))]
        out += [(p + "ssm_norm.weight", (g.ssm_d_state,)), (p + "ssm_out.weight", (value_dim, e))]
    else:
        out += _attention(g, p, il, 2 * g.n_head * hk)  # Q and its output gate
        out += [
            (p + "attn_output.weight", (g.n_head * hk, e)),
            (p + "attn_q_norm.weight", (hk,)),
            (p + "attn_k_norm.weight", (hk,)),
        ]
    if g.architecture == "qwen35":
        return out + _dense(e, g.n_ff, p, True)
    out += _moe(g, p, True, e)
    out.append((p + "ffn_gate_inp_shexp.weight", (e,)))
    return out + _shared(g, p, True)


def _mamba2(g: Geometry, p: str) -> _Tensors:
    """A Mamba-2 mixer (nemotron_h, granitehybrid); the converter writes the conv bias."""
    e, di, ng, ds, nh = g.n_embd, g.ssm_d_inner, g.ssm_n_group, g.ssm_d_state, g.ssm_dt_rank
    conv = di + 2 * ng * ds
    return [
        (p + "ssm_in.weight", (e, 2 * di + 2 * ng * ds + nh)),
        (p + "ssm_conv1d.weight", (g.ssm_d_conv, conv)),
        (p + "ssm_conv1d.bias", (conv,)),
        (p + "ssm_dt.bias", (nh,)),
        (p + "ssm_a", (1, nh)),
        (p + "ssm_d", (1, nh)),
        (p + "ssm_norm.weight", (di // max(ng, 1), ng)),
        (p + "ssm_out.weight", (di, e)),
    ]


def _nemotron(g: Geometry, p: str, il: int) -> _Tensors:
    """nemotron_h / nemotron_h_moe (src/models/nemotron-h.cpp): one mixer per layer."""
    e = g.n_embd
    out: _Tensors = [(p + "attn_norm.weight", (e,))]
    ff = g.n_ff_per_layer[il] if g.n_ff_per_layer is not None else g.n_ff
    if il in g.recurrent_layers:
        return out + _mamba2(g, p)
    if ff == 0:
        out += _attention(g, p, il, g.n_head * g.head_dim_k)
        return [*out, (p + "attn_output.weight", (g.n_head * g.head_dim_k, e))]
    if not g.is_moe:
        return out + _dense(e, ff, p, False)
    width = g.moe_latent_size or e
    out += [(p + "ffn_gate_inp.weight", (e, g.n_expert)), (p + "exp_probs_b.bias", (g.n_expert,))]
    if g.moe_latent_size:
        out += [
            (p + "ffn_latent_down.weight", (e, width)),
            (p + "ffn_latent_up.weight", (width, e)),
        ]
    out += _moe(g, p, False, width)[1:]
    return out + _shared(g, p, False)


def _granite(g: Geometry, p: str, il: int) -> _Tensors:
    """granitehybrid (src/models/granite-hybrid.cpp)."""
    e = g.n_embd
    out: _Tensors = [(p + "attn_norm.weight", (e,))]
    if il in g.recurrent_layers:
        out += _mamba2(g, p)
    else:
        out += _attention(g, p, il, g.n_head * g.head_dim_k)
        out.append((p + "attn_output.weight", (g.n_head * g.head_dim_k, e)))
    out.append((p + "ffn_norm.weight", (e,)))
    if g.is_moe:
        return out + _moe(g, p, True, e) + _shared(g, p, True)
    return out + _dense(e, g.n_ff, p, True)


def _lfm2(g: Geometry, p: str, il: int) -> _Tensors:
    """lfm2 / lfm2moe (src/models/lfm2.cpp, lfm2moe.cpp): FFN first in the file's order."""
    e = g.n_embd
    out: _Tensors = [(p + "ffn_norm.weight", (e,))]
    if g.is_moe_layer(il):
        out += [*_moe(g, p, True, e), (p + "exp_probs_b.bias", (g.n_expert,))]
    else:
        out += _dense(e, g.n_ff, p, True)
    out.append((p + "attn_norm.weight", (e,)))
    if il in g.recurrent_layers:
        return [
            *out,
            (p + "shortconv.conv.weight", (g.shortconv_l_cache, e)),
            (p + "shortconv.in_proj.weight", (e, 3 * e)),
            (p + "shortconv.out_proj.weight", (e, e)),
        ]
    return [
        *out,
        (p + "attn_q_norm.weight", (g.head_dim_k,)),
        (p + "attn_k_norm.weight", (g.head_dim_k,)),
        *_attention(g, p, il, e),
        (p + "attn_output.weight", (e, e)),
    ]


def hybrid_block_tensors(g: Geometry, il: int) -> _Tensors:
    """Names and ggml shapes (ne0 first) of block `il` of a hybrid architecture."""
    if il >= g.n_layer - g.n_layer_nextn:
        return []  # an MTP block: skipped at load unless drafting with it
    p = f"blk.{il}."
    arch = g.architecture
    if arch in DELTANET_ARCHS:
        return _deltanet(g, p, il)
    if arch in ("nemotron_h", "nemotron_h_moe"):
        return _nemotron(g, p, il)
    if arch == "granitehybrid":
        return _granite(g, p, il)
    if arch in SHORTCONV_ARCHS:
        return _lfm2(g, p, il)
    if arch in KDA_ARCHS:
        return kimi_block_tensors(g, il)
    raise ValueError(f"not a hybrid architecture: {arch}")
