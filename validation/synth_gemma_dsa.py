"""Synthetic GGUFs of Gemma 4, Gemma 3n and DeepSeek sparse-attention models, written
from RigSpark's own synthesized tensor list (core/memory: names, ggml shapes, F16 for
every matrix llama-quantize would quantize, F32 or 16-bit for the rest) with the
metadata each llama.cpp b11434 loader reads. llama.cpp refuses a file with a missing
required tensor, a wrong shape or a tensor it did not create, so a load proves the list.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from rigspark_gui.calibrate.synth import add_sentencepiece_vocab
from rigspark_gui.core.memory import synthesize_tensors
from rigspark_gui.core.memory.arch_dsa import dsa_block_tensors
from rigspark_gui.core.model.model_spec import Geometry

_SIGMOID = 2  # LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID


def _g(**kw: object) -> Geometry:
    return Geometry(**kw)  # type: ignore[arg-type]


# Small versions of the real shapes (comments: what each mirrors).
MODELS: dict[str, Geometry] = {
    # Gemma 4 E2B: 4 sliding + 1 full, head dims 64/128 (256/512 in E2B), the last half of
    # the layers reuse the cache of layers 3 (sliding) and 4 (full), double-wide MLP on
    # them, per-layer embeddings.
    "gemma4-e2b-like": _g(
        architecture="gemma4",
        n_layer=10,
        n_embd=256,
        n_head=4,
        n_head_kv=1,
        head_dim_k=128,
        head_dim_v=128,
        head_dim_k_swa=64,
        head_dim_v_swa=64,
        n_vocab=4096,
        n_ff=1024,
        n_ff_per_layer=(512,) * 5 + (1024,) * 5,
        tied_embeddings=True,
        sliding_window=128,
        swa_pattern=5,
        n_layer_kv_from_start=5,
        n_embd_per_layer=32,
        context_length=32768,
    ),
    # The same with E2B's per-layer width (256) and a wider embedding: the per-layer
    # inputs' share of the compute buffer.
    "gemma4-ple-like": _g(
        architecture="gemma4",
        n_layer=10,
        n_embd=512,
        n_head=4,
        n_head_kv=1,
        head_dim_k=128,
        head_dim_v=128,
        head_dim_k_swa=64,
        head_dim_v_swa=64,
        n_vocab=4096,
        n_ff=1024,
        n_ff_per_layer=(512,) * 5 + (1024,) * 5,
        tied_embeddings=True,
        sliding_window=128,
        swa_pattern=5,
        n_layer_kv_from_start=5,
        n_embd_per_layer=256,
        context_length=32768,
    ),
    # Gemma 4 31B / 26B-A4B: 5 sliding + 1 full, 2 KV heads of 64 on sliding layers and 1 of
    # 128 on full ones that use K as V; 26B's dense FFN beside 8 experts (128 in the real one).
    "gemma4-moe-like": _g(
        architecture="gemma4",
        n_layer=6,
        n_embd=256,
        n_head=4,
        n_head_kv=2,
        n_head_kv_per_layer=(2, 2, 2, 2, 2, 1),
        head_dim_k=128,
        head_dim_v=128,
        head_dim_k_swa=64,
        head_dim_v_swa=64,
        n_vocab=4096,
        n_ff=256,
        tied_embeddings=True,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=128,
        sliding_window=128,
        swa_pattern=6,
        attention_k_eq_v=True,
        context_length=32768,
    ),
    # Gemma 3n: 4 sliding + 1 full, 20 layers own a cache (hard-coded), AltUp and LAuReL.
    "gemma3n-like": _g(
        architecture="gemma3n",
        n_layer=25,
        n_embd=256,
        n_head=4,
        n_head_kv=1,
        head_dim_k=64,
        head_dim_v=64,
        n_vocab=4096,
        n_ff=512,
        tied_embeddings=True,
        sliding_window=128,
        swa_pattern=5,
        n_layer_kv_from_start=20,
        n_embd_per_layer=256,
        n_altup=4,
        laurel_rank=64,
        context_length=32768,
    ),
    # DeepSeek V3.2: MLA (latent 256 + rope 32; 512 + 64 in V3.2), an indexer of 4 heads
    # of 64 (64 of 128), one dense lead layer, 8 routed experts and a shared one.
    "deepseek32-like": _g(
        architecture="deepseek32",
        n_layer=4,
        n_embd=512,
        n_head=8,
        n_head_kv=8,
        head_dim_k=96,
        head_dim_v=64,
        n_vocab=4096,
        n_ff=1536,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=256,
        n_shared_expert=1,
        n_ff_shared_expert=256,
        n_dense_lead=1,
        kv_lora_rank=256,
        q_lora_rank=256,
        rope_head_dim=32,
        indexer_n_head=4,
        indexer_head_size=64,
        context_length=32768,
    ),
    # GLM-5 / 5.1: the same machinery under glm-dsa (every layer has an indexer below 1M).
    # DeepSeek V3.2 with its MTP block (num_nextn_predict_layers 1): a layer slot without
    # KV, its tensors skipped at load but for the router bias.
    "deepseek32-mtp-like": _g(
        architecture="deepseek32",
        n_layer=5,
        n_layer_nextn=1,
        n_embd=512,
        n_head=8,
        n_head_kv=8,
        n_head_kv_per_layer=(8, 8, 8, 8, 0),
        head_dim_k=96,
        head_dim_v=64,
        n_vocab=4096,
        n_ff=1536,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=256,
        n_shared_expert=1,
        n_ff_shared_expert=256,
        n_dense_lead=1,
        kv_lora_rank=256,
        q_lora_rank=256,
        rope_head_dim=32,
        indexer_n_head=4,
        indexer_head_size=64,
        context_length=32768,
    ),
    "glm-dsa-like": _g(
        architecture="glm-dsa",
        n_layer=4,
        n_embd=512,
        n_head=8,
        n_head_kv=8,
        head_dim_k=96,
        head_dim_v=64,
        n_vocab=4096,
        n_ff=1536,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=256,
        n_shared_expert=1,
        n_ff_shared_expert=256,
        n_dense_lead=1,
        kv_lora_rank=256,
        q_lora_rank=256,
        rope_head_dim=32,
        indexer_n_head=4,
        indexer_head_size=64,
        context_length=32768,
    ),
}


# GLM-5 with its MTP block (num_nextn_predict_layers 1), for validation/mtp_b11434.py; kept
# apart from MODELS (arch_b11434.py measures those)
MTP_MODELS: dict[str, Geometry] = {
    "glm-dsa-mtp-like": dataclasses.replace(
        MODELS["glm-dsa-like"], n_layer=5, n_layer_nextn=1, n_head_kv_per_layer=(8, 8, 8, 8, 0)
    ),
}


def _metadata(w: GGUFWriter, g: Geometry) -> None:
    a = g.architecture
    w.add_name("synthetic")
    w.add_context_length(g.context_length)
    w.add_embedding_length(g.n_embd)
    w.add_block_count(g.n_layer)
    w.add_head_count(g.n_head)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(1)  # MOSTLY_F16
    if a in ("gemma4", "gemma3n"):
        w.add_feed_forward_length(list(g.n_ff_per_layer) if g.n_ff_per_layer else g.n_ff)
        heads = g.n_head_kv_per_layer
        w.add_head_count_kv(list(heads) if heads else g.n_head_kv)
        w.add_key_length(g.head_dim_k)
        w.add_value_length(g.head_dim_v)
        w.add_sliding_window(g.sliding_window or 0)
        w.add_final_logit_softcapping(30.0)
        w.add_rope_freq_base_swa(10000.0)
    if a == "gemma4":
        w.add_key_length_swa(g.head_dim_k_swa or g.head_dim_k)
        w.add_value_length_swa(g.head_dim_v_swa or g.head_dim_v)
        w.add_sliding_window_pattern([g.is_sliding(il) for il in range(g.n_layer)])
        shared = g.n_layer - g.n_layer_kv_from_start if g.n_layer_kv_from_start else 0
        w.add_shared_kv_layers(shared)
        w.add_embedding_length_per_layer_input(g.n_embd_per_layer)
        w.add_rope_dimension_count(g.head_dim_k)
        w.add_rope_dimension_count_swa(g.head_dim_k_swa or g.head_dim_k)
        if g.n_expert:
            w.add_expert_count(g.n_expert)
            w.add_expert_used_count(g.n_expert_used)
            w.add_expert_feed_forward_length(g.n_ff_expert)
    if a in ("deepseek32", "glm-dsa"):
        w.add_feed_forward_length(g.n_ff)
        w.add_head_count_kv(1)
        w.add_expert_count(g.n_expert)
        w.add_expert_used_count(g.n_expert_used)
        w.add_expert_feed_forward_length(g.n_ff_expert)
        w.add_leading_dense_block_count(g.n_dense_lead)
        w.add_expert_shared_count(g.n_shared_expert)
        w.add_expert_weights_scale(1.0)
        w.add_expert_weights_norm(True)
        w.add_uint32(f"{a}.expert_gating_func", _SIGMOID)
        w.add_q_lora_rank(g.q_lora_rank or 0)
        w.add_kv_lora_rank(g.kv_lora_rank or 0)
        rope = g.rope_head_dim or 0
        w.add_rope_dimension_count(rope)
        # the converter's MLA layout: one latent "head" of kv_lora_rank + rope
        w.add_key_length((g.kv_lora_rank or 0) + rope)
        w.add_value_length(g.kv_lora_rank or 0)
        w.add_key_length_mla(g.head_dim_k)
        w.add_value_length_mla(g.head_dim_v)
        w.add_indexer_head_count(g.indexer_n_head)
        w.add_indexer_key_length(g.indexer_head_size)
        w.add_indexer_top_k(64)
        if g.n_layer_nextn:
            w.add_nextn_predict_layers(g.n_layer_nextn)
    add_sentencepiece_vocab(w, g.n_vocab)


_NP = {"F16": np.float16, "F32": np.float32}


def _mtp_tensors(g: Geometry) -> list[tuple[str, tuple[int, ...], str]]:
    """What a converter writes for the MTP blocks and llama.cpp skips without drafting:
    each a full trunk-style block (its router bias aside, which RigSpark lists) and the
    NextN projections and norms."""
    trunk = dataclasses.replace(g, n_layer_nextn=0, n_head_kv_per_layer=None)
    out: list[tuple[str, tuple[int, ...], str]] = []
    e = g.n_embd
    for il in range(g.n_layer - g.n_layer_nextn, g.n_layer):
        for name, shape in dsa_block_tensors(trunk, il):
            if name.endswith("exp_probs_b.bias"):
                continue
            # the trunk's type of the same tensor: a converter types a block's tensors
            # alike whatever the block (RigSpark's list keeps indexer.proj at F16)
            kept = name.endswith(("norm.weight", ".bias"))
            out.append((name, shape, "F32" if kept or "gate_inp" in name else "F16"))
        p = f"blk.{il}.nextn."
        out += [
            (p + "eh_proj.weight", (2 * e, e), "F16"),
            (p + "enorm.weight", (e,), "F32"),
            (p + "hnorm.weight", (e,), "F32"),
            (p + "shared_head_norm.weight", (e,), "F32"),
        ]
    return out


def write_gguf(g: Geometry, path: Path, seed: int = 0, mtp_last: bool = False) -> int:
    """The model at F16, tensors in RigSpark's synthesized order; MTP blocks (skipped by
    llama.cpp) written in full before the output norm, as a converter orders blocks, or
    with `mtp_last` at the end of the file (the mapped range then grows by exactly their
    bytes when they are loaded). Returns the bytes of the tensors llama.cpp skips."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), g.architecture)
    _metadata(w, g)
    rows = [(t.name, t.shape, t.type) for t in synthesize_tensors(g, "F16")]
    skipped = _mtp_tensors(g) if g.n_layer_nextn else []
    at = next(i for i, r in enumerate(rows) if r[0] == "output_norm.weight")
    order = rows + skipped if mtp_last else rows[:at] + skipped + rows[at:]
    for name, shape, typ in order:
        np_shape = tuple(reversed(shape))
        if name.endswith(("norm.weight", ".scale", "layer_output_scale.weight")):
            data = np.ones(np_shape, dtype=np.float32)
        else:
            data = rng.standard_normal(np_shape, dtype=np.float32) * 0.02
        w.add_tensor(name, data.astype(_NP[typ]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sum(math.prod(sh) * (2 if t == "F16" else 4) for _, sh, t in skipped)
