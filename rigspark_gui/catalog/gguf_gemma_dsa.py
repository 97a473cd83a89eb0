"""GGUF metadata of Gemma 4 / Gemma 3n and of DeepSeek sparse attention (DeepSeek V3.2,
GLM-5) to Geometry fields, the way llama.cpp b11434's loaders read them
(src/models/gemma4.cpp, gemma3n.cpp, deepseek32.cpp, glm-dsa.cpp: load_arch_hparams).

- gemma4: `attention.key_length` / `value_length` are the full layers' head dims and
  `*_swa` the sliding ones'; `attention.sliding_window_pattern` flags each layer;
  `attention.shared_kv_layers` trailing layers reuse the cache (n_layer_kv_from_start);
  `embedding_length_per_layer_input` is the per-layer embedding width; a per-layer
  `feed_forward_length` (double-wide MLP) and the dense FFN beside the experts are kept;
  full layers without `attn_v` use K as V.
- gemma3n: a period-5 pattern unless the file says otherwise, the cache of the first 20
  layers reused by the rest, and AltUp / LAuReL / per-layer widths of 4 / 64 / 256 (the
  loader's constants: llama_hparams n_altup, laurel_rank, n_embd_altup).
- deepseek32 / glm-dsa: `attention.indexer.head_count` and `.key_length`; GLM's
  `attention.indexer.types` (or, without it, every layer below a 1M-token context and
  GLM-5.2's built-in table above it) says which layers keep an indexer cache. MTP blocks
  after the trunk (`nextn_predict_layers`) are skipped by the loader unless drafting with
  them (TENSOR_SKIP) and get no KV, but each still counts as a layer slot for -ngl: the
  Geometry keeps them as `n_layer_nextn` and the importer drops their tensors except the
  router bias, which the loader creates without the MTP flags and so reads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rigspark_gui.catalog.gguf_dsv4 import DSV4_ARCHS, dsv4_fields
from rigspark_gui.catalog.gguf_header import RawTensor
from rigspark_gui.catalog.gguf_hybrid import trunk_layers

if TYPE_CHECKING:  # gguf_geometry calls in here
    from rigspark_gui.catalog.gguf_geometry import Metadata

__all__ = ["DSA_ARCHS", "GEMMA_DSA_ARCHS", "MTP_SKIP_ARCHS", "gemma_dsa_fields"]

DSA_ARCHS = frozenset({"deepseek32", "glm-dsa"})
GEMMA_DSA_ARCHS = frozenset({"gemma4", "gemma3n"}) | DSA_ARCHS | DSV4_ARCHS  # V4: gguf_dsv4.py
# loaders that skip their MTP blocks unless asked to draft with them (TENSOR_SKIP on every
# tensor of the block in deepseek2.cpp and glm4-moe.cpp; all but the router bias in the
# DSA loaders) and keep them out of the main context's KV cache
MTP_SKIP_ARCHS = frozenset({"deepseek2", "glm4moe"}) | DSA_ARCHS

_GEMMA3N_PERIOD = 5
_GEMMA3N_KV_LAYERS = 20  # hparams.n_layer_kv_from_start, hard-coded by the loader
_GEMMA3N_ALTUP, _GEMMA3N_LAUREL, _GEMMA3N_PLE = 4, 64, 256
_GLM52_CONTEXT = 1048576  # from here the loader assumes GLM-5.2's indexer table
_ATTN_V = re.compile(r"^blk\.(\d+)\.attn_v\.weight$")


def _glm52_indexer_layers(n_layer: int) -> list[int]:
    """GLM_5_2_DEFAULT_INDEXER_TYPES (src/models/glm-dsa.cpp): layers 0 and 1, then every
    fourth from 2."""
    return [il for il in range(n_layer) if il < 2 or (il - 2) % 4 == 0]


def gemma_dsa_fields(
    m: Metadata, arch: str, fields: dict[str, Any], tensors: dict[str, RawTensor]
) -> dict[str, Any]:
    """`fields` (read as for any architecture) completed for `arch`."""
    p = arch + "."
    n_layer = fields["n_layer"]
    if arch in DSV4_ARCHS:
        return dsv4_fields(m, arch, fields)
    if arch in ("gemma4", "gemma3n"):
        ff = m.int_or_layers(p + "feed_forward_length", n_layer, 0)
        if isinstance(ff, list):
            fields["n_ff"] = max(ff)
            fields["n_ff_per_layer"] = tuple(ff) if len(set(ff)) > 1 else None
        else:
            fields["n_ff"] = ff  # Gemma 4 MoE: a dense FFN beside the experts
        k_swa = m.integer(p + "attention.key_length_swa", 0)
        v_swa = m.integer(p + "attention.value_length_swa", 0)
        if k_swa and k_swa != fields["head_dim_k"]:
            fields["head_dim_k_swa"] = k_swa
        if v_swa and v_swa != fields["head_dim_v"]:
            fields["head_dim_v_swa"] = v_swa
    if arch == "gemma4":
        shared = m.integer(p + "attention.shared_kv_layers", 0)
        if shared:
            fields["n_layer_kv_from_start"] = n_layer - shared
        fields["n_embd_per_layer"] = m.integer(p + "embedding_length_per_layer_input", 0)
        with_v = {int(mt[1]) for name in tensors if (mt := _ATTN_V.match(name))}
        full = [il for il in range(n_layer) if not _sliding(fields, il)]
        fields["attention_k_eq_v"] = bool(full) and not any(il in with_v for il in full)
    elif arch == "gemma3n":
        if fields["swa_pattern"] is None:
            window = m.integer(p + "attention.sliding_window", 0)
            if window:
                fields["sliding_window"], fields["swa_pattern"] = window, _GEMMA3N_PERIOD
        fields["n_layer_kv_from_start"] = _GEMMA3N_KV_LAYERS
        fields["n_altup"] = _GEMMA3N_ALTUP
        fields["laurel_rank"] = _GEMMA3N_LAUREL
        fields["n_embd_per_layer"] = _GEMMA3N_PLE
    if arch in MTP_SKIP_ARCHS:
        # the MTP blocks stay placement slots (-ngl counts them) without KV or weights
        # (read_geometry has already given them no KV heads)
        trunk = trunk_layers(m, arch)
        fields["n_layer_nextn"] = n_layer - trunk
    if arch in DSA_ARCHS:
        fields["indexer_n_head"] = m.integer(p + "attention.indexer.head_count", 0)
        fields["indexer_head_size"] = m.integer(p + "attention.indexer.key_length", 0)
    if arch == "glm-dsa":
        trunk = n_layer - fields["n_layer_nextn"]
        fields["indexer_layers"] = _glm_indexer_layers(m, p, trunk, fields["context_length"])
    return fields


def _sliding(fields: dict[str, Any], il: int) -> bool:
    period = fields.get("swa_pattern") or 0
    return period > 1 and il % period < period - 1


def _glm_indexer_layers(m: Metadata, p: str, n_layer: int, ctx: int) -> tuple[int, ...] | None:
    flags = m.int_or_layers(p + "attention.indexer.types", n_layer, -1)
    if isinstance(flags, list):
        layers = [il for il, f in enumerate(flags) if f]
    elif flags >= 0:
        layers = list(range(n_layer)) if flags else []
    elif ctx < _GLM52_CONTEXT:
        return None  # GLM-5 / 5.1: every layer
    else:
        layers = _glm52_indexer_layers(n_layer)
    return None if len(layers) == n_layer else tuple(layers)
