"""llama-quantize's per-tensor rules for every file type (src/llama-quant.cpp,
llama_tensor_get_type), read rule by rule from the source."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rigspark_gui.core.errors import InvalidModelError
from rigspark_gui.core.memory import synthesize_tensors
from rigspark_gui.core.memory.tensors import _shapes
from rigspark_gui.core.model.quant_recipe import (
    FTYPE_DEFAULT,
    IMATRIX_ASSUMED,
    IMATRIX_REQUIRED,
    LLAMA_QUANTIZE_TYPES,
    RecipeContext,
    canonical_ftype,
    choose_type,
    quantizable,
    requires_imatrix,
)
from tests.conftest import LLAMA_31_8B

# Llama 3.1 8B: 32 layers, 4 query heads per KV head
LLAMA = RecipeContext(
    architecture="llama",
    n_gqa=4,
    n_expert=0,
    n_attention_wv=32,
    n_ffn_down=32,
    is_70b=False,
    has_output=True,
)
MHA = LLAMA._replace(n_gqa=1)
MIXTRAL = LLAMA._replace(n_expert=8)
MOE = LLAMA._replace(n_expert=128, n_ffn_down=48)


def ty(
    ftype: str,
    name: str,
    ctx: RecipeContext = LLAMA,
    *,
    ne0: int = 4096,
    i_wv: int = 10,
    i_down: int = 10,
    layer: int | None = 10,
    n_dims_3: bool = False,
    imatrix: bool | None = None,
) -> str:
    return choose_type(ftype, name, ne0, n_dims_3, ctx, i_wv, i_down, layer, imatrix=imatrix)


def test_types_listed_in_llama_quantize_order() -> None:
    assert LLAMA_QUANTIZE_TYPES[:5] == ("Q4_0", "Q4_1", "MXFP4_MOE", "Q5_0", "Q5_1")
    assert LLAMA_QUANTIZE_TYPES[-3:] == ("F16", "BF16", "F32")
    assert set(LLAMA_QUANTIZE_TYPES) == set(FTYPE_DEFAULT)
    assert len(set(LLAMA_QUANTIZE_TYPES)) == len(LLAMA_QUANTIZE_TYPES) == 33


def test_default_types() -> None:
    # llama_ftype_get_default_type: the _S/_M names of the IQ2 mixes are one step up
    assert FTYPE_DEFAULT["IQ2_S"] == "IQ2_XS"
    assert FTYPE_DEFAULT["IQ2_M"] == "IQ2_S"
    assert FTYPE_DEFAULT["IQ3_XS"] == FTYPE_DEFAULT["IQ3_M"] == "IQ3_S"
    assert FTYPE_DEFAULT["Q2_K_S"] == "Q2_K"
    assert FTYPE_DEFAULT["MXFP4_MOE"] == "MXFP4"


def test_mxfp4_alias() -> None:
    assert canonical_ftype("MXFP4") == "MXFP4_MOE"
    experts = "blk.0.ffn_up_exps.weight"
    assert ty("MXFP4", experts, MOE, n_dims_3=True) == "MXFP4"
    assert ty("MXFP4_MOE", experts, MOE, n_dims_3=True) == "MXFP4"
    assert ty("MXFP4", "blk.0.attn_q.weight", MOE) == "Q8_0"
    assert ty("MXFP4", "token_embd.weight", MOE) == "Q8_0"
    assert ty("MXFP4", "output.weight", MOE) == "Q8_0"
    with pytest.raises(InvalidModelError):
        canonical_ftype("Q4_K")  # llama-quantize's alias of Q4_K_M is not a RigSpark label


def test_imatrix_required_list() -> None:
    expected = {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS"}
    assert expected | {"Q2_K_S"} == IMATRIX_REQUIRED
    assert IMATRIX_REQUIRED <= IMATRIX_ASSUMED
    assert "Q4_0" not in IMATRIX_ASSUMED and "IQ4_XS" in IMATRIX_ASSUMED


def test_requires_imatrix_per_tensor() -> None:
    """tensor_requires_imatrix: by target type, never token_embd/output, Q2_K only in Q2_K_S."""
    assert requires_imatrix("IQ2_XS", "blk.0.ffn_up.weight", "IQ2_XS")
    assert requires_imatrix("IQ3_XS", "blk.9.attn_q.weight", "IQ3_XXS")
    assert not requires_imatrix("IQ1_S", "token_embd.weight", "Q2_K")
    assert not requires_imatrix("IQ2_XXS", "output.weight", "Q5_K")
    assert requires_imatrix("Q2_K_S", "blk.9.ffn_up.weight", "Q2_K")
    assert not requires_imatrix("Q2_K", "blk.9.ffn_up.weight", "Q2_K")
    assert not requires_imatrix("IQ3_S", "blk.9.ffn_up.weight", "IQ3_S")


@pytest.mark.parametrize("ftype", LLAMA_QUANTIZE_TYPES)
def test_imatrix_list_matches_the_per_tensor_rule(ftype: str) -> None:
    """An ftype needs an imatrix exactly when one of its weight tensors does."""
    tensors = synthesize_tensors(LLAMA_31_8B, ftype)
    needs = any(requires_imatrix(ftype, t.name, t.type) for t in tensors)
    assert needs == (ftype in IMATRIX_REQUIRED)


# --- the IQ2/IQ1 branch ---------------------------------------------------------------


def test_iq2_attn_v() -> None:
    assert ty("IQ2_XS", "blk.3.attn_v.weight") == "Q4_K"  # n_gqa >= 4
    assert ty("IQ2_XS", "blk.3.attn_v.weight", MHA) == "Q2_K"
    assert ty("IQ2_M", "blk.3.attn_v.weight", MHA) == "IQ3_S"
    assert ty("IQ1_S", "blk.3.attn_v.weight", MHA._replace(n_expert=4)) == "Q4_K"  # >= 4 experts
    # no 70B or 8-expert post-rules in this branch
    assert ty("IQ2_XXS", "blk.3.attn_v.weight", MHA._replace(is_70b=True)) == "Q2_K"


def test_iq2_ffn_down_first_eighth_by_counter() -> None:
    assert ty("IQ2_XXS", "blk.3.ffn_down.weight", i_down=3) == "Q2_K"
    assert ty("IQ2_XXS", "blk.4.ffn_down.weight", i_down=4) == "IQ2_XXS"
    assert ty("IQ2_S", "blk.0.ffn_down.weight", i_down=0) == "IQ3_S"
    assert ty("IQ2_M", "blk.20.ffn_down.weight", i_down=20) == "IQ2_S"
    # MoE: the plain counter, not the layer from the name (unlike the other mixes)
    assert ty("IQ1_M", "blk.40.ffn_down_exps.weight", MOE, i_down=2, layer=40) == "Q2_K"


def test_iq2_attn_output_and_k() -> None:
    assert ty("IQ1_S", "blk.3.attn_output.weight") == "IQ2_XXS"
    assert ty("IQ1_M", "blk.3.attn_output.weight") == "IQ2_XXS"
    assert ty("IQ2_S", "blk.3.attn_output.weight") == "IQ3_S"
    assert ty("IQ2_XS", "blk.3.attn_output.weight") == "IQ2_XS"
    assert ty("IQ2_XS", "blk.3.attn_output.weight", MIXTRAL) == "Q5_K"
    assert ty("IQ2_XS", "blk.3.attn_k.weight", MIXTRAL) == "Q4_K"
    assert ty("IQ2_XS", "blk.3.attn_k.weight") == "IQ2_XS"
    assert ty("IQ2_XS", "blk.3.attn_q.weight") == "IQ2_XS"
    assert ty("IQ2_XS", "blk.3.ffn_gate.weight") == "IQ2_XS"


def test_very_low_bit_embeddings_and_output() -> None:
    assert ty("IQ1_M", "token_embd.weight") == "Q2_K"
    assert ty("IQ2_XXS", "token_embd.weight") == "Q2_K"
    assert ty("IQ2_M", "token_embd.weight") == "IQ3_S"
    assert ty("IQ3_XXS", "token_embd.weight") == "IQ3_S"
    assert ty("TQ2_0", "token_embd.weight") == "Q4_K"
    assert ty("IQ3_XS", "token_embd.weight") == "IQ3_S"  # the default
    for ftype in ("IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "IQ3_XXS"):
        assert ty(ftype, "output.weight") == "Q5_K"
    assert ty("IQ3_XS", "output.weight") == "Q6_K"
    assert ty("TQ1_0", "output.weight") == "Q6_K"
    assert ty("Q4_0", "output.weight") == "Q6_K"
    assert ty("Q8_0", "output.weight") == "Q8_0"
    # tied: token_embd is typed as the output
    tied = LLAMA._replace(has_output=False)
    assert ty("IQ2_XS", "token_embd.weight", tied) == "Q5_K"
    assert ty("Q4_K_M", "output.weight", LLAMA._replace(architecture="falcon")) == "Q8_0"
    assert ty("Q4_K_M", "output.weight", ne0=4000) == "Q8_0"  # rows not a multiple of 256


# --- the IQ3 mixes --------------------------------------------------------------------


def test_iq3_xs() -> None:
    assert ty("IQ3_XS", "blk.3.attn_q.weight") == "IQ3_XXS"
    assert ty("IQ3_XS", "blk.3.attn_k.weight") == "IQ3_XXS"
    assert ty("IQ3_XS", "blk.3.attn_v.weight") == "Q4_K"  # n_gqa >= 4
    assert ty("IQ3_XS", "blk.3.attn_v.weight", MHA) == "IQ3_S"
    # ffn_gate/up: IQ3_XXS between the first and the last eighth of the layers
    assert ty("IQ3_XS", "blk.3.ffn_gate.weight", layer=3) == "IQ3_S"
    assert ty("IQ3_XS", "blk.4.ffn_up.weight", layer=4) == "IQ3_XXS"
    assert ty("IQ3_XS", "blk.27.ffn_up.weight", layer=27) == "IQ3_XXS"
    assert ty("IQ3_XS", "blk.28.ffn_gate.weight", layer=28) == "IQ3_S"
    assert ty("IQ3_XS", "blk.3.attn_output.weight", MIXTRAL) == "Q5_K"
    assert ty("IQ3_XS", "blk.3.ffn_down.weight") == "IQ3_S"


def test_iq3_xxs() -> None:
    assert ty("IQ3_XXS", "blk.3.attn_q.weight") == "IQ2_S"
    assert ty("IQ3_XXS", "blk.3.attn_k.weight") == "IQ2_S"
    assert ty("IQ3_XXS", "blk.3.attn_v.weight") == "Q4_K"
    assert ty("IQ3_XXS", "blk.3.attn_v.weight", MHA) == "IQ3_XXS"  # with an imatrix
    assert ty("IQ3_XXS", "blk.3.attn_v.weight", MHA, imatrix=False) == "IQ3_S"
    assert ty("IQ3_XXS", "blk.3.attn_output.weight") == "IQ3_S"
    assert ty("IQ3_XXS", "blk.3.ffn_down.weight", i_down=3) == "IQ3_XXS"
    assert ty("IQ3_XXS", "blk.3.ffn_down.weight", i_down=3, imatrix=False) == "Q4_K"
    assert ty("IQ3_XXS", "blk.9.ffn_down.weight", i_down=9, imatrix=False) == "Q3_K"


def test_iq3_s_and_m() -> None:
    assert ty("IQ3_S", "blk.3.attn_v.weight") == "Q4_K"
    assert ty("IQ3_S", "blk.3.attn_v.weight", MHA) == "IQ3_S"
    assert ty("IQ3_S", "blk.3.attn_output.weight") == "IQ3_S"
    assert ty("IQ3_M", "blk.3.attn_v.weight", MHA) == "Q4_K"
    assert ty("IQ3_M", "blk.3.attn_output.weight") == "Q4_K"
    assert ty("IQ3_M", "blk.3.attn_qkv.weight") == "Q4_K"
    assert ty("IQ3_M", "blk.3.ffn_down.weight", i_down=3) == "Q4_K"  # first eighth
    assert ty("IQ3_M", "blk.4.ffn_down.weight", i_down=4) == "IQ3_S"
    # 8 experts: also the use_more_bits layers (layer from the name)
    assert ty("IQ3_M", "blk.6.ffn_down_exps.weight", MIXTRAL, i_down=0, layer=6) == "Q4_K"
    assert ty("IQ3_M", "blk.7.ffn_down_exps.weight", MIXTRAL, i_down=0, layer=7) == "IQ3_S"


# --- K-quant and legacy mixes ---------------------------------------------------------


def test_q2_k_s() -> None:
    assert ty("Q2_K_S", "blk.3.attn_v.weight") == "Q4_K"
    assert ty("Q2_K_S", "blk.3.attn_v.weight", MHA) == "Q2_K"
    assert ty("Q2_K_S", "blk.3.ffn_down.weight", i_down=3) == "Q4_K"
    assert ty("Q2_K_S", "blk.4.ffn_down.weight", i_down=4) == "Q2_K"
    assert ty("Q2_K_S", "blk.3.attn_output.weight") == "Q2_K"  # Q2_K raises it to Q3_K
    assert ty("Q2_K", "blk.3.attn_output.weight") == "Q3_K"
    assert ty("Q2_K", "blk.30.ffn_down.weight", i_down=30) == "Q3_K"


def test_eight_experts() -> None:
    assert ty("Q4_K_M", "blk.3.attn_v.weight", MIXTRAL) == "Q8_0"
    assert ty("Q2_K", "blk.3.attn_k.weight", MIXTRAL) == "Q8_0"
    assert ty("IQ4_XS", "blk.3.attn_output.weight", MIXTRAL) == "Q5_K"
    assert ty("Q5_K_M", "blk.3.attn_output.weight", MIXTRAL) == "Q5_K"  # default: not listed
    assert ty("Q3_K_L", "blk.3.attn_output.weight", MIXTRAL) == "Q3_K"
    assert ty("Q4_K_M", "blk.3.attn_k.weight", MOE) == "Q4_K"  # 128 experts: no bump


def test_70b_attn_v() -> None:
    big = LLAMA._replace(n_gqa=8, n_attention_wv=80, n_ffn_down=80, is_70b=True)
    assert ty("Q4_K_M", "blk.40.attn_v.weight", big, i_wv=40) == "Q5_K"
    assert ty("Q4_K_M", "blk.40.attn_v.weight", LLAMA, i_wv=11) == "Q4_K"
    assert ty("Q3_K_S", "blk.40.attn_v.weight", big, i_wv=40) == "Q5_K"
    assert ty("Q5_K_S", "blk.40.attn_v.weight", big, i_wv=40) == "Q5_K"
    assert ty("Q6_K", "blk.40.attn_v.weight", big, i_wv=40) == "Q6_K"


def test_importance_matrix_dependent_rules() -> None:
    # IQ4_NL/IQ4_XS: the first eighth of ffn_down to Q5_K only without an imatrix
    assert ty("IQ4_XS", "blk.0.ffn_down.weight", i_down=0) == "IQ4_XS"
    assert ty("IQ4_XS", "blk.0.ffn_down.weight", i_down=0, imatrix=False) == "Q5_K"
    assert ty("IQ4_NL", "blk.3.ffn_down.weight", i_down=3, imatrix=False) == "Q5_K"
    assert ty("IQ4_NL", "blk.4.ffn_down.weight", i_down=4, imatrix=False) == "IQ4_NL"
    assert ty("IQ4_NL", "blk.0.attn_v.weight") == "Q5_K"
    # Q4_0/Q5_0: to Q4_1/Q5_1 only with an imatrix
    assert ty("Q4_0", "blk.0.ffn_down.weight", i_down=0) == "Q4_0"
    assert ty("Q4_0", "blk.0.ffn_down.weight", i_down=0, imatrix=True) == "Q4_1"
    assert ty("Q5_0", "blk.3.ffn_down.weight", i_down=3, imatrix=True) == "Q5_1"
    assert ty("Q5_0", "blk.4.ffn_down.weight", i_down=4, imatrix=True) == "Q5_0"
    assert ty("Q4_1", "blk.0.ffn_down.weight", i_down=0, imatrix=True) == "Q4_1"


def test_fused_qkv() -> None:
    phi = LLAMA._replace(architecture="phi3", n_gqa=1)
    assert ty("Q4_K_M", "blk.3.attn_qkv.weight", phi) == "Q5_K"
    assert ty("Q5_K_M", "blk.3.attn_qkv.weight", phi) == "Q6_K"
    assert ty("Q3_K_L", "blk.3.attn_qkv.weight", phi) == "Q4_K"
    assert ty("Q2_K", "blk.3.attn_qkv.weight", phi) == "Q2_K"
    assert ty("IQ2_M", "blk.3.attn_qkv.weight", phi) == "IQ2_S"


def test_ternary() -> None:
    assert ty("TQ1_0", "blk.3.ffn_down.weight") == "TQ1_0"
    assert ty("TQ2_0", "blk.3.attn_v.weight") == "TQ2_0"
    assert ty("TQ1_0", "blk.3.ffn_down.weight", ne0=1408) == "Q4_0"  # 1408 % 256 != 0


def test_fallbacks() -> None:
    for ftype in ("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ3_S", "IQ4_XS", "Q2_K"):
        assert ty(ftype, "blk.3.ffn_up.weight", ne0=1408) == "IQ4_NL", ftype
    assert ty("Q4_K_S", "blk.3.ffn_up.weight", ne0=1408) == "Q5_0"
    assert ty("Q5_K_S", "blk.3.ffn_up.weight", ne0=1408) == "Q5_1"
    assert ty("Q6_K", "blk.3.ffn_up.weight", ne0=1408) == "Q8_0"
    assert ty("IQ2_XS", "blk.3.ffn_up.weight", ne0=1000) == "F16"  # not even 32
    assert ty("MXFP4", "blk.3.ffn_up_exps.weight", MOE, ne0=1000, n_dims_3=True) == "F16"


def test_not_quantized() -> None:
    assert quantizable("blk.0.attn_q.weight", 2)
    assert quantizable("blk.0.ffn_down_exps.weight", 3)
    for name in (
        "blk.0.attn_norm.weight",
        "blk.0.ffn_gate_inp.weight",
        "blk.0.ssm_conv1d.weight",
        "blk.0.time_mix_w1.weight",
        "position_embd.weight",
        "blk.0.attn_q.bias",
    ):
        assert not quantizable(name, 2), name
    assert not quantizable("blk.0.attn_q.weight", 1)


def test_unknown_ftype() -> None:
    with pytest.raises(InvalidModelError):
        ty("Q3_K_XL", "blk.0.attn_q.weight")


def test_shapes_context_counts_layers_not_ffn_down_tensors() -> None:
    """llama.cpp sets n_ffn_down to n_layer: a shared expert adds a second ffn_down per
    block, which must not stretch the use_more_bits pattern."""
    g = replace(
        LLAMA_31_8B,
        architecture="qwen2moe",
        n_ff=0,
        n_expert=60,
        n_expert_used=4,
        n_ff_expert=1408,
        n_shared_expert=1,
        n_ff_shared_expert=5632,
    )
    ctx = _shapes(g)[1]
    assert ctx.n_ffn_down == g.n_layer == 32
    tensors = {t.name: t.type for t in synthesize_tensors(g, "Q4_K_M")}
    # layer 6: (6 - 4) % 3 == 2, use_more_bits; expert rows of 1408 fall back Q6_K -> Q8_0
    assert tensors["blk.6.ffn_down_shexp.weight"] == "Q6_K"
    assert tensors["blk.6.ffn_down_exps.weight"] == "Q8_0"
    assert tensors["blk.7.ffn_down_shexp.weight"] == "Q4_K"


def test_shapes_context_70b() -> None:
    g70 = replace(LLAMA_31_8B, n_layer=80, n_embd=8192, n_head=64)
    assert _shapes(g70)[1].is_70b
    g65 = replace(g70, n_head_kv=64)  # LLaMA-1 65B: no grouped KV heads
    assert not _shapes(g65)[1].is_70b
    assert not _shapes(LLAMA_31_8B)[1].is_70b


def _tensor_by_tensor(g, ftype):  # type: ignore[no-untyped-def]
    """The recipe asked once per tensor, as llama-quantize walks the file."""
    from rigspark_gui.core.memory.tensors import _shapes
    from rigspark_gui.core.model.quant_recipe import choose_type, quantizable

    raw, ctx = _shapes(g)
    i_wv = i_down = 0
    out = []
    for name, shape, _group, layer in raw:
        t = "F32"
        if quantizable(name, len(shape)):
            t = choose_type(ftype, name, shape[0], len(shape) == 3, ctx, i_wv, i_down, layer)
        i_wv += "attn_v.weight" in name
        i_down += "ffn_down" in name
        out.append((name, t))
    return out


@pytest.mark.parametrize("model_id", ["llama-3.1-8b-instruct", "qwen3-30b-a3b", "gemma-3-27b-it"])
def test_asking_once_per_kind_of_tensor_gives_every_tensor_its_type(model_id: str) -> None:
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.core.memory.tensors import synth_rows
    from rigspark_gui.core.model.quant_recipe import FTYPE_DEFAULT

    g = load_catalog().find(model_id).to_spec().geometry
    for ftype in FTYPE_DEFAULT:
        fast = [(r.name, r.type) for r in synth_rows(g, ftype)]
        assert fast == _tensor_by_tensor(g, ftype), ftype


@pytest.mark.parametrize("model_id", ["llama-3.1-8b-instruct", "qwen3-30b-a3b", "gemma-3-27b-it"])
def test_a_layout_summed_as_types_are_chosen_equals_one_from_the_tensor_list(model_id: str) -> None:
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.core.memory.tensors import synth_rows
    from rigspark_gui.core.memory.weights import _layout_from_rows, _synth_layout

    spec = load_catalog().find(model_id).to_spec()
    for quant in spec.quants:
        rows = synth_rows(spec.geometry, quant)
        assert _synth_layout(spec.geometry, quant) == _layout_from_rows(spec.geometry, rows, quant)


def test_every_catalog_model_sums_its_blocks_as_its_tensor_list_does() -> None:
    """Every model at every type: a layout types each kind of block once and a layer's
    tensors by `position_facts`; the tensor list asks the recipe about every tensor."""
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.core.memory.tensors import synth_rows
    from rigspark_gui.core.memory.weights import _layout_from_rows, _synth_layout

    for spec in load_catalog().specs():
        for quant in spec.quants:
            rows = synth_rows(spec.geometry, quant)
            expected = _layout_from_rows(spec.geometry, rows, quant)
            layout = _synth_layout(spec.geometry, quant)
            assert layout == expected, (spec.id, quant)
            # the same order too: speed sums the type mix in it, to the last bit
            assert list(layout.tensor_types) == list(expected.tensor_types), (spec.id, quant)
