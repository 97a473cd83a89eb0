"""Gemma 4 and Gemma 3n as llama.cpp b11434 loads them (src/models/gemma4.cpp,
src/models/gemma3n.cpp): each block's tensors, the tensors outside the blocks, and what
the KV cache makes of layers whose geometry differs.

- Sliding and full-attention layers differ in head dim (`head_dim_k_swa` vs `head_dim_k`)
  and, on the large models, in KV heads (`n_head_kv_per_layer`); full layers of the
  large models use K as V and have no `attn_v` (`attention_k_eq_v`).
- Layers from `n_layer_kv_from_start` on reuse the last sliding / full layer's cache
  (create_memory's reuse callback) and hold no KV; their K/V weights are still in the
  file (the checkpoints ship them) and llama.cpp loads them.
- Per-layer embeddings (`n_embd_per_layer` > 0): a `per_layer_token_embd` table of
  n_embd_per_layer x n_layer per token. It is an input tensor, so it stays in host memory
  on every path (read lazily from the mapped file when over 4 GiB,
  llama_model_loader::lazy_read); its projection goes with layer 0.
- Gemma 4 MoE (26B-A4B): a dense FFN beside the routed experts, whose gate and up are one
  `ffn_gate_up_exps` tensor as the checkpoint stores them, with router and expert scales.
- Gemma 3n adds AltUp and LAuReL tensors to every block.
- Without flash attention llama.cpp stores V transposed, every layer's row as wide as
  the widest one (`v_width_max`).
"""

from __future__ import annotations

from functools import lru_cache

from rigspark_gui.core.model import Geometry, TensorGroup

__all__ = [
    "GEMMA_PLE_ARCHS",
    "gemma_block_tensors",
    "gemma_global_tensors",
    "gemma_layer_keys",
    "ple_compute_bytes",
    "unquantized_type",
    "v_width_max",
]

GEMMA_PLE_ARCHS = frozenset({"gemma4", "gemma3n"})

_Tensors = list[tuple[str, tuple[int, ...]]]


def _raw_kv_heads(g: Geometry, il: int) -> int:
    """hparams.n_head_kv(il) as loaded, also on layers that reuse another's cache."""
    return g.n_head_kv_per_layer[il] if g.n_head_kv_per_layer is not None else g.n_head_kv


@lru_cache(maxsize=512)
def v_width_max(g: Geometry) -> int:
    """hparams.n_embd_v_gqa_max(): the widest V row over all layers (0 for MLA)."""
    if g.is_mla:
        return 0
    return max((g.head_dim_v_at(il) * _raw_kv_heads(g, il) for il in range(g.n_layer)), default=0)


def _first_full(g: Geometry) -> int | None:
    return next((il for il in range(g.n_layer) if not g.is_sliding(il)), None)


def _ff(g: Geometry, il: int) -> int:
    return g.n_ff_per_layer[il] if g.n_ff_per_layer is not None else g.n_ff


def gemma_layer_keys(g: Geometry) -> tuple[tuple[bool, int, bool, int], ...]:
    """What makes one block's tensors differ from another's: sliding, KV heads, MoE, and
    (packed into the last field) the FFN width, the rope_freqs owner and layer 0, which
    holds the per-layer projection."""
    first_full = _first_full(g)
    return tuple(
        (
            g.is_sliding(il),
            _raw_kv_heads(g, il),
            g.is_moe_layer(il),
            _ff(g, il) * 4 + 2 * (il == first_full) + (il == 0),
        )
        for il in range(g.n_layer)
    )


def gemma_global_tensors(g: Geometry) -> list[tuple[str, tuple[int, ...], TensorGroup]]:
    """The input tensors beside token_embd: the per-layer token table (host memory) and,
    for Gemma 3n, the AltUp projections (input tensors too: llama.cpp gives tensors
    without a layer number to the input device)."""
    out: list[tuple[str, tuple[int, ...], TensorGroup]] = []
    e = g.n_embd
    if g.architecture == "gemma3n" and g.n_altup > 1:
        shape = (e, e, g.n_altup - 1)
        out += [
            ("altup_proj.weight", shape, TensorGroup.OUTPUT),
            ("altup_unembd_proj.weight", shape, TensorGroup.OUTPUT),
        ]
    if g.n_embd_per_layer:
        table = (g.n_embd_per_layer * g.n_layer, g.n_vocab)
        out.append(("per_layer_token_embd.weight", table, TensorGroup.INPUT))
    return out


