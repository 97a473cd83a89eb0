"""Synthesized weights against real published GGUF files."""

from dataclasses import replace

import pytest

from rigspark_gui.core.memory import file_bytes_estimate, synthesize_tensors, weights_layout
from rigspark_gui.core.model.model_spec import TensorGroup
from tests.conftest import LLAMA_31_8B, spec_of

# bartowski/Meta-Llama-3.1-8B-Instruct-GGUF file sizes (bytes, as listed on the repository)
PUBLISHED_8B = {"Q4_K_M": 4_920_734_016, "Q8_0": 8_540_770_112}


def test_parameter_count_of_llama_31_8b() -> None:
    layout = weights_layout(spec_of(LLAMA_31_8B), "BF16")
    assert layout.n_params == 8_030_261_248  # the model card's 8.03B


@pytest.mark.parametrize("quant", sorted(PUBLISHED_8B))
def test_file_size_within_half_a_percent(quant: str) -> None:
    layout = weights_layout(spec_of(LLAMA_31_8B), quant)
    estimate = file_bytes_estimate(layout, LLAMA_31_8B)
    assert abs(estimate - PUBLISHED_8B[quant]) / PUBLISHED_8B[quant] < 0.005


def test_q4_k_m_recipe_types() -> None:
    tensors = {t.name: t for t in synthesize_tensors(LLAMA_31_8B, "Q4_K_M")}
    assert tensors["output.weight"].type == "Q6_K"
    assert tensors["token_embd.weight"].type == "Q4_K"
    assert tensors["blk.0.attn_v.weight"].type == "Q6_K"  # use_more_bits: first eighth
    assert tensors["blk.4.attn_v.weight"].type == "Q4_K"
    assert tensors["blk.6.ffn_down.weight"].type == "Q6_K"  # (6 - 4) % 3 == 2
    assert tensors["blk.0.attn_norm.weight"].type == "F32"
    assert tensors["blk.0.attn_q.weight"].group is TensorGroup.BLOCK


def test_rows_not_multiple_of_256_fall_back() -> None:
    g = replace(LLAMA_31_8B, n_ff=29568)  # Qwen2.5-72B's width: 115.5 blocks
    tensors = {t.name: t for t in synthesize_tensors(g, "Q4_K_M")}
    assert tensors["blk.5.ffn_down.weight"].type == "Q5_0"
    assert tensors["blk.6.ffn_down.weight"].type == "Q8_0"  # Q6_K falls back to Q8_0


def test_tied_embeddings_head_is_duplicated_off_cpu() -> None:
    g = replace(LLAMA_31_8B, tied_embeddings=True)
    layout = weights_layout(spec_of(g), "Q4_K_M")
    assert layout.tied_head_bytes == layout.input_bytes
    tensors = {t.name: t for t in synthesize_tensors(g, "Q4_K_M")}
    assert "output.weight" not in tensors
    assert tensors["token_embd.weight"].type == "Q6_K"  # quantized as the output


def test_moe_active_parameters() -> None:
    g = replace(LLAMA_31_8B, n_ff=0, n_expert=8, n_expert_used=2, n_ff_expert=14336)
    layout = weights_layout(spec_of(g), "Q4_K_M")
    assert all(e > 0 for e in layout.block_expert_bytes)
    assert layout.expert_fraction_active == 0.25
    assert layout.n_active_params < layout.n_params / 2


def test_parameter_counts_from_shapes_match_the_layouts() -> None:
    """The picker sorts by parameters without choosing a type per tensor: same count."""
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.core.memory import param_count
    from rigspark_gui.core.model.model_spec import ModelSpec

    for spec in load_catalog().specs():
        for quant in (spec.available_quants[0], spec.available_quants[-1]):
            layout = weights_layout(spec, quant)
            assert param_count(spec) == (layout.n_params, layout.n_active_params), spec.id
    moe = next(s for s in load_catalog().specs() if s.geometry.is_moe)
    tensors = synthesize_tensors(moe.geometry, "Q4_K_M")
    imported = ModelSpec(
        id="file", name="file", geometry=moe.geometry, tensors=tensors, file_quant="Q4_K_M"
    )
    assert param_count(imported) == param_count(moe)
    assert param_count(moe).active < param_count(moe).total


def test_counting_each_kind_of_block_once_matches_counting_every_tensor() -> None:
    import math

    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.core.memory.params import count_params, synth_param_count
    from rigspark_gui.core.memory.tensors import _shapes

    specs = load_catalog().specs()
    assert len(specs) > 100
    for spec in specs:
        g = spec.geometry
        every_tensor = [
            (name, math.prod(shape), group, layer, "_exps" in name)
            for name, shape, group, layer in _shapes(g)[0]
        ]
        assert synth_param_count(g) == count_params(g, every_tensor), spec.id
