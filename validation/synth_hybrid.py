"""Synthetic GGUFs of the hybrid architectures (Gated DeltaNet, Mamba-2, short
convolutions), written with the `gguf` package in the layout llama.cpp b11434's converter
gives them (conversion/qwen.py, nemotron.py, granite.py, lfm2.py: metadata keys and
tensor names).

The block tensors come from the engine's own list (core/memory/arch_hybrid.py); llama.cpp
refuses a file whose tensors are missing, extra or of another shape, so a file it loads
checks that list. An MTP block (`n_layer_nextn`) is written after the trunk as the
converter does (block_count counts it); llama.cpp skips it without MTP drafting.
Weights are random F32 (norms 1.0); llama.cpp's buffers depend on shapes and types only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGUFValueType, GGUFWriter

from rigspark_gui.calibrate.synth import add_sentencepiece_vocab
from rigspark_gui.core.memory.tensors import block_tensors, global_tensors
from rigspark_gui.core.model.model_spec import Geometry

Shape = tuple[int, ...]


@dataclass(frozen=True)
class HybridSynth:
    name: str
    geometry: Geometry
    # write attention.recurrent_layers instead of full_attention_interval (DeltaNet)
    recurrent_flags: bool = False
    notes: str = field(default="", compare=False)


def _g(**kw: object) -> Geometry:
    base: dict[str, object] = {"n_vocab": 4096, "context_length": 32768, "n_ff": 0}
    base.update(kw)
    return Geometry(**base)  # type: ignore[arg-type]


_QWEN35_REC = tuple(i for i in range(8) if (i + 1) % 4 != 0)
_NEMO_KINDS = "M-M*M-ME"  # Mamba-2, MLP, attention, MoE (nemotron_h_moe: the E layers)


def _nemotron(arch: str, moe: bool, mtp: bool = False) -> Geometry:
    kinds = _NEMO_KINDS if moe else _NEMO_KINDS.replace("E", "-")
    # the converter's folded MTP block (conversion/nemotron.py): counted as an attention
    # and an MoE layer in the per-layer head_count_kv and feed_forward_length arrays
    kinds += "X" if mtp else ""
    kv = tuple(2 if k in "*X" else 0 for k in kinds)
    ff = tuple((384 if moe else 1536) if k in "-EX" else 0 for k in kinds)
    extra: dict[str, object] = {"n_ff": 1536}  # the widest FFN, as the importer reads it
    if moe:
        extra = {"n_expert": 8, "n_expert_used": 2, "n_ff_expert": 384,
                 "n_shared_expert": 1, "n_ff_shared_expert": 768}  # fmt: skip
        ff = tuple(384 if k in "-EX" else 0 for k in kinds)  # every FFN layer is MoE
    return _g(
        architecture=arch, n_layer=len(kinds), n_layer_nextn=int(mtp), n_embd=512, n_head=8,
        n_head_kv=2,
        n_head_kv_per_layer=kv, head_dim_k=64, head_dim_v=64, n_ff_per_layer=ff,
        recurrent_layers=tuple(i for i, k in enumerate(kinds) if k == "M"),
        ssm_d_conv=4, ssm_d_inner=1024, ssm_d_state=64, ssm_dt_rank=16, ssm_n_group=2,
        **extra,
    )  # fmt: skip


# fmt: off
MODELS: tuple[HybridSynth, ...] = (
    # Qwen3.5-9B ratios: 3 Gated DeltaNet layers per attention layer, gated Q, head_dim
    # 256 (here 128), 16 key / 32 value linear heads (here 2 / 4), an MTP block.
    HybridSynth(
        "qwen35-gdn",
        _g(architecture="qwen35", n_layer=9, n_layer_nextn=1, n_embd=512, n_head=8,
           n_head_kv=2, n_head_kv_per_layer=(2,) * 8 + (0,), head_dim_k=128, head_dim_v=128,
           n_ff=1536, recurrent_layers=_QWEN35_REC, ssm_d_conv=4, ssm_d_inner=512,
           ssm_d_state=128, ssm_dt_rank=4, ssm_n_group=2),
    ),
    # Qwen3.5-35B-A3B: the same mixers, routed + shared experts (8 here, 2 used).
    HybridSynth(
        "qwen35moe-gdn",
        _g(architecture="qwen35moe", n_layer=8, n_embd=512, n_head=8, n_head_kv=2,
           head_dim_k=128, head_dim_v=128, n_expert=8, n_expert_used=2, n_ff_expert=256,
           n_shared_expert=1, n_ff_shared_expert=256, recurrent_layers=_QWEN35_REC,
           ssm_d_conv=4, ssm_d_inner=512, ssm_d_state=128, ssm_dt_rank=4, ssm_n_group=2),
        recurrent_flags=True,
    ),
    # Qwen3-Next-80B-A3B: fused beta/alpha projection (ssm_ba), experts, untied head.
    HybridSynth(
        "qwen3next-gdn",
        _g(architecture="qwen3next", n_layer=8, n_embd=512, n_head=8, n_head_kv=2,
           head_dim_k=128, head_dim_v=128, n_expert=8, n_expert_used=2, n_ff_expert=256,
           n_shared_expert=1, n_ff_shared_expert=256, recurrent_layers=_QWEN35_REC,
           ssm_d_conv=4, ssm_d_inner=512, ssm_d_state=128, ssm_dt_rank=4, ssm_n_group=2),
    ),
    # Nemotron-H (Nemotron Nano 2 / 3): Mamba-2, ReLU^2 MLP and attention layers apart.
    HybridSynth("nemotron-h", _nemotron("nemotron_h", False)),
    HybridSynth("nemotron-h-moe", _nemotron("nemotron_h_moe", True)),
    # Granite 4.0-H: Mamba-2 (d_inner = 2 n_embd) with an attention layer in four, MoE FFN.
    HybridSynth(
        "granite-hybrid",
        _g(architecture="granitehybrid", n_layer=8, n_embd=512, n_head=8, n_head_kv=2,
           n_head_kv_per_layer=tuple(2 if i % 4 == 3 else 0 for i in range(8)),
           head_dim_k=64, head_dim_v=64, n_expert=8, n_expert_used=2, n_ff_expert=256,
           n_shared_expert=1, n_ff_shared_expert=512,
           recurrent_layers=tuple(i for i in range(8) if i % 4 != 3),
           ssm_d_conv=4, ssm_d_inner=1024, ssm_d_state=64, ssm_dt_rank=16, ssm_n_group=1),
    ),
    # LFM2-1.2B: gated short convolutions (L = 3) with attention layers between, tied head.
    HybridSynth(
        "lfm2-conv",
        _g(architecture="lfm2", n_layer=8, n_embd=512, n_head=8, n_head_kv=2,
           n_head_kv_per_layer=tuple(2 if i in (2, 5) else 0 for i in range(8)),
           head_dim_k=64, head_dim_v=64, n_ff=1536, tied_embeddings=True,
           recurrent_layers=tuple(i for i in range(8) if i not in (2, 5)),
           shortconv_l_cache=3),
    ),
    # LFM2-8B-A1B: two dense lead layers, then MoE.
    HybridSynth(
        "lfm2moe-conv",
        _g(architecture="lfm2moe", n_layer=8, n_embd=512, n_head=8, n_head_kv=2,
           n_head_kv_per_layer=tuple(2 if i in (2, 5) else 0 for i in range(8)),
           head_dim_k=64, head_dim_v=64, n_ff=1536, tied_embeddings=True, n_expert=8,
           n_expert_used=2, n_ff_expert=256, n_dense_lead=2,
           recurrent_layers=tuple(i for i in range(8) if i not in (2, 5)),
           shortconv_l_cache=3),
    ),
)
# fmt: on
# Nemotron 3 Super's layout: the Nemotron-H MoE trunk and its MTP block (attention + MoE),
# for validation/mtp_b11434.py
NEMOTRON_MTP = HybridSynth("nemotron-h-moe-mtp", _nemotron("nemotron_h_moe", True, mtp=True))


def _mtp_block(g: Geometry, il: int) -> list[tuple[str, Shape]]:
    """A Qwen3.5 MTP block: a full-attention block plus the NextN projections."""
    e, hk, p = g.n_embd, g.head_dim_k, f"blk.{il}."
    kv = g.n_head_kv * hk
    return [
        (p + "attn_norm.weight", (e,)),
        (p + "post_attention_norm.weight", (e,)),
        (p + "attn_q.weight", (e, 2 * g.n_head * hk)),
        (p + "attn_k.weight", (e, kv)),
        (p + "attn_v.weight", (e, kv)),
        (p + "attn_output.weight", (g.n_head * hk, e)),
        (p + "attn_q_norm.weight", (hk,)),
        (p + "attn_k_norm.weight", (hk,)),
        (p + "ffn_gate.weight", (e, g.n_ff)),
        (p + "ffn_down.weight", (g.n_ff, e)),
        (p + "ffn_up.weight", (e, g.n_ff)),
        (p + "nextn.eh_proj.weight", (2 * e, e)),
        (p + "nextn.enorm.weight", (e,)),
        (p + "nextn.hnorm.weight", (e,)),
        (p + "nextn.shared_head_norm.weight", (e,)),
    ]


def _nemotron_mtp_block(g: Geometry, il: int) -> list[tuple[str, Shape]]:
    """A Nemotron-H MoE MTP block (src/models/nemotron-h.cpp): the NextN tensors, an
    attention sub-layer and a MoE sub-layer after post_attention_norm."""
    e, p = g.n_embd, f"blk.{il}."
    kv = g.n_head_kv * g.head_dim_k
    out: list[tuple[str, Shape]] = [
        (p + "nextn.enorm.weight", (e,)),
        (p + "nextn.hnorm.weight", (e,)),
        (p + "nextn.eh_proj.weight", (2 * e, e)),
        (p + "nextn.shared_head_norm.weight", (e,)),
        (p + "attn_norm.weight", (e,)),
        (p + "attn_q.weight", (e, g.n_head * g.head_dim_k)),
        (p + "attn_k.weight", (e, kv)),
        (p + "attn_v.weight", (e, kv)),
        (p + "attn_output.weight", (g.n_head * g.head_dim_k, e)),
        (p + "post_attention_norm.weight", (e,)),
        (p + "ffn_gate_inp.weight", (e, g.n_expert)),
        (p + "exp_probs_b.bias", (g.n_expert,)),
        (p + "ffn_up_exps.weight", (e, g.n_ff_expert, g.n_expert)),
        (p + "ffn_down_exps.weight", (g.n_ff_expert, e, g.n_expert)),
    ]
    fs = g.n_ff_shared_expert
    return [*out, (p + "ffn_up_shexp.weight", (e, fs)), (p + "ffn_down_shexp.weight", (fs, e))]


def tensors(m: HybridSynth) -> list[tuple[str, Shape]]:
    g = m.geometry
    first, *last = global_tensors(g)
    trunk = g.n_layer - g.n_layer_nextn
    out: list[tuple[str, Shape]] = [(first[0], first[1])]
    for il in range(trunk):
        out += block_tensors(g, il)
    out += [(n, s) for n, s, *_ in last]
    mtp = _nemotron_mtp_block if g.architecture == "nemotron_h_moe" else _mtp_block
    for il in range(trunk, g.n_layer):
        out += mtp(g, il)
    return out


def _metadata(w: GGUFWriter, m: HybridSynth) -> None:
    g, arch = m.geometry, m.geometry.architecture
    n_all = g.n_layer
    a = arch + "."
    w.add_name("synthetic")
    w.add_context_length(g.context_length)
    w.add_embedding_length(g.n_embd)
    w.add_block_count(n_all)
    w.add_head_count(g.n_head)
    if g.n_head_kv_per_layer is not None and (not g.n_layer_nextn or arch == "nemotron_h_moe"):
        w.add_array(a + "attention.head_count_kv", list(g.n_head_kv_per_layer))
    else:
        w.add_head_count_kv(g.n_head_kv)
    w.add_key_length(g.head_dim_k)
    w.add_value_length(g.head_dim_v)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(0)  # ALL_F32
    w.add_vocab_size(g.n_vocab)
    if g.n_ff_per_layer is not None:
        w.add_array(a + "feed_forward_length", list(g.n_ff_per_layer))
    elif g.n_ff or arch == "granitehybrid":
        w.add_feed_forward_length(g.n_ff or g.n_ff_expert)  # Granite: the expert width
    if g.is_moe:
        w.add_expert_count(g.n_expert)
        w.add_expert_used_count(g.n_expert_used)
        w.add_expert_feed_forward_length(g.n_ff_expert)
        if g.n_ff_shared_expert:
            w.add_expert_shared_feed_forward_length(g.n_ff_shared_expert)
    if g.ssm_d_conv:
        w.add_uint32(a + "ssm.conv_kernel", g.ssm_d_conv)
        w.add_uint32(a + "ssm.inner_size", g.ssm_d_inner)
        w.add_uint32(a + "ssm.state_size", g.ssm_d_state)
        w.add_uint32(a + "ssm.time_step_rank", g.ssm_dt_rank)
        w.add_uint32(a + "ssm.group_count", g.ssm_n_group)
    if arch in ("qwen35", "qwen35moe", "qwen3next"):
        w.add_rope_dimension_count(g.head_dim_k // 2)
        if arch != "qwen3next":
            w.add_array(a + "rope.dimension_sections", [11, 11, 10, 0])
        if m.recurrent_flags:
            flags = [i in g.recurrent_layers for i in range(n_all)]
            w.add_array(a + "attention.recurrent_layers", flags)
        else:
            w.add_uint32(a + "full_attention_interval", 4)
        if g.n_layer_nextn:
            w.add_uint32(a + "nextn_predict_layers", g.n_layer_nextn)
    if arch.startswith("nemotron_h"):
        w.add_float32(a + "attention.layer_norm_epsilon", 1e-5)
        if g.is_moe:
            w.add_uint32(a + "expert_shared_count", g.n_shared_expert)
            w.add_bool(a + "expert_weights_norm", True)
            w.add_float32(a + "expert_weights_scale", 1.0)
            w.add_uint32(a + "expert_gating_func", 2)  # sigmoid
        if g.n_layer_nextn:
            w.add_uint32(a + "nextn_predict_layers", g.n_layer_nextn)
    if arch.startswith("lfm2"):
        w.add_uint32(a + "shortconv.l_cache", g.shortconv_l_cache)
        if g.n_dense_lead:
            w.add_uint32(a + "leading_dense_block_count", g.n_dense_lead)
            w.add_uint32(a + "expert_gating_func", 2)
    add_sentencepiece_vocab(w, g.n_vocab)
    _ = GGUFValueType  # arrays are typed by their Python values


def write_gguf(m: HybridSynth, path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), m.geometry.architecture)
    _metadata(w, m)
    for name, shape in tensors(m):
        np_shape = tuple(reversed(shape))
        if name.endswith("norm.weight"):
            data = np.ones(np_shape, dtype=np.float32)
        else:
            data = (rng.standard_normal(np_shape, dtype=np.float32) * 0.02).astype(np.float32)
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
