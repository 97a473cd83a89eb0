"""DeepSeek V4 (deepseek4) read from config.json and from a GGUF header: both give the
geometry llama.cpp b11434's converter and loader use."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.catalog.hf_import import import_hf_config
from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.memory import kv_total_bytes
from rigspark_gui.core.settings import PlanSettings
from validation.synth_dsv4 import MODELS, write_gguf

# DeepSeek-V4-Flash's config.json as published
# (https://huggingface.co/deepseek-ai/DeepSeek-V4-Flash/resolve/main/config.json),
# the fields RigSpark and the converter read
V4_FLASH: dict[str, Any] = {
    "architectures": ["DeepseekV4ForCausalLM"],
    "model_type": "deepseek_v4",
    "hc_eps": 1e-06, "hc_mult": 4, "hc_sinkhorn_iters": 20,
    "head_dim": 512, "hidden_size": 4096,
    "index_head_dim": 128, "index_n_heads": 64, "index_topk": 512,
    "max_position_embeddings": 1048576,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 64, "num_experts_per_tok": 6,
    "num_hidden_layers": 43, "num_hash_layers": 3, "num_key_value_heads": 1,
    "num_nextn_predict_layers": 1, "o_groups": 8, "o_lora_rank": 1024, "q_lora_rank": 1024,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06, "rope_theta": 10000,
    "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "sliding_window": 128,
    "swiglu_limit": 10.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "vocab_size": 129280, "compress_rope_theta": 160000,
    "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0],
}  # fmt: skip


def _read(tmp_path: Path, config: dict[str, Any]):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return import_hf_config(path).geometry


def test_v4_flash_config_maps_onto_the_converters_geometry(tmp_path: Path) -> None:
    g = _read(tmp_path, V4_FLASH)
    assert g.architecture == "deepseek4"
    # the MTP layer (ratio 0 past the trunk) is dropped by the converter
    assert g.n_layer == 43 and g.compress_ratios == tuple(V4_FLASH["compress_ratios"][:43])
    assert all(g.is_sliding(il) for il in range(43)) and g.sliding_window == 128
    assert (g.n_head, g.n_head_kv, g.head_dim_k, g.q_lora_rank, g.rope_head_dim) == (
        64, 1, 512, 1024, 64,
    )  # fmt: skip
    assert (g.o_groups, g.o_lora_rank, g.hc_mult, g.n_hash_layers) == (8, 1024, 4, 3)
    assert g.indexer_layers == tuple(range(2, 43, 2))
    assert (g.n_expert, g.n_expert_used, g.n_ff_expert, g.n_ff_shared_expert, g.n_ff) == (
        256, 6, 2048, 2048, 0,
    )  # fmt: skip


def test_v4_flash_kv_at_64k_by_hand(tmp_path: Path) -> None:
    """f16, one sequence, 65536 context: a 768-cell window on all 43 layers (1 KV head of
    512), 16384 compressed rows and the indexer's 128-wide keys on the 21 CSA layers, 512
    rows on the 20 HCA layers, and their f32 compressor states."""
    g = _read(tmp_path, V4_FLASH)
    window = 43 * 768 * 1024
    csa = 21 * (16384 * 1024 + 16384 * 256 + 2 * 4 * 8 * (1024 + 256))
    hca = 20 * (512 * 1024 + 2 * 4 * 128 * 512)
    assert kv_total_bytes(g, PlanSettings(context=65536)) == window + csa + hca


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"compress_ratios": [0, 4]}, "compress_ratios"),
        ({"compress_ratios": [0, 0] + [8, 128] * 20 + [4, 0]}, "only 0, 4 and 128"),
        ({"sliding_window": None}, "sliding_window"),
    ],
)
def test_unusable_configs_are_refused(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(ModelImportError, match=message):
        _read(tmp_path, V4_FLASH | change)


def test_a_gguf_header_reads_back_its_geometry(tmp_path: Path) -> None:
    g = MODELS["deepseek4-like"]
    path = tmp_path / "m.gguf"
    write_gguf(g, path)
    spec = import_gguf(path)
    assert spec.geometry == g
    assert {t.type for t in spec.tensors or () if "tid2eid" in t.name} == {"I32"}


def test_a_gguf_with_a_ratio_llama_cpp_refuses_is_refused(tmp_path: Path) -> None:
    g = dataclasses.replace(MODELS["deepseek4-like"], compress_ratios=(0, 0, 8, 128, 4))
    path = tmp_path / "m.gguf"
    write_gguf(g, path)
    with pytest.raises(ModelImportError, match="only compression ratios 0, 4 and 128"):
        import_gguf(path)