def gemma_block_tensors(g: Geometry, il: int) -> _Tensors:
    """Names and ggml shapes of block `il`, in load_tensors order."""
    e, p = g.n_embd, f"blk.{il}."
    hd = g.head_dim_k_at(il)
    kv = _raw_kv_heads(g, il)
    full = not g.is_sliding(il)
    out: _Tensors = []
    if il == 0 and g.n_embd_per_layer:
        # created with layer index 0: they live on layer 0's device
        out += [
            ("per_layer_model_proj.weight", (e, g.n_embd_per_layer * g.n_layer)),
            ("per_layer_proj_norm.weight", (g.n_embd_per_layer,)),
        ]
    out += [
        (p + "attn_norm.weight", (e,)),
        (p + "attn_q.weight", (e, hd * g.n_head)),
        (p + "attn_k.weight", (e, hd * kv)),
    ]
    if not (g.attention_k_eq_v and full):
        out.append((p + "attn_v.weight", (e, hd * kv)))
    out += [
        (p + "attn_output.weight", (hd * g.n_head, e)),
        (p + "attn_q_norm.weight", (hd,)),
        (p + "attn_k_norm.weight", (hd,)),
        (p + "post_attention_norm.weight", (e,)),
    ]
    if g.architecture == "gemma4":
        out.append((p + "layer_output_scale.weight", (1,)))
        if il == _first_full(g):  # one tensor for every full layer (TENSOR_DUPLICATED)
            out.append(("rope_freqs.weight", (hd // 2,)))
    ff = _ff(g, il)
    out += [
        (p + "ffn_norm.weight", (e,)),
        (p + "ffn_gate.weight", (e, ff)),
        (p + "ffn_up.weight", (e, ff)),
        (p + "ffn_down.weight", (ff, e)),
        (p + "post_ffw_norm.weight", (e,)),
    ]
    if g.is_moe_layer(il):
        n, f = g.n_expert, g.n_ff_expert
        out += [
            (p + "ffn_gate_inp.weight", (e, n)),
            (p + "ffn_gate_inp.scale", (e,)),
            (p + "pre_ffw_norm_2.weight", (e,)),
            (p + "post_ffw_norm_1.weight", (e,)),
            (p + "post_ffw_norm_2.weight", (e,)),
            (p + "ffn_gate_up_exps.weight", (e, 2 * f, n)),
            (p + "ffn_down_exps.weight", (f, e, n)),
            (p + "ffn_down_exps.scale", (n,)),
        ]
    if g.n_embd_per_layer:
        pl = g.n_embd_per_layer
        out += [
            (p + "inp_gate.weight", (e, pl)),
            (p + "proj.weight", (pl, e)),
            (p + "post_norm.weight", (e,)),
        ]
    if g.architecture == "gemma3n":
        a, r = g.n_altup, g.laurel_rank
        out += [
            (p + "altup_correct_coef.weight", (a, a)),
            (p + "altup_correct_scale.weight", (e,)),
            (p + "altup_predict_coef.weight", (a, a * a)),
            (p + "altup_router.weight", (e, a)),
            (p + "altup_router_norm.weight", (e,)),
            (p + "laurel_l.weight", (e, r)),
            (p + "laurel_r.weight", (r, e)),
            (p + "laurel_post_norm.weight", (e,)),
        ]
    return out


# Matrices llama-quantize leaves alone (tensor_allows_quantization: "altup", "laurel",
# "per_layer_model_proj") that the converter does not force to F32: they keep the
# converted file's 16-bit type (conversion/base.py prepare_tensors).
_KEPT_16BIT = (
    "per_layer_model_proj.weight",
    "altup_proj.weight",
    "altup_unembd_proj.weight",
    "altup_router.weight",
    "laurel_l.weight",
    "laurel_r.weight",
)


def unquantized_type(name: str) -> str:
    """The type of a tensor llama-quantize does not quantize: F16 for the 16-bit
    matrices above, F32 for norms, routers, biases and scales."""
    if name.endswith("ffn_gate_tid2eid.weight"):
        return "I32"  # DeepSeek V4's token -> expert routing table
    return "F16" if name.endswith(_KEPT_16BIT) else "F32"


def ple_compute_bytes(g: Geometry, n_tokens: int) -> int:
    """The projected per-layer inputs (f32, n_embd_per_layer x n_layer per token) that every
    layer reads a slice of: alive from the graph's start to the last layer, so a device
    running layers holds them beside its peak (gemma4.cpp project_per_layer_inputs).
    Checked on validation/arch_b11434.json: exact without flash attention; with it the
    projection's own phase can peak higher on small-vocabulary models."""
    return 4 * g.n_embd_per_layer * g.n_layer * n_tokens
