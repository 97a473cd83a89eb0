"""KV cache bytes exactly as llama.cpp allocates them (src/llama-kv-cache.cpp).

Per layer with KV: [row(type_k, head_dim_k * kv_heads) + row(type_v, head_dim_v * kv_heads)]
* kv_cells. kv_cells = context padded to 256 (all sequences together); sliding-window
layers hold only min(that, pad256(window * n_seq + n_ubatch)) unless --swa-full. MLA
layers keep only the latent K (kv_lora_rank + rope dims, one head). Recurrent layers hold
F32 state per sequence, independent of context. vLLM pages of 16 tokens instead.
"""

from __future__ import annotations

from rigspark_gui.core.ggml_types import KvCacheType, kv_row_bytes
from rigspark_gui.core.model_spec import Geometry
from rigspark_gui.core.settings import KV_PAD, Backend, PlanSettings

VLLM_BLOCK_TOKENS = 16


def pad_to(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def kv_cells(g: Geometry, layer: int, s: PlanSettings) -> int:
    """Cells the cache of `layer` holds, over all sequences."""
    if s.backend is Backend.VLLM:
        return pad_to(s.context, VLLM_BLOCK_TOKENS) * s.parallel
    full = pad_to(s.context, KV_PAD)
    if g.is_sliding(layer) and not s.swa_full and g.sliding_window is not None:
        return min(full, pad_to(g.sliding_window * s.parallel + s.n_ubatch, KV_PAD))
    return full


def kv_row_pair_bytes(g: Geometry, layer: int, k: KvCacheType, v: KvCacheType) -> int:
    """K plus V bytes of one cell of one layer (0 for layers without KV)."""
    heads = g.kv_heads(layer)
    if heads == 0:  # recurrent, KV-less or NextN layers
        return 0
    if g.is_mla:
        latent = (g.kv_lora_rank or 0) + (g.rope_head_dim or 0)
        return kv_row_bytes(k, latent)
    return kv_row_bytes(k, g.head_dim_k * heads) + kv_row_bytes(v, g.head_dim_v * heads)


def recurrent_state_bytes(g: Geometry, layer: int, s: PlanSettings) -> int:
    if layer not in g.recurrent_layers:
        return 0
    return (g.recurrent_r_values + g.recurrent_s_values) * 4 * s.parallel


def layer_kv_bytes(g: Geometry, layer: int, s: PlanSettings) -> int:
    return kv_row_pair_bytes(g, layer, s.kv_k, s.kv_v) * kv_cells(
        g, layer, s
    ) + recurrent_state_bytes(g, layer, s)


def kv_bytes_per_layer(g: Geometry, s: PlanSettings) -> tuple[int, ...]:
    return tuple(layer_kv_bytes(g, il, s) for il in range(g.n_layer))


def kv_total_bytes(g: Geometry, s: PlanSettings) -> int:
    return sum(kv_bytes_per_layer(g, s))


def kv_bytes_per_token(g: Geometry, k: KvCacheType, v: KvCacheType) -> int:
    """K+V bytes one token adds to full-attention layers (sliding layers count too)."""
    return sum(kv_row_pair_bytes(g, il, k, v) for il in range(g.n_layer))
