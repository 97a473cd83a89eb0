"""KV cache bytes exactly as llama.cpp allocates them (src/llama-kv-cache.cpp).

Per layer with KV: [row(type_k, head_dim_k * kv_heads) + row(type_v, head_dim_v * kv_heads)]
* kv_cells. llama.cpp's C API and llama-cli keep one stream per sequence (kv_unified off,
llama_context_default_params): n_ctx is padded to 256, split evenly over the n_seq
streams and each share padded to 256 again (src/llama-context.cpp: `n_ctx_seq =
GGML_PAD(n_ctx / n_seq_max, 256)`), so kv_cells = n_seq * pad256(pad256(context) / n_seq)
- 1024 cells, not 512, for a 512 context with 4 sequences. Sliding-window layers hold
pad256(min(n_ctx_seq, window + n_ubatch)) per stream unless --swa-full
(src/llama-kv-cache-iswa.cpp: `GGML_PAD(std::min(size_base, n_swa*(unified ? n_seq_max : 1)
+ n_ubatch), 256)`). With a unified cache (llama-server's automatic 4 slots) there is one
stream of pad256(context) cells and the window term is window * n_seq + n_ubatch. MLA
layers keep only the latent K (kv_lora_rank + rope dims, one head). vLLM pages of 16
tokens instead.

Recurrent layers of hybrid models (Gated DeltaNet, Mamba-2, short convolutions) hold no
KV: each holds an f32 conv state r and recurrent state s (hparams.n_embd_r/n_embd_s) of
max(1, n_seq_max) x (1 + n_rs_seq) rows (src/llama-memory-recurrent.cpp), whatever the
context and the cache type. "KV" below is the attention KV plus that state (what a
device holds for context); `state_bytes_per_layer` is the state alone.
"""

from __future__ import annotations

from functools import lru_cache

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.memory.arch_dsa import dsa_indexer_row_bytes
from rigspark_gui.core.memory.arch_dsv4 import (
    DSV4_ARCHS,
    dsv4_layer_kv_bytes,
    dsv4_raw_row_bytes,
)
from rigspark_gui.core.memory.arch_gemma4 import v_width_max
from rigspark_gui.core.memory.arch_hybrid import state_rows
from rigspark_gui.core.memory.arch_kimi import KDA_ARCHS, kimi_kv_refusal
from rigspark_gui.core.model import Geometry, KvCacheType, kv_row_bytes
from rigspark_gui.core.settings import KV_PAD, Backend, PlanSettings

VLLM_BLOCK_TOKENS = 16


