"""Synthetic GGUFs of Kimi Linear (`kimi-linear`), written with the `gguf` package in the
layout llama.cpp b11434's converter gives them (conversion/kimi_linear.py,
KimiLinearModel: metadata keys, tensor names, 4-D conv weights, split attn_k_b /
attn_v_b).

The converter turns MLA into MQA for the latent cache: `head_count_kv` is one per layer,
0 on KDA layers and 1 on MLA layers, `key_length` is kv_lora_rank + rope dims and the
per-head sizes go to `key_length_mla` / `value_length_mla`; `value_length` is config.json's
head_dim (n_embd / n_head for Kimi-Linear-48B), which the MLA graph does not read.
The block tensors come from the engine's own list (core/memory/arch_kimi.py); llama.cpp
refuses a file whose tensors are missing, extra or of another shape, so a file it loads
checks that list. Weights are random F32 (norms 1.0); llama.cpp's buffers depend on
shapes and types only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from rigspark_gui.calibrate.synth import add_sentencepiece_vocab
from rigspark_gui.core.memory.tensors import block_tensors, global_tensors
from rigspark_gui.core.model.model_spec import Geometry

Shape = tuple[int, ...]


@dataclass(frozen=True)
class KimiSynth:
    name: str
    geometry: Geometry
    # matrices written as F16 (a model too large for an F32 source) and measured at F16 only
    f16: bool = False
    quants: tuple[str, ...] = ("F16", "Q8_0", "Q4_0", "Q4_K_M")


def _g(n_layer: int, attention: tuple[int, ...], **kw: object) -> Geometry:
    """Kimi-Linear-48B-A3B's shape, scaled down: MLA on `attention`, KDA elsewhere."""
    base: dict[str, object] = dict(
        architecture="kimi-linear", n_layer=n_layer, n_embd=512, n_head=8, n_head_kv=8,
        n_head_kv_per_layer=tuple(8 if i in attention else 0 for i in range(n_layer)),
        head_dim_k=96, head_dim_v=64, kv_lora_rank=128, rope_head_dim=32, n_vocab=4096,
        n_ff=1536, n_expert=8, n_expert_used=2, n_ff_expert=256, n_shared_expert=1,
        n_ff_shared_expert=256, n_dense_lead=1,
        recurrent_layers=tuple(i for i in range(n_layer) if i not in attention),
        ssm_d_conv=4, kda_head_dim=64, context_length=32768,
    )  # fmt: skip
    base.update(kw)
    # config.json's head_dim, the converter's value_length: n_embd / n_head for Kimi
    base.setdefault("kda_value_length", int(base["n_embd"]) // int(base["n_head"]))  # type: ignore[call-overload]
    return Geometry(**base)  # type: ignore[arg-type]


# fmt: off
MODELS: tuple[KimiSynth, ...] = (
    # Kimi-Linear-48B-A3B ratios: three KDA layers per MLA layer, the last layer MLA too
    # (full_attn_layers 4, 8, ..., 24, 27 of 27), one dense lead layer, then 256 experts
    # (here 8, 2 used) with a shared expert; KDA heads of 128 (here 64), conv kernel 4.
    KimiSynth("kimi-linear-moe", _g(7, (3, 6))),
    # The same mixers with KDA heads as wide as MLA's K, a conv kernel of 3 and two dense
    # lead layers: the state and the MoE split move with them.
    KimiSynth(
        "kimi-linear-wide",
        _g(8, (3, 7), n_embd=384, n_head=6, n_head_kv=6,
           n_head_kv_per_layer=tuple(6 if i in (3, 7) else 0 for i in range(8)),
           kda_head_dim=96, ssm_d_conv=3, n_dense_lead=2, n_ff=1024),
    ),
    # Kimi-Linear-48B-A3B's own widths (config.json: hidden 2304, 32 heads, KDA heads of
    # 128, kv_lora_rank 512, rope 64, nope 128, v 128, dense FFN 9216, experts of 1024)
    # in four layers (three KDA, one MLA) with 8 experts and a 32768-token vocabulary.
    KimiSynth(
        "kimi-linear-48b-widths",
        _g(4, (3,), n_embd=2304, n_head=32, n_head_kv=32, n_head_kv_per_layer=(0, 0, 0, 32),
           head_dim_k=192, head_dim_v=128, kv_lora_rank=512, rope_head_dim=64,
           n_vocab=32768, n_ff=9216, n_ff_expert=1024, n_ff_shared_expert=1024,
           kda_head_dim=128),
        f16=True, quants=("F16",),
    ),
)
# fmt: on


def tensors(m: KimiSynth) -> list[tuple[str, Shape]]:
    g = m.geometry
    first, *last = global_tensors(g)
    out: list[tuple[str, Shape]] = [(first[0], first[1])]
    for il in range(g.n_layer):
        out += block_tensors(g, il)
    return out + [(n, s) for n, s, *_ in last]


def _metadata(w: GGUFWriter, m: KimiSynth) -> None:
    g = m.geometry
    a = "kimi-linear."
    rank, rope = g.kv_lora_rank or 0, g.rope_head_dim or 0
    w.add_name("synthetic")
    w.add_context_length(g.context_length)
    w.add_embedding_length(g.n_embd)
    w.add_feed_forward_length(g.n_ff)
    w.add_block_count(g.n_layer)
    w.add_head_count(g.n_head)
    # MQA over the latent: one KV head on MLA layers, none on KDA layers
    w.add_array(a + "attention.head_count_kv", [1 if k else 0 for k in g.n_head_kv_per_layer or ()])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(1 if m.f16 else 0)  # MOSTLY_F16 / ALL_F32
    w.add_vocab_size(g.n_vocab)
    w.add_expert_count(g.n_expert)
    w.add_expert_used_count(g.n_expert_used)
    w.add_uint32(a + "expert_gating_func", 2)  # sigmoid (moe_router_activation_func)
    w.add_uint32(a + "ssm.conv_kernel", g.ssm_d_conv)
    w.add_uint32(a + "kda.head_dim", g.kda_head_dim)
    w.add_uint32(a + "attention.kv_lora_rank", rank)
    w.add_rope_dimension_count(rope)
    w.add_key_length(rank + rope)
    w.add_value_length(g.kda_value_length)  # config.json's head_dim
    w.add_uint32(a + "attention.key_length_mla", g.head_dim_k)
    w.add_uint32(a + "attention.value_length_mla", g.head_dim_v)
    w.add_expert_feed_forward_length(g.n_ff_expert)
    w.add_uint32(a + "expert_shared_count", g.n_shared_expert)
    w.add_uint32(a + "leading_dense_block_count", g.n_dense_lead)
    w.add_float32(a + "expert_weights_scale", 2.446)
    add_sentencepiece_vocab(w, g.n_vocab)


def write_gguf(m: KimiSynth, path: Path, seed: int = 0, drop: tuple[str, ...] = ()) -> None:
    """`drop`: metadata keys to leave out (a file b11434's loader refuses)."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), m.geometry.architecture)
    _metadata(w, m)
    for key in drop:
        for kv in w.kv_data:
            kv.pop(key, None)
    for name, shape in tensors(m):
        np_shape = tuple(reversed(shape))
        if name.endswith("norm.weight"):
            data = np.ones(np_shape, dtype=np.float32)
        else:
            data = (rng.standard_normal(np_shape, dtype=np.float32) * 0.02).astype(np.float32)
            # as the converter's F16 (conversion/base.py): 1-D tensors, A, the router and
            # the conv weights stay F32
            f32 = ("ssm_a", "ffn_gate_inp", "conv1d")
            if m.f16 and len(shape) >= 2 and not any(k in name for k in f32):
                data = data.astype(np.float16)
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
