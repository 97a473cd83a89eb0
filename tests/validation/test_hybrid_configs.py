"""config.json of hybrid models read as llama.cpp's converter maps them, checked against
published figures: Qwen3-Coder-Next's total parameter count and Nemotron 3 Nano's layer
kinds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rigspark_gui.catalog.hf_import import import_hf_config
from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.memory import param_count

# Qwen/Qwen3-Coder-Next config.json as CMander02/ModelSheet
# tests/test_catalog_parameters.py @26a3cf21 reproduces it, with its published total of
# 79,674,391,296 parameters; 262,144 native context from the model card
CODER_NEXT: dict[str, Any] = {
    "model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48,
    "vocab_size": 151936, "head_dim": 256, "num_attention_heads": 16,
    "num_key_value_heads": 2, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
    "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
    "tie_word_embeddings": False, "max_position_embeddings": 262144,
}  # fmt: skip
# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 (THUDM/slime
# scripts/models/nemotron-nano-30B-A3B.sh @46772aec and its config.json's other fields)
NANO: dict[str, Any] = {
    "model_type": "nemotron_h", "vocab_size": 131072, "hidden_size": 2688,
    "num_hidden_layers": 52, "max_position_embeddings": 262144,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128,
    "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "conv_kernel": 4,
    "n_groups": 8, "n_routed_experts": 128, "n_shared_experts": 1,
    "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712, "intermediate_size": 1856,
}  # fmt: skip


def _write(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return tmp_path


def test_qwen3_coder_next_config_holds_its_published_parameters(tmp_path: Path) -> None:
    spec = import_hf_config(_write(tmp_path, CODER_NEXT))
    g = spec.geometry
    assert g.architecture == "qwen3next" and len(g.recurrent_layers) == 36
    assert (g.ssm_d_inner, g.ssm_d_state, g.ssm_dt_rank, g.ssm_n_group) == (4096, 128, 32, 16)
    assert param_count(spec).total == 79_674_391_296


def test_a_qwen35_text_config_inside_its_vision_config(tmp_path: Path) -> None:
    text = {k: v for k, v in CODER_NEXT.items() if k not in ("model_type",)}
    text |= {"layer_types": ["linear_attention"] * 3 + ["full_attention"]}
    text |= {"num_hidden_layers": 4, "intermediate_size": 1024, "mtp_num_hidden_layers": 1}
    cfg = {"model_type": "qwen3_5_moe", "text_config": text}
    g = import_hf_config(_write(tmp_path, cfg)).geometry
    assert g.architecture == "qwen35moe" and g.recurrent_layers == (0, 1, 2)
    # the MTP block: a fifth slot, without KV heads (the converter writes it by default)
    assert (g.n_layer, g.n_layer_nextn, g.n_head_kv_per_layer) == (5, 1, (2, 2, 2, 2, 0))


def test_nemotron_3_nano_layers_are_mamba_attention_or_moe(tmp_path: Path) -> None:
    g = import_hf_config(_write(tmp_path, NANO)).geometry
    assert g.architecture == "nemotron_h_moe" and g.n_layer == 52
    assert len(g.recurrent_layers) == 23
    assert g.n_head_kv_per_layer is not None and sum(k > 0 for k in g.n_head_kv_per_layer) == 6
    assert g.n_ff_per_layer is not None and sum(f > 0 for f in g.n_ff_per_layer) == 23
    assert (g.ssm_d_inner, g.ssm_dt_rank, g.ssm_n_group) == (4096, 64, 8)


def test_a_bad_pattern_names_the_field(tmp_path: Path) -> None:
    with pytest.raises(ModelImportError, match="hybrid_override_pattern"):
        import_hf_config(_write(tmp_path, NANO | {"hybrid_override_pattern": "MXM"}))
