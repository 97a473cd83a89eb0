"""Synthetic GGUFs of Seed-OSS, Apertus, ERNIE 4.5 MoE, MiniMax M2 and Mistral Small 4,
written from RigSpark's own synthesized tensor list (core/memory/arch_more.py: names, ggml
shapes, F16 for every matrix llama-quantize would quantize, F32 for the rest) with the
metadata each llama.cpp b11434 loader reads. llama.cpp refuses a file with a missing
required tensor, a wrong shape or a tensor it did not create, so a load proves the list.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from rigspark_gui.calibrate.synth import add_sentencepiece_vocab
from rigspark_gui.core.memory import synthesize_tensors
from rigspark_gui.core.model.model_spec import Geometry

_SIGMOID = 2  # LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID (MiniMax M2's scoring_func)


def _g(**kw: object) -> Geometry:
    return Geometry(**kw)  # type: ignore[arg-type]


# Small versions of the real shapes (comments: what each mirrors).
MODELS: dict[str, Geometry] = {
    # Seed-OSS-36B: 80 heads of 128 over 8 KV heads, Q/K/V biases, untied head.
    "seed-oss-like": _g(
        architecture="seed_oss",
        n_layer=4,
        n_embd=512,
        n_head=8,
        n_head_kv=2,
        head_dim_k=128,
        head_dim_v=128,
        n_vocab=4096,
        n_ff=1536,
        context_length=32768,
    ),
    # Apertus 8B: Q/K norms, ungated FFN, untied head.
    "apertus-like": _g(
        architecture="apertus",
        n_layer=4,
        n_embd=512,
        n_head=8,
        n_head_kv=2,
        head_dim_k=64,
        head_dim_v=64,
        n_vocab=4096,
        n_ff=2048,
        context_length=32768,
    ),
    # ERNIE 4.5 21B-A3B: a dense first layer, 64 experts top-6 (8 top-2 here) and shared
    # experts twice the expert width, tied embeddings.
    "ernie45-moe-like": _g(
        architecture="ernie4_5-moe",
        n_layer=4,
        n_embd=512,
        n_head=8,
        n_head_kv=2,
        head_dim_k=64,
        head_dim_v=64,
        n_vocab=4096,
        n_ff=1536,
        tied_embeddings=True,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=256,
        n_shared_expert=2,
        n_ff_shared_expert=512,
        n_dense_lead=1,
        context_length=32768,
    ),
    # MiniMax M2: 48 heads of 128 over 8 KV heads (8 over 2 here), rotary on half the head,
    # full-width Q/K norms, 256 experts top-8 (8 top-2 here), sigmoid router with bias.
    "minimax-m2-like": _g(
        architecture="minimax-m2",
        n_layer=4,
        n_embd=512,
        n_head=8,
        n_head_kv=2,
        head_dim_k=128,
        head_dim_v=128,
        n_vocab=4096,
        n_ff=0,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=256,
        context_length=32768,
    ),
    # Mistral Small 4: MLA (latent 256 + rope 64, q rank 1024; 128 + 32 and 256 here),
    # 128 experts top-4 (8 top-2 here) with gate/up fused and one shared expert, no dense
    # layer.
    "mistral4-like": _g(
        architecture="mistral4",
        n_layer=4,
        n_embd=512,
        n_head=8,
        n_head_kv=8,
        head_dim_k=96,
        head_dim_v=64,
        n_vocab=4096,
        n_ff=0,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=256,
        n_shared_expert=1,
        n_ff_shared_expert=256,
        kv_lora_rank=128,
        q_lora_rank=256,
        rope_head_dim=32,
        context_length=32768,
    ),
}


def _mla(w: GGUFWriter, g: Geometry) -> None:
    """The converter's MLA layout: one latent "head" of kv_lora_rank + rope."""
    rank, rope = g.kv_lora_rank or 0, g.rope_head_dim or 0
    w.add_head_count_kv(1)
    w.add_key_length(rank + rope)
    w.add_value_length(rank)
    w.add_key_length_mla(g.head_dim_k)
    w.add_value_length_mla(g.head_dim_v)
    w.add_q_lora_rank(g.q_lora_rank or 0)
    w.add_kv_lora_rank(rank)
    w.add_rope_dimension_count(rope)
    w.add_leading_dense_block_count(g.n_dense_lead)
    w.add_expert_shared_count(g.n_shared_expert)
    w.add_expert_weights_scale(1.0)
    w.add_expert_weights_norm(True)


def _metadata(w: GGUFWriter, g: Geometry) -> None:
    a = g.architecture
    w.add_name("synthetic")
    w.add_context_length(g.context_length)
    w.add_embedding_length(g.n_embd)
    w.add_block_count(g.n_layer)
    w.add_head_count(g.n_head)
    if a == "mistral4":
        _mla(w, g)
    else:
        w.add_head_count_kv(g.n_head_kv)
        w.add_key_length(g.head_dim_k)
        w.add_value_length(g.head_dim_v)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_feed_forward_length(g.n_ff or g.n_ff_expert)
    w.add_file_type(1)  # MOSTLY_F16
    if a == "apertus":
        n = g.n_layer
        w.add_xielu_alpha_n([0.8] * n)
        w.add_xielu_alpha_p([0.8] * n)
        w.add_xielu_beta([0.5] * n)
        w.add_xielu_eps([-1e-6] * n)
    if a == "minimax-m2":
        w.add_rope_dimension_count(g.head_dim_k // 2)  # rotary_dim 64 of head_dim 128
        w.add_uint32(f"{a}.expert_gating_func", _SIGMOID)
    if g.n_expert:
        w.add_expert_count(g.n_expert)
        w.add_expert_used_count(g.n_expert_used)
        w.add_expert_feed_forward_length(g.n_ff_expert)
    if a == "ernie4_5-moe":
        w.add_interleave_moe_layer_step(1)
        w.add_leading_dense_block_count(g.n_dense_lead)
        w.add_expert_shared_count(g.n_shared_expert)
        w.add_expert_shared_feed_forward_length(g.n_ff_shared_expert)
    add_sentencepiece_vocab(w, g.n_vocab)


_NP = {"F16": np.float16, "F32": np.float32}


def write_gguf(g: Geometry, path: Path, seed: int = 0) -> int:
    """The model at F16 in RigSpark's synthesized order. Returns 0: nothing is skipped."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), g.architecture)
    _metadata(w, g)
    for t in synthesize_tensors(g, "F16"):
        np_shape = tuple(reversed(t.shape))
        if t.name.endswith("norm.weight"):
            data = np.ones(np_shape, dtype=np.float32)
        else:
            data = rng.standard_normal(np_shape, dtype=np.float32) * 0.02
        w.add_tensor(t.name, data.astype(_NP[t.type]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0
