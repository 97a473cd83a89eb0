"""The 2026 families added to the catalog (Qwen3.5 122B, Qwen3-VL 32B / 235B, Granite 4.0
H-Tiny, LFM2, Gemma 3n, GLM-5): each entry is what llama.cpp b11434's converter writes from
the cited config.json values (docs/catalog-validation.md), and each plans."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from rigspark_gui.catalog.hf_import import import_hf
from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.resolve import resolve
from rigspark_gui.core.memory.tensors import synthesize_tensors
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from tests.conftest import make_rig

CATALOG = load_catalog(updates=False)
ENTRIES = {e.id: e for e in CATALOG.entries}
NEW = (
    "qwen3.5-122b-a10b", "qwen3-vl-32b-instruct", "qwen3-vl-235b-a22b-instruct",
    "granite-4.0-h-tiny", "lfm2-350m", "lfm2-700m", "lfm2-1.2b", "lfm2-2.6b", "lfm2-8b-a1b",
    "gemma-3n-e2b-it", "gemma-3n-e4b-it", "glm-5",
)  # fmt: skip


def geometry(model_id: str) -> Geometry:
    return ENTRIES[model_id].geometry


def imported(tmp_path: Path, config: dict[str, Any]) -> Geometry:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return import_hf(path).spec.geometry


@pytest.mark.parametrize("model_id", NEW)
def test_each_entry_loads_cited_and_plans(model_id: str) -> None:
    entry = ENTRIES[model_id]
    assert entry.source == f"{entry.hf_repo}/config.json" and "code index" in entry.verified_from
    p = plan(entry.to_spec(), make_rig(2), PlanSettings(context=4096), SpeedModel())
    assert p.paths and p.model_id == model_id


# The total in each name (IBM's card calls H-Tiny 7B; GLM-5's card 744B): the weights
# llama.cpp loads, MTP blocks and vision towers aside, come within 7% of it (LFM2 700M
# holds 742M): an unadjusted LFM2 FFN or a dense-counted MoE misses by far more.
@pytest.mark.parametrize(
    ("model_id", "billions"),
    [
        ("qwen3.5-122b-a10b", 122), ("qwen3-vl-32b-instruct", 32),
        ("qwen3-vl-235b-a22b-instruct", 235), ("granite-4.0-h-tiny", 7), ("lfm2-350m", 0.35),
        ("lfm2-700m", 0.7), ("lfm2-1.2b", 1.2), ("lfm2-2.6b", 2.6), ("lfm2-8b-a1b", 8),
        ("glm-5", 744),
    ],
)  # fmt: skip
def test_the_weights_add_up_to_the_size_in_the_name(model_id: str, billions: float) -> None:
    n = sum(math.prod(t.shape) for t in synthesize_tensors(geometry(model_id), "BF16"))
    assert abs(n / 1e9 / billions - 1) < 0.07, n


def test_lfm2_1_2b_counts_what_its_published_file_holds() -> None:
    # unsloth/LFM2-1.2B-GGUF's Q4_K_M header sums to 1,170,340,608 parameters (the
    # entry's published source); the synthesized tensors hold exactly as many
    n = sum(math.prod(t.shape) for t in synthesize_tensors(geometry("lfm2-1.2b"), "BF16"))
    assert n == 1_170_340_608


def test_the_qwen_entries_are_what_the_config_importer_reads(tmp_path: Path) -> None:
    q122 = {
        "model_type": "qwen3_5_moe",
        "text_config": {
            "head_dim": 256, "hidden_size": 3072, "full_attention_interval": 4,
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
            "linear_num_key_heads": 16, "linear_num_value_heads": 64,
            "linear_value_head_dim": 128, "max_position_embeddings": 262144,
            "moe_intermediate_size": 1024, "mtp_num_hidden_layers": 1,
            "num_attention_heads": 32, "num_experts": 256, "num_experts_per_tok": 8,
            "num_hidden_layers": 48, "num_key_value_heads": 2,
            "shared_expert_intermediate_size": 1024, "tie_word_embeddings": False,
            "vocab_size": 248320,
        },
    }  # fmt: skip
    assert imported(tmp_path, q122) == geometry("qwen3.5-122b-a10b")
    vl = {
        "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
        "vocab_size": 151936, "max_position_embeddings": 262144,
    }  # fmt: skip
    top = {"model_type": "qwen3_vl", "tie_word_embeddings": False, "text_config": vl}
    assert imported(tmp_path, top) == geometry("qwen3-vl-32b-instruct")
    moe = vl | {
        "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 94,
        "num_key_value_heads": 4, "num_experts": 128, "num_experts_per_tok": 8,
        "moe_intermediate_size": 1536, "decoder_sparse_step": 1, "mlp_only_layers": [],
    }  # fmt: skip
    top = {"model_type": "qwen3_vl_moe", "tie_word_embeddings": False, "text_config": moe}
    assert imported(tmp_path, top) == geometry("qwen3-vl-235b-a22b-instruct")


def _lfm2_ff(ff: int, adjust: bool, multiplier: float, multiple: int) -> int:
    """conversion/lfm2.py LFM2Model._add_feed_forward_length."""
    if adjust:
        ff = int(multiplier * int(2 * ff / 3))
        ff = multiple * ((ff + multiple - 1) // multiple)
    return ff


@pytest.mark.parametrize(
    ("model_id", "block_ff_dim", "adjust", "attention"),
    [
        ("lfm2-350m", 6656, True, (2, 5, 8, 10, 12, 14)),
        ("lfm2-700m", 10240, True, (2, 5, 8, 10, 12, 14)),
        ("lfm2-1.2b", 12288, True, (2, 5, 8, 10, 12, 14)),
        ("lfm2-2.6b", 10752, False, (2, 5, 9, 13, 17, 21, 24, 27)),
        ("lfm2-8b-a1b", 7168, False, (2, 6, 10, 14, 18, 21)),
    ],
)
def test_lfm2_ffn_and_layers_as_the_converter_writes_them(
    model_id: str, block_ff_dim: int, adjust: bool, attention: tuple[int, ...]
) -> None:
    g = geometry(model_id)
    assert g.n_ff == _lfm2_ff(block_ff_dim, adjust, 1.0, 256)
    heads = g.n_head_kv_per_layer or ()
    assert tuple(i for i, h in enumerate(heads) if h) == attention
    assert set(g.recurrent_layers) == set(range(g.n_layer)) - set(attention)
    assert g.shortconv_l_cache == 3 and g.tied_embeddings and g.n_vocab == 65536
    assert g.recurrent_r_values == 2 * g.n_embd  # the last L - 1 inputs of each conv


def test_lfm2_8b_a1b_has_two_dense_lead_layers_then_experts() -> None:
    g = geometry("lfm2-8b-a1b")
    assert (g.architecture, g.n_dense_lead, g.n_expert, g.n_expert_used) == ("lfm2moe", 2, 32, 4)
    assert (g.n_ff_expert, g.n_shared_expert) == (1792, 0)


def test_granite_h_tiny_mamba_widths_follow_the_converter() -> None:
    g = geometry("granite-4.0-h-tiny")
    assert g.architecture == "granitehybrid"
    assert g.ssm_d_inner == 2 * g.n_embd  # mamba_expand x hidden_size, not the head product
    assert (g.ssm_dt_rank, g.ssm_n_group, g.ssm_d_state, g.ssm_d_conv) == (48, 1, 128, 4)
    heads = g.n_head_kv_per_layer or ()
    assert [i for i, h in enumerate(heads) if h] == [5, 15, 25, 35]
    assert g.head_dim_k == g.n_embd // g.n_head  # Granite ignores head_dim


def test_glm5_keeps_an_indexer_on_every_layer_and_its_nextn_slot() -> None:
    g = geometry("glm-5")
    assert (g.architecture, g.n_layer, g.n_layer_nextn, g.indexer_layers) == (
        "glm-dsa",
        79,
        1,
        None,
    )
    assert (g.head_dim_k, g.head_dim_v, g.kv_lora_rank, g.rope_head_dim) == (256, 256, 512, 64)
    assert (g.indexer_n_head, g.indexer_head_size, g.context_length) == (32, 128, 202752)


@pytest.mark.parametrize(
    ("model_id", "n_layer", "shared"), [("gemma-3n-e2b-it", 30, 10), ("gemma-3n-e4b-it", 35, 15)]
)
def test_gemma3n_tables_are_padded_to_the_full_vocabulary(
    model_id: str, n_layer: int, shared: int
) -> None:
    g = geometry(model_id)
    assert g.n_vocab == 262400  # not vocab_size_per_layer_input's 262,144
    assert g.n_layer == n_layer and g.n_layer_kv_from_start == n_layer - shared
    per_layer = next(t for t in synthesize_tensors(g, "BF16") if "per_layer_token" in t.name)
    assert per_layer.shape == (256 * n_layer, 262400)


@pytest.mark.parametrize(
    ("tag", "model_id"),
    [
        ("granite4:tiny-h", "granite-4.0-h-tiny"),
        ("qwen3.5:122b", "qwen3.5-122b-a10b"),
        ("qwen3-vl:32b", "qwen3-vl-32b-instruct"),
        ("gemma3n:e4b", "gemma-3n-e4b-it"),
        ("gemma3n:e2b", "gemma-3n-e2b-it"),
        ("LiquidAI/LFM2-1.2B", "lfm2-1.2b"),
        ("zai-org/GLM-5", "glm-5"),
    ],
)
def test_the_names_people_type_find_them(tag: str, model_id: str) -> None:
    assert resolve(CATALOG.specs(), tag).spec.id == model_id
