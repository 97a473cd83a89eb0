"""Which ggml type each tensor gets under a llama.cpp file type (Q4_K_M, Q8_0 ...).

A faithful subset of llama.cpp's `llama_tensor_get_type` (src/llama-quant.cpp) for the
mixes the catalog offers, including the fallback for rows that are not a multiple of
the K-quant block (256). Used to synthesize per-tensor weights for catalog models that
have no GGUF header at hand; with a header, the real tensor types are used instead.
"""

from __future__ import annotations

from typing import NamedTuple

from rigspark_gui.core.errors import InvalidModelError
from rigspark_gui.core.ggml_types import GGML_TYPES

# ftype label -> default tensor type (llama_model_quantize_impl's switch on ftype).
FTYPE_DEFAULT: dict[str, str] = {
    "F32": "F32",
    "F16": "F16",
    "BF16": "BF16",
    "Q8_0": "Q8_0",
    "Q6_K": "Q6_K",
    "Q5_K_M": "Q5_K",
    "Q5_K_S": "Q5_K",
    "Q5_0": "Q5_0",
    "Q5_1": "Q5_1",
    "Q4_K_M": "Q4_K",
    "Q4_K_S": "Q4_K",
    "Q4_0": "Q4_0",
    "Q4_1": "Q4_1",
    "IQ4_XS": "IQ4_XS",
    "IQ4_NL": "IQ4_NL",
    "Q3_K_L": "Q3_K",
    "Q3_K_M": "Q3_K",
    "Q3_K_S": "Q3_K",
    "Q2_K": "Q2_K",
    "MXFP4": "MXFP4",
}

# Fallback when a row (ne0) is not a multiple of the chosen type's block.
_FALLBACK = {
    "Q2_K": "IQ4_NL",
    "Q3_K": "IQ4_NL",
    "IQ4_XS": "IQ4_NL",
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
}


class RecipeContext(NamedTuple):
    """Model facts the recipe consults."""

    architecture: str
    n_gqa: int
    n_expert: int
    n_attention_wv: int
    n_ffn_down: int
    is_70b: bool
    has_output: bool


def _use_more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def quantizable(name: str, n_dims: int) -> bool:
    """llama.cpp quantizes only 2-D/3-D weights, never norms or the MoE router."""
    return n_dims >= 2 and "_norm.weight" not in name and "ffn_gate_inp.weight" not in name


def choose_type(
    ftype: str,
    name: str,
    ne0: int,
    n_dims_3: bool,
    ctx: RecipeContext,
    i_attention_wv: int,
    i_ffn_down: int,
    layer: int | None,
) -> str:
    """The type llama-quantize gives tensor `name` (row length `ne0`) under `ftype`."""
    if ftype not in FTYPE_DEFAULT:
        raise InvalidModelError(f"unknown quantization {ftype!r}")
    base = FTYPE_DEFAULT[ftype]
    if base in ("F32", "F16", "BF16"):
        return base
    t = base
    falcon = ctx.architecture == "falcon"
    if name == "output.weight" or (not ctx.has_output and name == "token_embd.weight"):
        if ftype == "MXFP4" or falcon or ne0 % GGML_TYPES[t].block_size:
            t = "Q8_0"
        elif t != "Q8_0":
            t = "Q6_K"
    elif ftype == "MXFP4":
        t = "MXFP4" if n_dims_3 else "Q8_0"
    elif name == "token_embd.weight":
        pass
    elif "attn_v.weight" in name:
        if ftype == "Q2_K":
            t = "Q4_K" if ctx.n_gqa >= 4 else "Q3_K"
        elif ftype == "Q3_K_M":
            t = "Q5_K" if i_attention_wv < 2 else "Q4_K"
        elif ftype == "Q3_K_L" or (ftype in ("IQ4_NL", "IQ4_XS") and ctx.n_gqa >= 4):
            t = "Q5_K"
        elif ftype in ("Q4_K_M", "Q5_K_M") and _use_more_bits(i_attention_wv, ctx.n_attention_wv):
            t = "Q6_K"
        elif ftype == "Q4_K_S" and i_attention_wv < 4:
            t = "Q5_K"
        if ctx.is_70b and t in ("Q3_K", "Q4_K"):
            t = "Q5_K"
        if ctx.n_expert == 8:
            t = "Q8_0"
    elif "attn_k.weight" in name:
        if ctx.n_expert == 8:
            t = "Q8_0"
    elif "ffn_down" in name:
        i_layer, n_layer = i_ffn_down, ctx.n_ffn_down
        if ctx.n_expert > 1 and layer is not None:
            i_layer = layer
        if ftype == "Q2_K":
            t = "Q3_K"
        elif ftype == "Q3_K_M":
            if i_layer < n_layer // 16:
                t = "Q5_K"
            elif not falcon or _use_more_bits(i_layer, n_layer):
                t = "Q4_K"
            else:
                t = "Q3_K"
        elif ftype == "Q3_K_L":
            t = "Q4_K" if falcon else "Q5_K"
        elif ftype == "Q4_K_M":
            if falcon:
                if i_layer < n_layer // 16:
                    t = "Q6_K"
                elif _use_more_bits(i_layer, n_layer):
                    t = "Q5_K"
            elif _use_more_bits(i_layer, n_layer):
                t = "Q6_K"
        elif i_layer < n_layer // 8 and ftype in ("IQ4_NL", "IQ4_XS"):
            t = "Q5_K"
        elif ftype == "Q5_K_M" and _use_more_bits(i_layer, n_layer):
            t = "Q6_K"
        elif ftype == "Q4_K_S" and not falcon and i_layer < n_layer // 8:
            t = "Q5_K"
    elif "attn_output.weight" in name:
        if not falcon:
            if ctx.n_expert == 8:
                if ftype in ("Q2_K", "Q3_K_S", "Q3_K_M", "IQ4_NL", "Q4_K_S", "Q4_K_M", "IQ4_XS"):
                    t = "Q5_K"
            elif ftype == "Q2_K":
                t = "Q3_K"
            elif ftype == "Q3_K_M":
                t = "Q4_K"
            elif ftype == "Q3_K_L":
                t = "Q5_K"
        elif ftype == "Q3_K_L":
            t = "Q4_K"
    elif "attn_qkv.weight" in name:
        if ftype in ("Q3_K_M", "Q3_K_L"):
            t = "Q4_K"
        elif ftype == "Q4_K_M":
            t = "Q5_K"
        elif ftype == "Q5_K_M":
            t = "Q6_K"

    if ne0 % GGML_TYPES[t].block_size:
        fallback = _FALLBACK.get(t)
        if fallback is None or ne0 % GGML_TYPES[fallback].block_size:
            return "F16"
        t = fallback
    return t
