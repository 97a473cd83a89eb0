"""KV figures computed by hand from llama.cpp's allocation rule."""

from dataclasses import replace

import pytest

from rigspark_gui.core.memory import (
    kv_bytes_per_layer,
    kv_bytes_per_token,
    kv_cells,
    kv_total_bytes,
)
from rigspark_gui.core.model.ggml_types import KvCacheType as K
from rigspark_gui.core.model.model_spec import Geometry
from rigspark_gui.core.settings import Backend, PlanSettings
from tests.conftest import LLAMA_31_8B

KIB = 1024

# Qwen/Qwen2-7B-Instruct/config.json
QWEN2_7B = Geometry(
    architecture="qwen2",
    n_layer=28,
    n_embd=3584,
    n_head=28,
    n_head_kv=4,
    head_dim_k=128,
    head_dim_v=128,
    n_vocab=152064,
    n_ff=18944,
    context_length=32768,
)
# google/gemma-2-9b-it/config.json: sliding_window 4096, every other layer
GEMMA2_9B = Geometry(
    architecture="gemma2",
    n_layer=42,
    n_embd=3584,
    n_head=16,
    n_head_kv=8,
    head_dim_k=256,
    head_dim_v=256,
    n_vocab=256000,
    n_ff=14336,
    tied_embeddings=True,
    sliding_window=4096,
    swa_pattern=2,
    context_length=8192,
)
# deepseek-ai/DeepSeek-V2-Lite-Chat/config.json: MLA, kv_lora_rank 512, rope 64
DEEPSEEK_V2_LITE = Geometry(
    architecture="deepseek2",
    n_layer=27,
    n_embd=2048,
    n_head=16,
    n_head_kv=16,
    head_dim_k=192,
    head_dim_v=128,
    n_vocab=102400,
    n_ff=10944,
    n_expert=64,
    n_expert_used=6,
    n_ff_expert=1408,
    n_shared_expert=2,
    n_ff_shared_expert=2816,
    n_dense_lead=1,
    kv_lora_rank=512,
    rope_head_dim=64,
    context_length=163840,
)


@pytest.mark.parametrize(
    ("k", "v", "kib"), [(K.F16, K.F16, 128), (K.Q8_0, K.Q8_0, 68), (K.Q4_0, K.Q4_0, 36)]
)
def test_llama_31_8b_bytes_per_token(k: K, v: K, kib: int) -> None:
    assert kv_bytes_per_token(LLAMA_31_8B, k, v) == kib * KIB


def test_qwen2_7b_is_56_kib_per_token() -> None:
    assert kv_bytes_per_token(QWEN2_7B, K.F16, K.F16) == 56 * KIB


def test_mixed_k_and_v() -> None:
    # K q8_0 (1088 B per 1024 values) + V q4_0 (576 B), 32 layers
    assert kv_bytes_per_token(LLAMA_31_8B, K.Q8_0, K.Q4_0) == (1088 + 576) * 32


def test_context_is_padded_to_256_cells() -> None:
    s = PlanSettings(context=1000)
    assert kv_cells(LLAMA_31_8B, 0, s) == 1024
    assert kv_total_bytes(LLAMA_31_8B, s) == 128 * KIB * 1024
    assert kv_total_bytes(LLAMA_31_8B, PlanSettings(context=1024)) == 128 * KIB * 1024
    assert kv_total_bytes(LLAMA_31_8B, PlanSettings(context=1025)) == 128 * KIB * 1280


def test_sliding_window_layers_hold_window_plus_ubatch() -> None:
    s = PlanSettings(context=8192)
    per_layer = kv_bytes_per_layer(GEMMA2_9B, s)
    row = 2 * 8 * 256 * 2  # K and V, 8 heads of 256, f16
    # layer 0 slides (0 mod 2 < 1): pad256(4096 * 1 + 512) = 4608 cells
    assert per_layer[0] == row * 4608
    assert per_layer[1] == row * 8192
    assert kv_total_bytes(GEMMA2_9B, s) == 21 * row * 4608 + 21 * row * 8192


def test_swa_full_sizes_every_layer_at_the_context() -> None:
    s = PlanSettings(context=8192, swa_full=True)
    assert kv_total_bytes(GEMMA2_9B, s) == 42 * 2 * 8 * 256 * 2 * 8192


