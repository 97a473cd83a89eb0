"""The same model imported from its GGUF and from its config.json has one geometry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from importer_helpers import Dims, decoder_kv, decoder_tensors, deepseek2_kv, deepseek2_tensors
from importer_helpers import write_gguf as write

from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.catalog.hf_import import import_hf_config


def hf(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_deepseek2_mla(tmp_path: Path) -> None:
    tensors = deepseek2_tensors(2, 256, 4, q_lora=128, kv_lora=64, rope=32, nope=96, v=80)
    from_gguf = import_gguf(
        write(tmp_path / "ds.gguf", "deepseek2", deepseek2_kv(True), tensors).path
    )
    config = {
        "model_type": "deepseek_v3",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": 2,
        "max_position_embeddings": 163840,
        "moe_intermediate_size": 256,
        "n_routed_experts": 4,
        "n_shared_experts": 2,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "kv_lora_rank": 64,
        "q_lora_rank": 128,
        "qk_nope_head_dim": 96,
        "qk_rope_head_dim": 32,
        "v_head_dim": 80,
        "vocab_size": 64,
        "tie_word_embeddings": False,
    }
    assert import_hf_config(hf(tmp_path, config)).geometry == from_gguf.geometry


def test_glm4moe_with_nextn(tmp_path: Path) -> None:
    d = Dims(n_layer=3, n_head_kv=2, head_dim=128)
    kv = decoder_kv(
        "glm4moe",
        d,
        **{
            "glm4moe.expert_count": 4,
            "glm4moe.expert_used_count": 2,
            "glm4moe.expert_feed_forward_length": 256,
            "glm4moe.expert_shared_count": 1,
            "glm4moe.leading_dense_block_count": 1,
            "glm4moe.nextn_predict_layers": 1,
        },
    )
    tensors = decoder_tensors(d, n_expert=4, n_ff_exp=256, dense_layers=1)
    from_gguf = import_gguf(write(tmp_path / "glm.gguf", "glm4moe", kv, tensors).path)
    config = {
        "model_type": "glm4_moe",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "num_hidden_layers": 2,
        "num_nextn_predict_layers": 1,
        "max_position_embeddings": 8192,
        "moe_intermediate_size": 256,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "vocab_size": 64,
        "tie_word_embeddings": False,
    }
    assert import_hf_config(hf(tmp_path, config)).geometry == from_gguf.geometry


def test_gemma2_sliding_window(tmp_path: Path) -> None:
    d = Dims(n_layer=4, n_head_kv=4, head_dim=64)
    kv = decoder_kv("gemma2", d, **{"gemma2.attention.sliding_window": 4096})
    from_gguf = import_gguf(
        write(tmp_path / "g.gguf", "gemma2", kv, decoder_tensors(d, tied=True)).path
    )
    config = {
        "model_type": "gemma2",
        "hidden_size": 256,
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "num_hidden_layers": 4,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "vocab_size": 64,
    }
    assert import_hf_config(hf(tmp_path, config)).geometry == from_gguf.geometry
