"""config.json types read through hf_more.py: each gives the geometry llama.cpp's
converter writes (architecture, experts, sliding layers, the unwrapped text tower)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rigspark_gui.catalog.hf_import import import_hf_config
from rigspark_gui.catalog.models import load_entry
from rigspark_gui.core.errors import ModelImportError

_DENSE = {
    "hidden_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1536,
    "vocab_size": 4096,
    "max_position_embeddings": 32768,
}


def _read(tmp_path: Path, config: dict[str, Any]):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return import_hf_config(path).geometry


@pytest.mark.parametrize(
    ("model_type", "arch"),
    [("seed_oss", "seed_oss"), ("apertus", "apertus"), ("ministral3", "mistral3")],
)
def test_dense_types_keep_their_fields(tmp_path: Path, model_type: str, arch: str) -> None:
    g = _read(tmp_path, {"model_type": model_type, **_DENSE})
    assert (g.architecture, g.n_layer, g.n_head_kv, g.head_dim_k, g.n_ff) == (arch, 4, 2, 64, 1536)


def test_ernie_moe_as_the_converter_writes_it(tmp_path: Path) -> None:
    """ERNIE 4.5 21B-A3B's MoE fields (its config.json): 2 shared experts, written as one
    of intermediate_size / num_key_value_heads = 12288 / 4."""
    g = _read(tmp_path, {"model_type": "ernie4_5_moe", **_DENSE, "intermediate_size": 12288,
                         "num_key_value_heads": 4, "moe_num_experts": 64, "moe_k": 6,
                         "moe_intermediate_size": 1536, "moe_num_shared_experts": 2,
                         "moe_layer_start_index": 1, "moe_layer_interval": 1,
                         "tie_word_embeddings": True})  # fmt: skip
    assert g.architecture == "ernie4_5-moe"
    assert (g.n_expert, g.n_expert_used, g.n_ff_expert) == (64, 6, 1536)
    assert (g.n_shared_expert, g.n_ff_shared_expert, g.n_dense_lead) == (2, 3072, 1)
    assert g.n_ff == 12288 and g.tied_embeddings


def test_minimax_experts_are_intermediate_size_wide(tmp_path: Path) -> None:
    g = _read(tmp_path, {"model_type": "minimax_m2", **_DENSE, "num_local_experts": 8,
                         "num_experts_per_tok": 2})  # fmt: skip
    assert g.architecture == "minimax-m2"
    assert (g.n_expert, g.n_ff_expert, g.n_ff) == (8, 1536, 0)


def test_wrapped_text_towers(tmp_path: Path) -> None:
    g = _read(tmp_path, {"model_type": "qwen3_vl", "tie_word_embeddings": True,
                         "text_config": {"model_type": "qwen3_vl_text", **_DENSE}})  # fmt: skip
    assert g.architecture == "qwen3vl" and g.tied_embeddings
    g = _read(tmp_path, {"model_type": "mistral3",
                         "text_config": {"model_type": "mistral", **_DENSE}})  # fmt: skip
    assert g.architecture == "mistral3" and g.n_layer == 4
    with pytest.raises(ModelImportError, match="text_config"):
        _read(tmp_path, {"model_type": "qwen3_vl_moe", **_DENSE})


def test_olmo3_sliding_layers(tmp_path: Path) -> None:
    types = ["sliding_attention"] * 3 + ["full_attention"]
    g = _read(tmp_path, {"model_type": "olmo3", **_DENSE, "sliding_window": 4096,
                         "layer_types": types})  # fmt: skip
    assert (g.architecture, g.sliding_window, g.swa_pattern) == ("olmo2", 4096, 4)


def test_glm4_moe_lite_is_mla(tmp_path: Path) -> None:
    """GLM-4.7-Flash's fields as its shipped entry records them."""
    g = _read(tmp_path, {"model_type": "glm4_moe_lite", "hidden_size": 2048,
                         "num_hidden_layers": 47, "num_attention_heads": 20,
                         "num_key_value_heads": 20, "intermediate_size": 10240,
                         "moe_intermediate_size": 1536, "vocab_size": 154880,
                         "max_position_embeddings": 202752, "n_routed_experts": 64,
                         "n_shared_experts": 1, "num_experts_per_tok": 4,
                         "first_k_dense_replace": 1, "q_lora_rank": 768, "kv_lora_rank": 512,
                         "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "v_head_dim": 256,
                         "num_nextn_predict_layers": 1})  # fmt: skip
    shipped = load_entry("glm-4.7-flash").geometry
    assert g == shipped


def test_mistral_small_4_is_mla_under_its_own_architecture(tmp_path: Path) -> None:
    text = {"model_type": "mistral4", "hidden_size": 4096, "num_hidden_layers": 4,
            "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 12288,
            "moe_intermediate_size": 2048, "vocab_size": 131072, "max_position_embeddings": 1048576,
            "n_routed_experts": 128, "n_shared_experts": 1, "num_experts_per_tok": 4,
            "kv_lora_rank": 256, "q_lora_rank": 1024, "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 64, "v_head_dim": 128}  # fmt: skip
    g = _read(tmp_path, {"model_type": "mistral3", "text_config": text})
    assert g.architecture == "mistral4" and g.is_mla
    assert (g.kv_lora_rank, g.q_lora_rank, g.rope_head_dim, g.head_dim_k) == (256, 1024, 64, 128)
    assert (g.n_expert, g.n_ff_expert, g.n_shared_expert, g.n_ff) == (128, 2048, 1, 0)


def test_deepseek_v32_keeps_its_indexer_and_nextn_block(tmp_path: Path) -> None:
    """DeepSeek V3.2's fields (DeepseekV32ForCausalLM): the NextN block is a 62nd layer
    without KV, as llama.cpp's converter writes it."""
    g = _read(tmp_path, {"model_type": "deepseek_v32", "hidden_size": 7168,
                         "num_hidden_layers": 61, "num_attention_heads": 128,
                         "num_key_value_heads": 128, "intermediate_size": 18432,
                         "moe_intermediate_size": 2048, "vocab_size": 129280,
                         "max_position_embeddings": 163840, "n_routed_experts": 256,
                         "n_shared_experts": 1, "num_experts_per_tok": 8,
                         "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536,
                         "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                         "index_n_heads": 64, "index_head_dim": 128,
                         "num_nextn_predict_layers": 1})  # fmt: skip
    assert g.architecture == "deepseek32"
    assert (g.n_layer, g.n_layer_nextn, g.kv_heads(61), g.kv_heads(60)) == (62, 1, 0, 128)
    assert (g.indexer_n_head, g.indexer_head_size) == (64, 128)
