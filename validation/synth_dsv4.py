"""Synthetic DeepSeek V4 (`deepseek4`) GGUFs, written from RigSpark's own synthesized
tensor list (core/memory/arch_dsv4.py: names, ggml shapes, F16 for every matrix
llama-quantize would quantize, F32 for norms, biases, sinks and hyper-connection scales,
I32 for the hash-routing table) with the metadata llama.cpp b11434's loader reads
(src/models/deepseek4.cpp: load_arch_hparams; key names from src/llama-arch.cpp, values
laid out as conversion/deepseek.py writes them). llama.cpp refuses a file with a missing
required tensor, a wrong shape or a tensor it did not create, so a load proves the list.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from rigspark_gui.calibrate.synth import add_sentencepiece_vocab
from rigspark_gui.core.memory import synthesize_tensors
from rigspark_gui.core.model.model_spec import Geometry

_SQRT_SOFTPLUS = 4  # LLAMA_EXPERT_GATING_FUNC_TYPE_SQRT_SOFTPLUS, the only one it accepts


def _g(**kw: object) -> Geometry:
    return Geometry(**kw)  # type: ignore[arg-type]


# Small versions of DeepSeek V4 Flash's shapes (its values in the comments).
MODELS: dict[str, Geometry] = {
    # two window-only layers, then CSA / HCA alternating as in V4 Flash, ending on CSA as
    # it does (so llama-quantize's last tensor, indexer_compressor_norm, ends aligned); the
    # first two layers hash-routed (3 in Flash); head_dim 128 (512), indexer 4 x 64 (64 x 128)
    "deepseek4-like": _g(
        architecture="deepseek4",
        n_layer=5,
        n_embd=256,
        n_head=8,
        n_head_kv=1,
        head_dim_k=128,
        head_dim_v=128,
        n_vocab=4096,
        n_ff=0,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=128,
        n_shared_expert=1,
        n_ff_shared_expert=128,
        sliding_window=128,
        swa_pattern=6,
        q_lora_rank=128,
        rope_head_dim=64,
        indexer_n_head=4,
        indexer_head_size=64,
        indexer_layers=(2, 4),
        compress_ratios=(0, 0, 4, 128, 4),
        hc_mult=4,
        o_groups=2,
        o_lora_rank=64,
        n_hash_layers=2,
        context_length=65536,
    ),
    # V4 Flash's attention widths (head_dim 512, rope 64, indexer of 128, window 128,
    # 8 output groups) on a narrow residual; HCA on layers 1 and 3, CSA last, three hash
    # layers
    "deepseek4-wide": _g(
        architecture="deepseek4",
        n_layer=5,
        n_embd=256,
        n_head=8,
        n_head_kv=1,
        head_dim_k=512,
        head_dim_v=512,
        n_vocab=4096,
        n_ff=0,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=128,
        n_shared_expert=1,
        n_ff_shared_expert=128,
        sliding_window=128,
        swa_pattern=6,
        q_lora_rank=128,
        rope_head_dim=64,
        indexer_n_head=4,
        indexer_head_size=128,
        indexer_layers=(4,),
        compress_ratios=(0, 128, 0, 128, 4),
        hc_mult=4,
        o_groups=8,
        o_lora_rank=64,
        n_hash_layers=3,
        context_length=65536,
    ),
}


def _metadata(w: GGUFWriter, g: Geometry) -> None:
    a = g.architecture + "."
    ratios = list(g.compress_ratios or ())
    w.add_name("synthetic")
    w.add_context_length(g.context_length)
    w.add_embedding_length(g.n_embd)
    w.add_block_count(g.n_layer)
    w.add_head_count(g.n_head)
    w.add_head_count_kv(g.n_head_kv)
    w.add_key_length(g.head_dim_k)
    w.add_value_length(g.head_dim_v)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(g.rope_head_dim or 0)
    w.add_file_type(1)  # MOSTLY_F16
    w.add_expert_count(g.n_expert)
    w.add_expert_used_count(g.n_expert_used)
    w.add_uint32(a + "attention.q_lora_rank", g.q_lora_rank or 0)
    w.add_uint32(a + "attention.sliding_window", g.sliding_window or 0)
    w.add_uint32(a + "expert_feed_forward_length", g.n_ff_expert)
    w.add_uint32(a + "expert_shared_count", g.n_shared_expert)
    w.add_float32(a + "expert_weights_scale", 1.5)
    w.add_bool(a + "expert_weights_norm", True)
    w.add_array(a + "swiglu_clamp_exp", [10.0] * g.n_layer)
    w.add_array(a + "swiglu_clamp_shexp", [10.0] * g.n_layer)
    w.add_uint32(a + "attention.indexer.head_count", g.indexer_n_head)
    w.add_uint32(a + "attention.indexer.key_length", g.indexer_head_size)
    w.add_uint32(a + "attention.indexer.top_k", 64)
    w.add_uint32(a + "attention.output_group_count", g.o_groups)
    w.add_uint32(a + "attention.output_lora_rank", g.o_lora_rank)
    # the converter writes the config's list, which runs one past the trunk (the MTP layer)
    w.add_array(a + "attention.compress_ratios", [*ratios, 0])
    w.add_float32(a + "attention.compress_rope_freq_base", 160000.0)
    w.add_uint32(a + "hyper_connection.count", g.hc_mult)
    w.add_uint32(a + "hyper_connection.sinkhorn_iterations", 20)
    w.add_float32(a + "hyper_connection.epsilon", 1e-6)
    w.add_uint32(a + "hash_layer_count", g.n_hash_layers)
    w.add_uint32(a + "expert_gating_func", _SQRT_SOFTPLUS)
    w.add_uint32(a + "embedding_length_out", g.n_embd * g.hc_mult)
    add_sentencepiece_vocab(w, g.n_vocab)


def write_gguf(g: Geometry, path: Path, seed: int = 0) -> None:
    """The model at F16, tensors in RigSpark's synthesized order."""
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), g.architecture)
    _metadata(w, g)
    for t in synthesize_tensors(g, "F16"):
        np_shape = tuple(reversed(t.shape))
        if t.type == "I32":  # token -> expert ids
            w.add_tensor(t.name, rng.integers(0, g.n_expert, np_shape, dtype=np.int32))
            continue
        if t.name.endswith(("norm.weight", "_scale.weight")):
            data = np.ones(np_shape, dtype=np.float32)
        else:
            data = rng.standard_normal(np_shape, dtype=np.float32) * 0.02
        w.add_tensor(t.name, data.astype(np.float16 if t.type == "F16" else np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
