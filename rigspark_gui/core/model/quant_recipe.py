"""Which ggml type each tensor gets under a llama.cpp file type (Q4_K_M, IQ2_XS ...).

A port of llama.cpp's `llama_tensor_get_type` (src/llama-quant.cpp) for every file type
llama-quantize offers (tools/quantize/quantize.cpp, QUANT_OPTIONS), with the fallback
for rows that do not fit a block and the importance-matrix requirement. Used to
synthesize per-tensor weights for catalog models that have no GGUF header at hand; with
a header, the real tensor types are used instead.

The rules are those of the releases published GGUF files were made with (read at
ggml-org/llama.cpp 8784689f, 2025; docs/validation-quant.md checks them against real
files). Master since the 2026 `tensor_category` refactor (read at 007dbbf3) differs in
three places: it types the fused `attn_qkv` and MLA `attn_kv_b` tensors by the `attn_v`
rules (published Phi-3.5 files show the older rule), falls Q2_K/Q3_K rows back to Q4_0
instead of IQ4_NL (the same 18 bytes per 32 values), and refuses IQ3_XXS tensors without
an importance matrix.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.errors import InvalidModelError
from rigspark_gui.core.model.ggml_types import GGML_TYPES

# llama-quantize's file types in its own listing order (QUANT_OPTIONS, read at 03161a4e),
# without its aliases Q3_K/Q4_K/Q5_K (= the _M mixes) and COPY. Left out: Q1_0 and Q2_0
# (2026, for natively 1- and 2-bit checkpoints; Q2_0 has no entry in the type table).
LLAMA_QUANTIZE_TYPES: tuple[str, ...] = (
    "Q4_0", "Q4_1", "MXFP4_MOE", "Q5_0", "Q5_1",
    "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0",
    "Q2_K", "Q2_K_S", "IQ3_XXS", "IQ3_S", "IQ3_M", "IQ3_XS",
    "Q3_K_S", "Q3_K_M", "Q3_K_L", "IQ4_NL", "IQ4_XS",
    "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "Q8_0",
    "F16", "BF16", "F32",
)  # fmt: skip

# ftype -> default tensor type (llama_ftype_get_default_type). IQ2_S and IQ2_M are named
# one step above their default type; IQ3_XS and IQ3_M are IQ3_S mixes.
FTYPE_DEFAULT: dict[str, str] = {
    "Q4_0": "Q4_0",
    "Q4_1": "Q4_1",
    "MXFP4_MOE": "MXFP4",
    "Q5_0": "Q5_0",
    "Q5_1": "Q5_1",
    "IQ2_XXS": "IQ2_XXS",
    "IQ2_XS": "IQ2_XS",
    "IQ2_S": "IQ2_XS",
    "IQ2_M": "IQ2_S",
    "IQ1_S": "IQ1_S",
    "IQ1_M": "IQ1_M",
    "TQ1_0": "TQ1_0",
    "TQ2_0": "TQ2_0",
    "Q2_K": "Q2_K",
    "Q2_K_S": "Q2_K",
    "IQ3_XXS": "IQ3_XXS",
    "IQ3_S": "IQ3_S",
    "IQ3_M": "IQ3_S",
    "IQ3_XS": "IQ3_S",
    "Q3_K_S": "Q3_K",
    "Q3_K_M": "Q3_K",
    "Q3_K_L": "Q3_K",
    "IQ4_NL": "IQ4_NL",
    "IQ4_XS": "IQ4_XS",
    "Q4_K_S": "Q4_K",
    "Q4_K_M": "Q4_K",
    "Q5_K_S": "Q5_K",
    "Q5_K_M": "Q5_K",
    "Q6_K": "Q6_K",
    "Q8_0": "Q8_0",
    "F16": "F16",
    "BF16": "BF16",
    "F32": "F32",
}

# Other names for a file type: "MXFP4" is how gpt-oss releases (and the catalog) call
# llama.cpp's MXFP4_MOE mix.
FTYPE_ALIASES: dict[str, str] = {"MXFP4": "MXFP4_MOE"}

# Tensor types llama.cpp will not produce without importance-matrix data (except for
# token_embd/output), and Q2_K inside a Q2_K_S file (tensor_requires_imatrix).
_NEEDS_IMATRIX = frozenset({"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS"})

# File types llama-quantize refuses without an importance matrix: those whose weight
# tensors get one of the types above (IQ2_M: IQ2_S; IQ3_XS: IQ3_XXS for attn_q/attn_k and
# the middle ffn_gate/ffn_up), and Q2_K_S. Before 2026 the check named IQ1_S, IQ1_M,
# IQ2_XXS, IQ2_XS, IQ2_S and Q2_K_S and refused IQ1/IQ2 tensors, which also stopped IQ2_M
# and IQ3_XXS (IQ2_S attn_q/attn_k); only IQ3_XS went through.
IMATRIX_REQUIRED: frozenset[str] = frozenset(
    {"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "Q2_K_S"}
)

# What a synthesized file assumes: the I-quant files people publish are made with an
# importance matrix (bartowski, unsloth, mradermacher i1; the scoreboard's I-quant rows),
# the legacy and K-quant mixes without one (only Q4_0/Q5_0 and IQ4_* change with it).
IMATRIX_ASSUMED: frozenset[str] = IMATRIX_REQUIRED | {"IQ3_S", "IQ3_M", "IQ4_NL", "IQ4_XS"}

# Fallback when a row (ne0) is not a multiple of the chosen type's block
# (the incompatible-shape switch); F16 when the fallback does not fit either.
_FALLBACK = {
    "IQ1_S": "IQ4_NL",
    "IQ1_M": "IQ4_NL",
    "IQ2_XXS": "IQ4_NL",
    "IQ2_XS": "IQ4_NL",
    "IQ2_S": "IQ4_NL",
    "IQ3_XXS": "IQ4_NL",
    "IQ3_S": "IQ4_NL",
    "IQ4_XS": "IQ4_NL",
    "Q2_K": "IQ4_NL",  # master: Q4_0, the same size
    "Q3_K": "IQ4_NL",
    "TQ1_0": "Q4_0",
    "TQ2_0": "Q4_0",
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
}

# The mixes of the very-low-bit branch (IQ2/IQ1): their own attn_v/ffn_down/attn_output
# rules, and no attn_q/ffn_gate/ffn_up bumps.
_IQ2_MIXES = frozenset({"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M"})
# Output (and tied embeddings) at Q5_K rather than Q6_K
_Q5K_OUTPUT = _IQ2_MIXES | {"IQ3_XXS"}
# attn_output of an 8-expert model goes to Q5_K under these
_MOE8_ATTN_OUTPUT_Q5K = frozenset(
    {"Q2_K", "IQ3_XS", "IQ3_XXS", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ3_S"}
    | {"IQ3_M", "IQ4_XS"}
)
# tensor_allows_quantization: names never quantized (substring matches)
_NOT_QUANTIZED = (
    "_norm.weight",
    "ffn_gate_inp.weight",  # MoE router
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
)


class RecipeContext(NamedTuple):
    """Model facts the recipe consults (llama.cpp's quantize_state_impl and hparams)."""

    architecture: str
    n_gqa: int  # n_head / n_head_kv of the first layer
    n_expert: int
    n_attention_wv: int  # attn_v tensors: the use_more_bits span of the attn_v rules
    n_ffn_down: int  # llama.cpp sets n_ffn_down = n_ffn_gate = n_ffn_up = n_layer
    is_70b: bool  # llama.cpp's LLM_TYPE_70B (the attn_v bump)
    has_output: bool  # untied head: otherwise token_embd is typed as the output


def canonical_ftype(ftype: str) -> str:
    """The llama-quantize name of a file type label (MXFP4 -> MXFP4_MOE)."""
    ftype = FTYPE_ALIASES.get(ftype, ftype)
    if ftype not in FTYPE_DEFAULT:
        raise InvalidModelError(f"unknown quantization {ftype!r}")
    return ftype


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


@lru_cache(maxsize=1 << 16)  # asked per tensor per quantization: names repeat across both
def quantizable(name: str, n_dims: int) -> bool:
    """tensor_allows_quantization: 2-D/3-D weights, never norms, routers and the few
    small tensors llama.cpp keeps as they are."""
    if n_dims < 2 or not name.endswith("weight"):
        return False
    if name in ("position_embd.weight", "token_types.weight"):
        return False
    return not any(k in name for k in _NOT_QUANTIZED)


def requires_imatrix(ftype: str, name: str, tensor_type: str) -> bool:
    """Whether llama-quantize refuses to write `name` as `tensor_type` without an
    importance matrix (tensor_requires_imatrix)."""
    if name in ("token_embd.weight", "per_layer_token_embd.weight", "output.weight"):
        return False
    if tensor_type == "Q2_K":
        return canonical_ftype(ftype) == "Q2_K_S"  # the only K-quant that needs one
    return tensor_type in _NEEDS_IMATRIX


def _fits(t: str, ne0: int) -> bool:
    return ne0 % GGML_TYPES[t].block_size == 0


def position_facts(
    ctx: RecipeContext, name: str, i_wv: int, i_down: int, layer: int | None
) -> tuple[bool, ...]:
    """Every fact the rules below read from a tensor's position (its attn_v or ffn_down
    count, its layer): two tensors of a kind with the same facts get the same type.
    A rule that reads a position another way must be added here; the tests compare
    layouts typed by these facts with the tensor-by-tensor walk for every catalog model."""
    if "attn_v.weight" in name:
        return (i_wv < 2, i_wv < 4, _use_more_bits(i_wv, ctx.n_attention_wv))
    n = ctx.n_ffn_down
    if "ffn_down" in name:
        i = layer if ctx.n_expert > 1 and layer is not None else i_down
        return (i < n // 16, i < n // 8, _use_more_bits(i, n), i_down < n // 8)
    if "ffn_gate" in name or "ffn_up" in name:
        i = layer if layer is not None else 0
        return (n // 8 <= i < 7 * n // 8,)
    return ()


Chooser = Callable[[str, int, bool, RecipeContext, int, int, "int | None"], str]


@lru_cache(maxsize=256)
def chooser(ftype: str, imatrix: bool | None = None) -> Chooser:
    """`choose_type` with the file type (and importance matrix) fixed: what the file
    type means is looked up once, not once per tensor."""
    ftype = canonical_ftype(ftype)
    base = FTYPE_DEFAULT[ftype]
    if not GGML_TYPES[base].quantized:
        return lambda *_: base  # F32/F16/BF16: every weight as is, no mix
    uses_imatrix = ftype in IMATRIX_ASSUMED if imatrix is None else imatrix
    block = {name: t.block_size for name, t in GGML_TYPES.items()}

    def choose(
        name: str,
        ne0: int,
        n_dims_3: bool,
        ctx: RecipeContext,
        i_attention_wv: int,
        i_ffn_down: int,
        layer: int | None,
    ) -> str:
        t = _mix_type(
            ftype, base, name, ne0, n_dims_3, ctx, i_attention_wv, i_ffn_down, layer, uses_imatrix
        )
        if ne0 % block[t] == 0:
            return t
        fallback = _FALLBACK.get(t)
        if fallback is None or ne0 % block[fallback]:
            return "F16"  # llama.cpp: F16 "due to unusual shape" (or no fallback at all)
        return fallback

    return choose


def choose_type(
    ftype: str,
    name: str,
    ne0: int,
    n_dims_3: bool,
    ctx: RecipeContext,
    i_attention_wv: int,
    i_ffn_down: int,
    layer: int | None,
    *,
    imatrix: bool | None = None,
) -> str:
    """The type llama-quantize gives tensor `name` (row length `ne0`) under `ftype`.

    `i_attention_wv`/`i_ffn_down` count the attn_v/ffn_down tensors before this one in
    llama.cpp's order (by layer). `imatrix`: whether an importance matrix is used;
    None assumes what published files of the type use (IMATRIX_ASSUMED)."""
    choose = chooser(ftype, imatrix)
    return choose(name, ne0, n_dims_3, ctx, i_attention_wv, i_ffn_down, layer)


def _mix_type(
    ftype: str,
    t: str,
    name: str,
    ne0: int,
    n_dims_3: bool,
    ctx: RecipeContext,
    i_wv: int,
    i_down: int,
    layer: int | None,
    imatrix: bool,
) -> str:
    """llama_tensor_get_type before the shape fallback; `t` is the ftype's default."""
    falcon = ctx.architecture == "falcon"
    embd = name in ("token_embd.weight", "per_layer_token_embd.weight")
    if name == "output.weight" or (not ctx.has_output and name == "token_embd.weight"):
        if ftype == "MXFP4_MOE" or falcon or not _fits(t, ne0):
            return "Q8_0"
        if ftype in _Q5K_OUTPUT:
            return "Q5_K"
        return t if t == "Q8_0" else "Q6_K"
    if ftype == "MXFP4_MOE":
        return "MXFP4" if n_dims_3 else "Q8_0"  # experts MXFP4, everything else Q8_0
    if embd:
        if ftype in ("IQ2_XXS", "IQ2_XS", "IQ1_S", "IQ1_M"):
            return "Q2_K"
        if ftype in ("IQ2_S", "IQ2_M", "IQ3_XXS"):
            return "IQ3_S"
        if ftype in ("TQ1_0", "TQ2_0"):
            return "Q4_K"
        return t
    if ftype in _IQ2_MIXES:
        return _iq2_mix(ftype, t, name, ctx, i_down)
    if "attn_v.weight" in name:
        return _attn_v(ftype, t, ctx, i_wv, imatrix)
    if "attn_k.weight" in name:
        if ctx.n_expert == 8:
            return "Q8_0"  # "bumping this to Q8_0 trades just ~128MB"
        return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, t)
    if "attn_q.weight" in name:
        return {"IQ3_XS": "IQ3_XXS", "IQ3_XXS": "IQ2_S"}.get(ftype, t)
    if "ffn_down" in name:
        return _ffn_down(ftype, t, ctx, i_down, layer, imatrix)
    if "attn_output.weight" in name:
        if falcon:
            return "Q4_K" if ftype == "Q3_K_L" else t
        if ctx.n_expert == 8:
            return "Q5_K" if ftype in _MOE8_ATTN_OUTPUT_Q5K else t
        return {
            "Q2_K": "Q3_K",
            "IQ3_XXS": "IQ3_S",
            "Q3_K_M": "Q4_K",
            "Q3_K_L": "Q5_K",
            "IQ3_M": "Q4_K",
        }.get(ftype, t)
    if "attn_qkv.weight" in name:
        return {
            "Q3_K_M": "Q4_K",
            "Q3_K_L": "Q4_K",
            "IQ3_M": "Q4_K",
            "Q4_K_M": "Q5_K",
            "Q5_K_M": "Q6_K",
        }.get(ftype, t)
    if "ffn_gate" in name or "ffn_up" in name:
        # IQ3_XS keeps the first and last eighth of the layers at IQ3_S. llama.cpp counts
        # gate/up tensors (layer from the name for MoE): one per synthesized block.
        i = layer if layer is not None else 0
        n = ctx.n_ffn_down
        if ftype == "IQ3_XS" and n // 8 <= i < 7 * n // 8:
            return "IQ3_XXS"
    return t


def _iq2_mix(ftype: str, t: str, name: str, ctx: RecipeContext, i_down: int) -> str:
    """The IQ2_XXS/IQ2_XS/IQ2_S/IQ2_M/IQ1_S/IQ1_M branch."""
    iq3s = ftype in ("IQ2_S", "IQ2_M")
    if "attn_v.weight" in name:
        if ctx.n_gqa >= 4 or ctx.n_expert >= 4:
            return "Q4_K"
        return "IQ3_S" if iq3s else "Q2_K"
    if ctx.n_expert == 8 and "attn_k.weight" in name:
        return "Q4_K"
    if "ffn_down" in name:
        # the plain counter, even for MoE (no layer from the name here)
        if i_down < ctx.n_ffn_down // 8:
            return "IQ3_S" if iq3s else "Q2_K"
        return t
    if "attn_output.weight" in name:
        if ctx.n_expert == 8:
            return "Q5_K"
        if ftype in ("IQ1_S", "IQ1_M"):
            return "IQ2_XXS"
        return "IQ3_S" if iq3s else t
    return t


def _attn_v(ftype: str, t: str, ctx: RecipeContext, i_wv: int, imatrix: bool) -> str:
    gqa4 = ctx.n_gqa >= 4
    if ftype == "Q2_K":
        t = "Q4_K" if gqa4 else "Q3_K"
    elif ftype == "Q2_K_S" and gqa4:
        t = "Q4_K"
    elif ftype == "IQ3_XXS":
        t = "Q4_K" if gqa4 else "IQ3_XXS" if imatrix else "IQ3_S"
    elif (ftype in ("IQ3_XS", "IQ3_S") and gqa4) or ftype == "IQ3_M":
        t = "Q4_K"
    elif ftype == "Q3_K_M":
        t = "Q5_K" if i_wv < 2 else "Q4_K"
    elif ftype == "Q3_K_L" or (ftype in ("IQ4_NL", "IQ4_XS") and gqa4):
        t = "Q5_K"
    elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i_wv, ctx.n_attention_wv):
        t = "Q6_K"
    elif ftype == "Q4_K_S" and i_wv < 4:
        t = "Q5_K"
    # 70B: 8 heads share each attn_v, so it is 8x smaller than attn_q: more bits are cheap
    if ctx.is_70b and t in ("Q3_K", "Q4_K"):
        t = "Q5_K"
    if ctx.n_expert == 8:
        t = "Q8_0"
    return t


def _ffn_down(
    ftype: str, t: str, ctx: RecipeContext, i_down: int, layer: int | None, imatrix: bool
) -> str:
    # MoE: experts are not consecutive, so llama.cpp reads the layer from the name
    i = layer if ctx.n_expert > 1 and layer is not None else i_down
    n = ctx.n_ffn_down
    falcon = ctx.architecture == "falcon"
    if ftype == "Q2_K":
        return "Q3_K"
    if ftype == "Q2_K_S":
        return "Q4_K" if i < n // 8 else t
    if ftype == "IQ3_XXS" and not imatrix:
        return "Q4_K" if i < n // 8 else "Q3_K"
    if ftype == "Q3_K_M":
        if i < n // 16:
            return "Q5_K"
        return "Q4_K" if not falcon or _use_more_bits(i, n) else "Q3_K"
    if ftype == "IQ3_M" and (i < n // 8 or (ctx.n_expert == 8 and _use_more_bits(i, n))):
        return "Q4_K"
    if ftype == "Q3_K_L":
        return "Q4_K" if falcon else "Q5_K"
    if ftype == "Q4_K_M":
        if falcon:
            return "Q6_K" if i < n // 16 else "Q5_K" if _use_more_bits(i, n) else "Q4_K"
        return "Q6_K" if _use_more_bits(i, n) else t
    if i < n // 8 and ftype in ("IQ4_NL", "IQ4_XS") and not imatrix:
        return "Q5_K"
    if ftype == "Q5_K_M" and _use_more_bits(i, n):
        return "Q6_K"
    if ftype == "Q4_K_S" and not falcon and i < n // 8:
        return "Q5_K"
    if ftype in ("Q4_0", "Q5_0") and imatrix and i < n // 8:
        # "guard against craziness in the first few ffn_down layers", with an imatrix only
        return "Q4_1" if ftype == "Q4_0" else "Q5_1"
    return t
