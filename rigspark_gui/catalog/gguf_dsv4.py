"""GGUF metadata of DeepSeek V4 (`deepseek4`) to Geometry fields, the way llama.cpp
b11434's loader reads them (src/models/deepseek4.cpp: load_arch_hparams) and its
converter writes them (conversion/deepseek.py: DeepseekV4Model.set_gguf_parameters).

- `attention.compress_ratios`: one ratio per layer (0, 4 or 128), at least block_count of
  them (the converter writes the config's list, which also covers the MTP layer; the
  loader refuses a shorter one and any other ratio).
- `attention.sliding_window` (required): every trunk layer slides
  (hparams.set_swa_pattern(0)); the Geometry says so with a period past the last layer.
- `attention.q_lora_rank`, `attention.output_group_count`, `attention.output_lora_rank`,
  `hyper_connection.count`, `hash_layer_count`, `rope.dimension_count`.
- `attention.indexer.head_count` / `.key_length`: the lightning indexer of the ratio-4
  layers, which alone keep its cache.
- `head_count_kv` (1) and `key_length` (head_dim, 512 in V4) are read as for any model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gguf import GGUFValueType

from rigspark_gui.catalog.gguf_header import INT_TYPES

if TYPE_CHECKING:  # gguf_geometry calls in here
    from rigspark_gui.catalog.gguf_geometry import Metadata

__all__ = ["DSV4_ARCHS", "dsv4_fields"]

DSV4_ARCHS = frozenset({"deepseek4"})
_RATIOS = frozenset({0, 4, 128})  # the loader throws on anything else


def _ratios(m: Metadata, key: str, n_layer: int) -> tuple[int, ...]:
    val = m.values.get(key)
    if val is None:
        m.fail(f"missing metadata {key}")
    if val.vtype != GGUFValueType.ARRAY or val.item_type not in INT_TYPES or val.value is None:
        m.fail(f"metadata {key} must be an array of integers")
    if val.length < n_layer:
        m.fail(f"metadata {key} is shorter than block_count ({val.length} < {n_layer})")
    ratios = tuple(int(v) for v in val.value[:n_layer])
    if any(r not in _RATIOS for r in ratios):
        m.fail(f"metadata {key}: only compression ratios 0, 4 and 128 are supported")
    return ratios


def dsv4_fields(m: Metadata, arch: str, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` (read as for any architecture) completed for DeepSeek V4."""
    p = arch + "."
    n_layer = fields["n_layer"]
    window_key = p + "attention.sliding_window"
    if not m.has(window_key):
        m.fail(f"missing metadata {window_key}")
    ratios = _ratios(m, p + "attention.compress_ratios", n_layer)
    csa = tuple(il for il, r in enumerate(ratios) if r == 4)
    fields.update(
        sliding_window=m.required_int(window_key),
        swa_pattern=n_layer + 1,  # i % p < p - 1 for every layer: all of them slide
        q_lora_rank=m.integer(p + "attention.q_lora_rank", 0) or None,
        rope_head_dim=m.integer(p + "rope.dimension_count", 0) or None,
        compress_ratios=ratios,
        hc_mult=m.required_int(p + "hyper_connection.count"),
        o_groups=m.required_int(p + "attention.output_group_count"),
        o_lora_rank=m.required_int(p + "attention.output_lora_rank"),
        n_hash_layers=m.required_int(p + "hash_layer_count"),
        indexer_n_head=m.integer(p + "attention.indexer.head_count", 0),
        indexer_head_size=m.integer(p + "attention.indexer.key_length", 0),
        indexer_layers=None if len(csa) == n_layer else csa,
    )
    # the loader sizes the shared expert n_ff_exp * n_expert_shared
    fields["n_ff_shared_expert"] = fields["n_ff_expert"] * max(fields["n_shared_expert"], 1)
    return fields