def pad_to(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def kv_streams(s: PlanSettings, unified: bool = False) -> int:
    """KV streams llama.cpp allocates: one per sequence unless the cache is unified."""
    return 1 if unified or s.kv_unified or s.backend is Backend.VLLM else s.parallel


def kv_cells_per_stream(g: Geometry, layer: int, s: PlanSettings, unified: bool = False) -> int:
    """Cells one stream of `layer` holds: the n_kv an attention over it can span."""
    if s.backend is Backend.VLLM:
        return pad_to(s.context, VLLM_BLOCK_TOKENS) * s.parallel
    n_ctx = pad_to(s.context, KV_PAD)
    n_stream = kv_streams(s, unified)
    per_stream = pad_to(n_ctx // n_stream, KV_PAD)
    if g.is_sliding(layer) and not s.swa_full and g.sliding_window is not None:
        window_seqs = s.parallel if unified or s.kv_unified else 1
        return pad_to(min(per_stream, g.sliding_window * window_seqs + s.n_ubatch), KV_PAD)
    return per_stream


@lru_cache(maxsize=512)
def attention_kinds(g: Geometry) -> tuple[int, ...]:
    """The first layer of each attention kind (sliding window or full): a stream's cells
    depend on the layer through its kind alone."""
    first: dict[bool, int] = {}
    for il in range(g.n_layer):
        first.setdefault(g.is_sliding(il), il)
        if len(first) == 2:
            break
    return tuple(first.values())


def kv_cells(g: Geometry, layer: int, s: PlanSettings, unified: bool = False) -> int:
    """Cells the cache of `layer` holds, over all sequences (all streams)."""
    return kv_cells_per_stream(g, layer, s, unified) * kv_streams(s, unified)


def kv_row_pair_bytes(
    g: Geometry, layer: int, k: KvCacheType, v: KvCacheType, v_trans: bool = False
) -> int:
    """K plus V bytes of one cell of one layer (0 for layers without KV). Head dims are
    the layer's own (Gemma 4's sliding layers differ); a DSA model adds its indexer key.
    `v_trans` (no flash attention): llama.cpp stores V transposed with every layer's row
    as wide as the widest layer's (n_embd_v_gqa_max, src/llama-kv-cache.cpp)."""
    if g.architecture in KDA_ARCHS and (why := kimi_kv_refusal(g, k, v)):
        raise InvalidSettingsError(why)  # llama.cpp refuses the context
    heads = g.kv_heads(layer)
    if heads == 0 or not g.owns_kv(layer):  # recurrent, KV-less, NextN or shared-KV layers
        return 0
    if g.architecture in DSV4_ARCHS:  # the raw window's K (compressed caches: layer_kv_bytes)
        return dsv4_raw_row_bytes(g, layer, k)
    if g.is_mla:
        latent = (g.kv_lora_rank or 0) + (g.rope_head_dim or 0)
        return kv_row_bytes(k, latent) + dsa_indexer_row_bytes(g, layer, k)
    v_width = v_width_max(g) if v_trans else g.head_dim_v_at(layer) * heads
    return kv_row_bytes(k, g.head_dim_k_at(layer) * heads) + kv_row_bytes(v, v_width)


def recurrent_state_bytes(g: Geometry, layer: int, s: PlanSettings, n_rs_seq: int = 0) -> int:
    """f32 r and s state of `layer` for every sequence (0 on attention layers);
    `n_rs_seq` the rollback snapshots a drafting run adds per sequence."""
    if layer not in g.recurrent_layers:
        return 0
    rows = state_rows(g, s.parallel, n_rs_seq)
    return (g.recurrent_r_values + g.recurrent_s_values) * 4 * rows


def state_bytes_per_layer(g: Geometry, s: PlanSettings) -> tuple[int, ...]:
    """The recurrent state alone, per layer (0 on attention layers)."""
    if not g.recurrent_layers:
        return (0,) * g.n_layer
    return tuple(recurrent_state_bytes(g, il, s) for il in range(g.n_layer))


def state_total_bytes(g: Geometry, s: PlanSettings) -> int:
    return sum(state_bytes_per_layer(g, s))


def layer_kv_bytes(g: Geometry, layer: int, s: PlanSettings) -> int:
    if g.architecture in DSV4_ARCHS and s.backend is not Backend.VLLM:
        return dsv4_layer_kv_bytes(g, layer, s)  # window, compressed caches and states
    v_trans = not s.flash_attn and s.backend is not Backend.VLLM
    return kv_row_pair_bytes(g, layer, s.kv_k, s.kv_v, v_trans) * kv_cells(
        g, layer, s
    ) + recurrent_state_bytes(g, layer, s)


def kv_bytes_per_layer(g: Geometry, s: PlanSettings) -> tuple[int, ...]:
    return tuple(layer_kv_bytes(g, il, s) for il in range(g.n_layer))


def kv_total_bytes(g: Geometry, s: PlanSettings) -> int:
    return sum(kv_bytes_per_layer(g, s))


def kv_bytes_per_token(g: Geometry, k: KvCacheType, v: KvCacheType) -> int:
    """K+V bytes one token adds to full-attention layers (sliding layers count too)."""
    return sum(kv_row_pair_bytes(g, il, k, v) for il in range(g.n_layer))
