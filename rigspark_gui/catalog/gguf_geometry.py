"""GGUF metadata to geometry: typed access to the metadata keys, and llama.cpp's rules
per architecture (src/llama-model.cpp) that turn them and the tensor table into a Geometry:
per-layer head counts, MoE and shared experts, MLA, NextN blocks, sliding-window patterns.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

from gguf import GGUFValueType

from rigspark_gui.catalog.gguf_gemma_dsa import GEMMA_DSA_ARCHS, MTP_SKIP_ARCHS, gemma_dsa_fields
from rigspark_gui.catalog.gguf_header import (
    INT_TYPES,
    MetaValue,
    RawTensor,
    import_error,
)
from rigspark_gui.catalog.gguf_hybrid import HYBRID_ARCHS, hybrid_fields
from rigspark_gui.core.errors import validation_message
from rigspark_gui.core.model import Geometry
from rigspark_gui.formats.model_spec import Geometry as GeometryFile

__all__ = ["Metadata", "read_geometry", "swa_period", "validation_reason"]

_MAX_LAYERS = 4096  # Geometry's bound; checked early because arrays are sized by it
_MAX_INT = 1 << 31

# Sliding-window period each loader in llama.cpp (src/llama-model.cpp) sets with
# hparams.set_swa_pattern(); a `{arch}.attention.sliding_window_pattern` key overrides it.
_SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2, "exaone4": 4}
# Loaders that read the window with a required get_key: llama.cpp refuses the file without it.
_SWA_WINDOW_REQUIRED = frozenset({"gemma3", "cohere2", "gpt-oss"})
_GEMMA2_DEFAULT_WINDOW = 4096  # llama.cpp presets n_swa before the optional key
# Llama 4: chunked attention, 8192-token chunks on 3 of every 4 layers (hard-coded).
_LLAMA4_CHUNK = 8192
_LLAMA4_PERIOD = 4


class Metadata:
    """Typed access to metadata; every failure names the key."""

    def __init__(self, values: dict[str, MetaValue], fname: str) -> None:
        self.values = values
        self.fname = fname

    def fail(self, reason: str) -> NoReturn:
        raise import_error(self.fname, reason)

    def has(self, key: str) -> bool:
        return key in self.values

    def _check_int(self, key: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(f"metadata {key} must be an integer")
        if not 0 <= v < _MAX_INT:
            self.fail(f"metadata {key} = {v} is out of range")
        return v

    def integer(self, key: str, default: int) -> int:
        val = self.values.get(key)
        if val is None:
            return default
        if val.vtype not in INT_TYPES:
            self.fail(f"metadata {key} must be an integer")
        return self._check_int(key, val.value)

    def required_int(self, key: str) -> int:
        if key not in self.values:
            self.fail(f"missing metadata {key}")
        return self.integer(key, 0)

    def int_or_layers(self, key: str, n_layer: int, default: int | list[int]) -> int | list[int]:
        """An integer, or one integer per layer (llama.cpp's get_key_or_arr)."""
        val = self.values.get(key)
        if val is None:
            return default
        if val.vtype != GGUFValueType.ARRAY:
            return self.integer(key, 0)
        if val.length != n_layer or val.value is None or val.item_type not in INT_TYPES:
            self.fail(f"metadata {key} must be an integer or {n_layer} integers, one per layer")
        return [self._check_int(key, v) for v in val.value]

    def text(self, key: str) -> str | None:
        val = self.values.get(key)
        if val is None or val.vtype != GGUFValueType.STRING:
            return None
        return str(val.value)

    def array_length(self, key: str) -> int | None:
        val = self.values.get(key)
        if val is None or val.vtype != GGUFValueType.ARRAY:
            return None
        return val.length

    def swa_layers(self, key: str, n_layer: int) -> int | list[bool] | None:
        """The sliding-window pattern: a period, or one flag per layer (True = sliding)."""
        val = self.values.get(key)
        if val is None:
            return None
        if val.vtype == GGUFValueType.ARRAY:
            if val.length != n_layer or val.value is None:
                self.fail(f"metadata {key} must list one flag per layer")
            if val.item_type == GGUFValueType.BOOL:
                return [bool(v) for v in val.value]
            if val.item_type in INT_TYPES:
                return [self._check_int(key, v) != 0 for v in val.value]
            self.fail(f"metadata {key} must hold booleans")
        return self.integer(key, 0)


def swa_period(flags: list[bool]) -> int | None:
    """The period p with flags[i] == (i % p < p - 1) for every layer, as set_swa_pattern(p)."""
    n = len(flags)
    for p in range(1, n + 2):
        if all(f == (i % p < p - 1) for i, f in enumerate(flags)):
            return p
    return None


# --------------------------------------------------------------------------- geometry


def _tensor_ne(tensors: dict[str, RawTensor], pattern: str, dim: int) -> int:
    rx = re.compile(pattern)
    for name, t in tensors.items():
        if rx.match(name) and len(t.ne) > dim:
            return t.ne[dim]
    return 0


def read_geometry(m: Metadata, arch: str, tensors: dict[str, RawTensor]) -> Geometry:
    """The model's Geometry from its metadata, the way llama.cpp's loader for arch reads it."""
    p = arch + "."
    n_layer = m.required_int(p + "block_count")
    if not 0 < n_layer <= _MAX_LAYERS:
        m.fail(f"metadata {p}block_count = {n_layer} is out of range")
    n_embd = m.required_int(p + "embedding_length")
    if not m.has(p + "attention.head_count"):
        m.fail(f"missing metadata {p}attention.head_count")
    head_raw = m.int_or_layers(p + "attention.head_count", n_layer, 0)
    n_head = max(head_raw) if isinstance(head_raw, list) else head_raw
    kv_raw = m.int_or_layers(p + "attention.head_count_kv", n_layer, head_raw)
    kv_layers = list(kv_raw) if isinstance(kv_raw, list) else None
    n_head_kv = max(kv_layers) if kv_layers else int(kv_raw) if isinstance(kv_raw, int) else 0
    default_dim = n_embd // n_head if n_head else 0
    head_dim_k = m.integer(p + "attention.key_length", default_dim)
    head_dim_v = m.integer(p + "attention.value_length", default_dim)
    context_length = m.required_int(p + "context_length")

    ff_raw = m.int_or_layers(p + "feed_forward_length", n_layer, 0)
    n_ff = max(ff_raw) if isinstance(ff_raw, list) else ff_raw

    n_expert = m.integer(p + "expert_count", 0)
    n_expert_used = m.integer(p + "expert_used_count", 0)
    n_dense_lead = m.integer(p + "leading_dense_block_count", 0)
    moe_every = m.integer(p + "interleave_moe_layer_step", 1) or 1
    n_ff_expert = n_shared = n_ff_shared = 0
    if n_expert:
        # Mixtral-style files carry the expert width as feed_forward_length.
        n_ff_expert = m.integer(p + "expert_feed_forward_length", 0) or n_ff
        has_shexp = any("_shexp" in name for name in tensors)
        n_shared = m.integer(p + "expert_shared_count", 0) or (1 if has_shexp else 0)
        if n_shared:
            n_ff_shared = (
                m.integer(p + "expert_shared_feed_forward_length", 0)
                or _tensor_ne(tensors, r"^blk\.\d+\.ffn_down_shexp\.", 0)
                or n_ff_expert * n_shared
            )
        if n_dense_lead == 0 and moe_every == 1:
            n_ff = 0  # every layer is MoE: feed_forward_length describes no dense layer

    n_vocab = (
        m.integer(p + "vocab_size", 0)
        or m.array_length("tokenizer.ggml.tokens")
        or _tensor_ne(tensors, r"^token_embd\.weight$", 1)
    )
    if not n_vocab:
        m.fail("no vocabulary size (no vocab_size, tokenizer.ggml.tokens or token_embd)")

    # MLA: the current converter writes the per-head dims as key_length_mla/value_length_mla
    # and the latent cache width (kv_lora_rank + rope) as key_length with one KV head. Files
    # without the _mla keys predate it; llama.cpp then caches full per-head K and V.
    kv_lora = m.integer(p + "attention.kv_lora_rank", 0)
    k_mla = m.integer(p + "attention.key_length_mla", 0)
    v_mla = m.integer(p + "attention.value_length_mla", 0)
    kv_lora_rank = q_lora_rank = rope_head_dim = None
    if kv_lora and k_mla and v_mla:
        head_dim_k, head_dim_v = k_mla, v_mla
        kv_lora_rank = kv_lora
        q_lora_rank = m.integer(p + "attention.q_lora_rank", 0) or None
        rope_head_dim = m.integer(p + "rope.dimension_count", 0) or None
        # Logical heads, as config.json states them; the latent is shared by all.
        n_head_kv = n_head
        if kv_layers is not None:
            kv_layers = [n_head if k else 0 for k in kv_layers]

    # MTP / NextN blocks sit at the end of block_count and get no KV cache
    # (llama.cpp: n_layer_kv_from_start = n_layer - nextn_predict_layers).
    nextn = m.integer(p + "nextn_predict_layers", 0)
    if 0 < nextn < n_layer:
        kv_layers = list(kv_layers) if kv_layers is not None else [n_head_kv] * n_layer
        kv_layers[n_layer - nextn :] = [0] * nextn
    if kv_layers is not None and all(k == n_head_kv for k in kv_layers):
        kv_layers = None

    sliding_window, swa_pattern = _sliding_window(m, arch, n_layer)

    fields = dict(
        architecture=arch,
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=n_head,
        n_head_kv=n_head_kv,
        n_head_kv_per_layer=tuple(kv_layers) if kv_layers is not None else None,
        head_dim_k=head_dim_k,
        head_dim_v=head_dim_v,
        n_vocab=n_vocab,
        n_ff=n_ff,
        tied_embeddings="output.weight" not in tensors,
        n_expert=n_expert,
        n_expert_used=n_expert_used,
        n_ff_expert=n_ff_expert,
        n_shared_expert=n_shared,
        n_ff_shared_expert=n_ff_shared,
        n_dense_lead=n_dense_lead,
        moe_every=moe_every,
        sliding_window=sliding_window,
        swa_pattern=swa_pattern,
        kv_lora_rank=kv_lora_rank,
        q_lora_rank=q_lora_rank,
        rope_head_dim=rope_head_dim,
        context_length=context_length,
    )
    if arch in HYBRID_ARCHS:
        fields = hybrid_fields(m, arch, fields)
    if arch in GEMMA_DSA_ARCHS or arch in MTP_SKIP_ARCHS:
        fields = gemma_dsa_fields(m, arch, fields, tensors)
    try:
        geometry: Geometry = GeometryFile.model_validate(fields).to_record()
        return geometry
    except ValueError as exc:  # pydantic's ValidationError, or fields that disagree
        m.fail(f"unusable geometry ({validation_reason(exc)})")


def _sliding_window(m: Metadata, arch: str, n_layer: int) -> tuple[int | None, int | None]:
    window_key = f"{arch}.attention.sliding_window"
    window = m.integer(window_key, 0)
    if arch == "llama4":
        if m.has(window_key) and window == 0:
            return None, None  # llama.cpp: an explicit 0 turns chunked attention off
        return _LLAMA4_CHUNK, _LLAMA4_PERIOD
    if arch == "gemma2" and not m.has(window_key):
        window = _GEMMA2_DEFAULT_WINDOW
    if arch in _SWA_WINDOW_REQUIRED and not m.has(window_key):
        m.fail(f"missing metadata {window_key}")
    pattern_key = f"{arch}.attention.sliding_window_pattern"
    declared = m.swa_layers(pattern_key, n_layer)
    if isinstance(declared, list):
        period = swa_period(declared)
        if period is None:
            m.fail(f"{pattern_key}: sliding layers do not repeat periodically; not supported yet")
    elif declared is not None:
        period = declared
    else:
        # Architectures outside the table ignore a window their loader never reads
        # (Mistral, Qwen2, Phi-3, Starcoder2 have one in their config but run full attention).
        period = _SWA_PERIOD.get(arch, 0)
    if window == 0 or period <= 1:
        return None, None
    return window, period


def validation_reason(exc: ValueError) -> str:
    """A validation error as one line, for a ModelImportError."""
    return " ".join(validation_message(exc).split())