def test_window_grows_with_parallel_sequences() -> None:
    s = PlanSettings(context=16384, parallel=2)
    g = replace(GEMMA2_9B, context_length=16384)
    # One stream per sequence (kv_unified off, the C API default): each stream's sliding
    # layers hold pad256(min(16384 / 2, 4096 + 512)) = 4608 cells, two streams 9216.
    # llama.cpp src/llama-kv-cache-iswa.cpp: size_swa = GGML_PAD(std::min(size_base,
    # hparams.n_swa*(unified ? n_seq_max : 1) + n_ubatch), 256), with size_base the
    # per-stream n_ctx_seq (src/llama-context.cpp: n_ctx_seq = GGML_PAD(n_ctx / n_seq_max,
    # 256)). Measured: validation/cases.json, gemma2-swa with n_seq 2 and 4.
    assert kv_cells(g, 0, s) == 9216
    # a unified cache (llama-server's automatic slots) shares one window term: 4096 * 2 + 512
    assert kv_cells(g, 0, s, unified=True) == 8704


def test_streams_split_the_context_and_pad_each_share() -> None:
    # 512 cells over 4 streams: 128 per stream, padded to 256 each -> 1024 in all
    # (src/llama-context.cpp: n_ctx = n_ctx_seq * n_seq_max after padding n_ctx_seq)
    assert kv_cells(LLAMA_31_8B, 0, PlanSettings(context=512, parallel=4)) == 1024
    assert kv_cells(LLAMA_31_8B, 0, PlanSettings(context=512, parallel=4), unified=True) == 512


def test_small_context_caps_sliding_layers() -> None:
    assert kv_cells(GEMMA2_9B, 0, PlanSettings(context=512)) == 512


def test_mla_stores_only_the_latent() -> None:
    # 512 latent + 64 rope = 576 f16 values per token per layer, no V
    assert kv_bytes_per_token(DEEPSEEK_V2_LITE, K.F16, K.F16) == 576 * 2 * 27
    assert kv_total_bytes(DEEPSEEK_V2_LITE, PlanSettings(context=4096)) == 576 * 2 * 27 * 4096


def test_layers_without_kv_are_skipped() -> None:
    heads = tuple(0 if i % 4 == 3 else 8 for i in range(32))
    g = replace(LLAMA_31_8B, n_head_kv_per_layer=heads)
    assert kv_bytes_per_token(g, K.F16, K.F16) == 128 * KIB * 24 // 32


def test_recurrent_state_scales_with_sequences_not_context() -> None:
    g = replace(
        LLAMA_31_8B, recurrent_layers=(0, 1), recurrent_r_values=3000, recurrent_s_values=5000
    )
    a = kv_bytes_per_layer(g, PlanSettings(context=4096, parallel=1))
    b = kv_bytes_per_layer(g, PlanSettings(context=65536, parallel=1))
    c = kv_bytes_per_layer(g, PlanSettings(context=4096, parallel=3))
    assert a[0] == b[0] == 8000 * 4
    assert c[0] == 8000 * 4 * 3
    assert a[2] == 4 * KIB * 4096


def test_vllm_pages_of_16_tokens_per_request() -> None:
    s = PlanSettings(context=1000, parallel=2, backend=Backend.VLLM)
    assert kv_cells(LLAMA_31_8B, 0, s) == 1008 * 2


@pytest.mark.parametrize("g", [LLAMA_31_8B, QWEN2_7B, GEMMA2_9B, DEEPSEEK_V2_LITE])
@pytest.mark.parametrize("context", [1, 777, 4096, 8192, 40000])
@pytest.mark.parametrize("parallel", [1, 3])
def test_cached_tables_agree_with_the_layer_walk(g, context, parallel) -> None:
    from rigspark_gui.core.placement import kv_total_fast

    for kv in (K.F16, K.Q8_0, K.Q4_0):  # one shared shape
        s = PlanSettings(context=context, parallel=parallel, kv_k=kv, kv_v=kv, flash_attn=True)
        assert kv_total_fast(g, s) == kv_total_bytes(g, s)


def test_attention_kinds_are_the_first_layer_of_each() -> None:
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.core.memory.kv_cache import attention_kinds

    for spec in load_catalog().specs():
        g = spec.geometry
        kinds = attention_kinds(g)
        assert sorted({g.is_sliding(il) for il in range(g.n_layer)}) == sorted(
            g.is_sliding(il) for il in kinds
        ), spec.id
        assert all(not any(g.is_sliding(j) == g.is_sliding(il) for j in range(il)) for il in kinds)
