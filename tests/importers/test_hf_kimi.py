"""Kimi Linear config.json import (model_type `kimi_linear` -> llama.cpp `kimi-linear`),
checked against the GGUF importer on a file laid out as b11434's converter writes it."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.catalog.hf_import import import_hf_config
from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.memory import (
    file_bytes_estimate,
    kv_bytes_per_token,
    state_total_bytes,
    weights_layout,
)
from rigspark_gui.core.model import Geometry, KvCacheType
from rigspark_gui.core.settings import PlanSettings
from validation.synth_kimi import MODELS, KimiSynth, write_gguf

# Kimi-Linear-48B-A3B-Instruct's architecture fields as a derivative checkpoint republishes
# its config.json (Firworks/Kimi-Linear-48B-A3B-Instruct-nvfp4, config.json on the
# Hugging Face hub; quantization_config and token ids left out).
KIMI_LINEAR_48B: dict[str, Any] = {
    "architectures": ["KimiLinearForCausalLM"],
    "model_type": "kimi_linear",
    "first_k_dense_replace": 1,
    "head_dim": 72,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "kv_lora_rank": 512,
    "linear_attn_config": {
        "full_attn_layers": [4, 8, 12, 16, 20, 24, 27],
        "head_dim": 128,
        "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
        "num_heads": 32,
        "short_conv_kernel_size": 4,
    },
    "model_max_length": 1048576,
    "moe_intermediate_size": 1024,
    "num_attention_heads": 32,
    "num_experts": 256,
    "num_experts_per_token": 8,
    "num_hidden_layers": 27,
    "num_key_value_heads": 32,
    "num_shared_experts": 1,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "tie_word_embeddings": False,
    "v_head_dim": 128,
    "vocab_size": 163840,
}


def _config(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def _as_config(g: Geometry) -> dict[str, Any]:
    """The config.json the synthetic GGUF would have been converted from."""
    attn = [i + 1 for i in range(g.n_layer) if i not in g.recurrent_layers]
    rope = g.rope_head_dim or 0
    return {
        "model_type": "kimi_linear",
        "hidden_size": g.n_embd,
        "intermediate_size": g.n_ff,
        "num_hidden_layers": g.n_layer,
        "num_attention_heads": g.n_head,
        "num_key_value_heads": g.n_head,
        "head_dim": g.kda_value_length,
        "kv_lora_rank": g.kv_lora_rank,
        "q_lora_rank": None,
        "qk_nope_head_dim": g.head_dim_k - rope,
        "qk_rope_head_dim": rope,
        "v_head_dim": g.head_dim_v,
        "linear_attn_config": {
            "full_attn_layers": attn,
            "head_dim": g.kda_head_dim,
            "num_heads": g.n_head,
            "short_conv_kernel_size": g.ssm_d_conv,
        },
        "num_experts": g.n_expert,
        "num_experts_per_token": g.n_expert_used,
        "moe_intermediate_size": g.n_ff_expert,
        "num_shared_experts": g.n_shared_expert,
        "first_k_dense_replace": g.n_dense_lead,
        "vocab_size": g.n_vocab,
        "max_position_embeddings": g.context_length,
        "tie_word_embeddings": g.tied_embeddings,
    }


@pytest.mark.parametrize("name", [m.name for m in MODELS if not m.f16])  # small files only
def test_config_and_converted_gguf_give_one_geometry(tmp_path: Path, name: str) -> None:
    """The synthetic GGUFs load in b11434 (validation/kimi_b11434.json): their config.json
    counterpart imports to the same geometry, KDA state included."""
    g = next(m for m in MODELS if m.name == name).geometry
    write_gguf(next(m for m in MODELS if m.name == name), tmp_path / "k.gguf")
    from_gguf = import_gguf(tmp_path / "k.gguf").geometry
    from_config = import_hf_config(_config(tmp_path, _as_config(g))).geometry
    assert from_config == from_gguf == g
    assert from_config.recurrent_r_values and from_config.recurrent_s_values


def test_kimi_linear_48b_config(tmp_path: Path) -> None:
    g = import_hf_config(_config(tmp_path, KIMI_LINEAR_48B)).geometry
    assert g.architecture == "kimi-linear" and g.n_layer == 27
    assert g.recurrent_layers == tuple(i - 1 for i in KIMI_LINEAR_48B["linear_attn_config"]
                                       ["kda_layers"])  # fmt: skip
    assert (g.head_dim_k, g.head_dim_v, g.kv_lora_rank, g.rope_head_dim) == (192, 128, 512, 64)
    assert (g.n_expert, g.n_expert_used, g.n_ff_expert, g.n_ff_shared_expert) == (
        256,
        8,
        1024,
        1024,
    )
    assert (g.n_dense_lead, g.n_ff, g.context_length) == (1, 9216, 1048576)
    # llama-hparams.cpp: n_embd_r = 3 * 3 * 32 * 128, n_embd_s = 128 * 128 * 32 (f32)
    assert (g.recurrent_r_values, g.recurrent_s_values) == (36864, 524288)
    one_seq = state_total_bytes(g, PlanSettings(context=4096))
    assert one_seq == 20 * (36864 + 524288) * 4  # whatever the context
    assert state_total_bytes(g, PlanSettings(context=65536, parallel=2)) == 2 * one_seq
    # 7 MLA layers, one latent K of 512 + 64 f16 values each per token
    f16 = KvCacheType("f16")
    assert kv_bytes_per_token(g, f16, f16) == 7 * 576 * 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"linear_attn_config": None}, "linear_attn_config"),
        ({"q_lora_rank": 1536}, "q_lora_rank"),
        ({"linear_attn_config": {**KIMI_LINEAR_48B["linear_attn_config"], "num_heads": 16}},
         "KDA heads"),
        ({"linear_attn_config": {**KIMI_LINEAR_48B["linear_attn_config"],
                                 "full_attn_layers": "4,8"}}, "full_attn_layers"),
        ({"model_max_length": None}, "max_position_embeddings"),
    ],
)  # fmt: skip
def test_configs_llama_cpp_cannot_load_are_refused(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    config = {**KIMI_LINEAR_48B, **change}
    with pytest.raises(ModelImportError, match=message):
        import_hf_config(_config(tmp_path, config))


@pytest.mark.parametrize(
    "key", ["kimi-linear.kda.head_dim", "kimi-linear.attention.key_length_mla"]
)
def test_a_gguf_without_a_key_the_loader_requires_is_refused(tmp_path: Path, key: str) -> None:
    """b11434's load_arch_hparams reads both with a required get_key."""
    small = replace(MODELS[0].geometry, n_vocab=300, n_embd=64, n_ff=128, n_ff_expert=32,
                    n_ff_shared_expert=32)  # fmt: skip
    write_gguf(KimiSynth("small", small), tmp_path / "k.gguf")
    assert import_gguf(tmp_path / "k.gguf").geometry == small
    write_gguf(KimiSynth("small", small), tmp_path / "bad.gguf", drop=(key,))
    with pytest.raises(ModelImportError, match=key):
        import_gguf(tmp_path / "bad.gguf")


# ymcki/Kimi-Linear-48B-A3B-Instruct-GGUF README (Hugging Face hub), "File Size" column, GB
PUBLISHED_GGUF_GB = {"Q5_K_M": 34.87, "Q4_K_M": 29.70, "MXFP4_MOE": 27.21, "IQ4_XS": 26.27}


@pytest.mark.parametrize("quant", sorted(PUBLISHED_GGUF_GB))
def test_synthesized_files_match_published_gguf_sizes(tmp_path: Path, quant: str) -> None:
    """The tensors synthesized for the config at each quantization (llama-quantize's type
    rules) plus the estimated header come within 10 MB of the published files."""
    spec = import_hf_config(_config(tmp_path, KIMI_LINEAR_48B))
    spec = replace(spec, quants=(quant,))
    size = file_bytes_estimate(weights_layout(spec, quant), spec.geometry)
    assert abs(size / 1e9 - PUBLISHED_GGUF_GB[quant]) <= 0.01
