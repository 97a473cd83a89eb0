"""Buffer lines users posted from llama.cpp for the 2026 architectures, reproduced.

Each case quotes the lines of a published log (issue or pull request thread, cited by
URL), names the catalog entry of the model it loaded and the settings the log states,
and asserts that RigSpark's figure for that buffer equals the logged one to the log's
precision: llama.cpp prints MiB with two decimals, so within 0.005 MiB.

The logs come from builds other than b11434; only lines whose allocation rule b11434
shares are reproduced here. A log of a pre-merge DeepSeek V4 branch (its compressor
states in a llama_memory_recurrent, ggml-org/llama.cpp#22319) is not: b11434 keeps them
in llama_kv_cache_dsv4's own state buffers (src/llama-kv-cache-dsv4.cpp).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.core.memory import (
    kv_bytes_per_layer,
    output_buffer_bytes,
    state_bytes_per_layer,
    state_rows,
)
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.settings import PlanSettings

MIB = 1 << 20
HALF_CENT = 0.005  # half the last printed digit of "%.2f MiB"
GEOMETRY = {e.id: e.geometry for e in load_catalog(updates=False).entries}


@dataclass(frozen=True)
class Logged:
    """One buffer line: what it measures, its figure in MiB, and the run's settings."""

    name: str
    url: str
    model_id: str
    # kv: attention K+V of every layer; kv_swa / kv_full: the iSWA halves; kv_raw: the
    # DeepSeek V4 raw window cache alone; rs / rs_r / rs_s: recurrent state, total or its
    # conv (R) or SSM (S) part; output: the logits buffer
    kind: str
    mib: float
    settings: PlanSettings


def _settings(
    ctx: int, seq: int = 1, kv: str = "f16", ubatch: int = 512, unified: bool = False
) -> PlanSettings:
    t = KvCacheType(kv)
    return PlanSettings(
        context=ctx, parallel=seq, kv_k=t, kv_v=t, flash_attn=True, n_ubatch=ubatch,
        kv_unified=unified,
    )  # fmt: skip


# JamePeng/llama-cpp-python#78: Qwen3.5-9B (`print_info: general.name = Qwen3.5-9B`,
# 8.95 B params) on one GPU, one sequence; the state is context-independent:
#   llama_memory_recurrent:      CUDA0 RS buffer size =    50.25 MiB
#   llama_memory_recurrent: size =   50.25 MiB (     1 cells,  32 layers,  1 seqs),
#       R (f32):    2.25 MiB, S (f32):   48.00 MiB
_QWEN35_9B = "https://github.com/JamePeng/llama-cpp-python/issues/78"

# ggml-org/llama.cpp#23792 (turn 6): an unsloth qwen35 GGUF with block_count 64,
# embedding_length 5120, head_count 24, head_count_kv 4 (Qwen3.6-27B's geometry), two
# sequences, split over the tensor-parallel Meta() device (so only the size= totals,
# not the per-device buffer, are comparable):
#   llama_memory_recurrent: size =  299.25 MiB (     2 cells,  64 layers,  2 seqs
#       0 rs_seq), R (f32):   11.25 MiB, S (f32):  288.00 MiB
# The same thread (turn 10), three sequences on a 65-slot file whose slot 64 (the MTP
# block) is skipped; its 48 recurrent layers of 10240 conv channels and 48 value heads
# are the 27B's:
#   llama_memory_recurrent: size =  448.88 MiB (     3 cells,  65 layers,  3 seqs
#       0 rs_seq), R (f32):   16.88 MiB, S (f32):  432.00 MiB
_TP_QKV = "https://github.com/ggml-org/llama.cpp/pull/23792"

# lmstudio-ai/lmstudio-bug-tracker#1862: Qwen3.6-27B at 262144 context, LM Studio's four
# parallel predictions on one unified stream ("4/1 seqs"); the K/V types are cut from
# the excerpt, f16 being the default:
#   llama_kv_cache: size = 16384.00 MiB (262144 cells, 16 layers, 4/1 seqs)
#   llama_memory_recurrent: size = 598.50 MiB (4 cells, 64 layers, 4 seqs)
_LMS_HYBRID = "https://github.com/lmstudio-ai/lmstudio-bug-tracker/issues/1862"

# ggml-org/llama.cpp#17609: gpt-oss (the <|return|> / <|call|> logit biases) with 12
# sliding layers, i.e. gpt-oss-20b's 24 blocks; `setting dry_penalty_last_n to ctx_size
# = 4096`, default n_ubatch 512 (128 + 512 -> 768 cells):
#   llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells
#   llama_kv_cache:      Metal KV buffer size =    18.00 MiB
#   llama_kv_cache: size =   18.00 MiB (   768 cells,  12 layers,  1/1 seqs),
#       K (f16):    9.00 MiB, V (f16):    9.00 MiB
_GPT_OSS = "https://github.com/ggml-org/llama.cpp/pull/17609"

# ggml-org/llama.cpp#27680: DeepSeek-V4-Flash-0731 (deepseek4, block_count 43), bf16
# cache, one sequence:
#   llama_context: n_outputs_max         = 1
#   llama_context: n_ctx_seq (64000) < n_ctx_train (1048576) -- ...
#   llama_context:  CUDA_Host  output buffer size =     0.49 MiB
#   llama_kv_cache_dsv4: creating DSV4 raw KV cache
#   llama_kv_cache_iswa: creating non-SWA KV cache, size = 64000 cells
#   llama_kv_cache: size =    0.00 MiB ( 64000 cells,   0 layers,  1/1 seqs),
#       K (bf16):    0.00 MiB, V (bf16):    0.00 MiB
#   llama_kv_cache_iswa: creating     SWA KV cache, size = 4352 cells
#   llama_kv_cache:      CUDA0 KV buffer size =   182.75 MiB
#   llama_kv_cache: size =  182.75 MiB (  4352 cells,  43 ...
# n_ubatch is not in the excerpt: 4352 = GGML_PAD(128 + n_ubatch, 256) holds for
# n_ubatch 3969..4224, so 4096 is taken (the other figures do not depend on it).
_DSV4 = "https://github.com/ggml-org/llama.cpp/issues/27680"

CASES = [
    Logged("qwen3.5-9b RS", _QWEN35_9B, "qwen3.5-9b", "rs", 50.25, _settings(4096)),
    Logged("qwen3.5-9b R", _QWEN35_9B, "qwen3.5-9b", "rs_r", 2.25, _settings(4096)),
    Logged("qwen3.5-9b S", _QWEN35_9B, "qwen3.5-9b", "rs_s", 48.00, _settings(4096)),
    Logged("qwen3.6-27b RS 2 seqs", _TP_QKV, "qwen3.6-27b", "rs", 299.25, _settings(4096, 2)),
    Logged("qwen3.6-27b R 2 seqs", _TP_QKV, "qwen3.6-27b", "rs_r", 11.25, _settings(4096, 2)),
    Logged("qwen3.6-27b S 2 seqs", _TP_QKV, "qwen3.6-27b", "rs_s", 288.00, _settings(4096, 2)),
    Logged("qwen3.6-27b RS 3 seqs", _TP_QKV, "qwen3.6-27b", "rs", 448.88, _settings(4096, 3)),
    Logged("qwen3.6-27b R 3 seqs", _TP_QKV, "qwen3.6-27b", "rs_r", 16.88, _settings(4096, 3)),
    Logged("qwen3.6-27b S 3 seqs", _TP_QKV, "qwen3.6-27b", "rs_s", 432.00, _settings(4096, 3)),
    Logged(
        "qwen3.6-27b KV 262144 unified", _LMS_HYBRID, "qwen3.6-27b", "kv", 16384.00,
        _settings(262144, 4, unified=True),
    ),
    Logged(
        "qwen3.6-27b RS 4 seqs", _LMS_HYBRID, "qwen3.6-27b", "rs", 598.50,
        _settings(262144, 4, unified=True),
    ),
    Logged("gpt-oss-20b SWA KV", _GPT_OSS, "gpt-oss-20b", "kv_swa", 18.00, _settings(4096)),
    Logged(
        "deepseek-v4-flash raw window KV", _DSV4, "deepseek-v4-flash", "kv_raw", 182.75,
        _settings(64000, kv="bf16", ubatch=4096),
    ),
    Logged(
        "deepseek-v4-flash output", _DSV4, "deepseek-v4-flash", "output", 0.49,
        _settings(64000, kv="bf16", ubatch=4096),
    ),
]  # fmt: skip


def _attention_kv(g: Geometry, s: PlanSettings, sliding: bool | None) -> int:
    """K+V bytes of the attention layers (the recurrent state taken out), of one iSWA
    half when `sliding` is given."""
    per_layer = zip(kv_bytes_per_layer(g, s), state_bytes_per_layer(g, s), strict=True)
    return sum(
        kv - state
        for il, (kv, state) in enumerate(per_layer)
        if sliding is None or g.is_sliding(il) == sliding
    )


def rigspark_bytes(case: Logged) -> int:
    g, s = GEOMETRY[case.model_id], case.settings
    rows = state_rows(g, s.parallel) * len(g.recurrent_layers)
    if case.kind == "kv":
        return _attention_kv(g, s, None)
    if case.kind in ("kv_swa", "kv_full"):
        return _attention_kv(g, s, case.kind == "kv_swa")
    if case.kind == "kv_raw":  # the window cache alone: no compressed caches or states
        assert g.compress_ratios is not None
        return sum(kv_bytes_per_layer(replace(g, compress_ratios=(0,) * g.n_layer), s))
    if case.kind == "rs":
        return sum(state_bytes_per_layer(g, s))
    if case.kind == "rs_r":
        return 4 * g.recurrent_r_values * rows
    if case.kind == "rs_s":
        return 4 * g.recurrent_s_values * rows
    assert case.kind == "output"
    return output_buffer_bytes(g, s)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_logged_buffer_is_reproduced(case: Logged) -> None:
    got = rigspark_bytes(case) / MIB
    assert abs(got - case.mib) < HALF_CENT, f"{case.url}: RigSpark {got:.4f} MiB"


def test_the_cases_span_the_new_architectures() -> None:
    archs = {GEOMETRY[c.model_id].architecture for c in CASES}
    assert archs == {"qwen35", "gpt-oss", "deepseek4"}
    assert {c.kind for c in CASES} >= {"kv", "kv_swa", "kv_raw", "rs", "output"}


def test_the_cell_counts_the_logs_print() -> None:
    """The cells behind the figures: gpt-oss-20b's window of 768 over 12 sliding layers,
    DeepSeek V4's raw window of 4352 over 43 layers (K only, 512 bf16 values a cell)."""
    gpt = next(c for c in CASES if c.model_id == "gpt-oss-20b")
    g = GEOMETRY["gpt-oss-20b"]
    sliding = [il for il in range(g.n_layer) if g.is_sliding(il)]
    row = g.head_dim_k * g.kv_heads(sliding[0]) * 2 * 2  # K and V, f16
    assert len(sliding) == 12 and rigspark_bytes(gpt) == 768 * 12 * row
    dsv4 = next(c for c in CASES if c.kind == "kv_raw")
    assert rigspark_bytes(dsv4) == 4352 * 43 * 512 * 2


def test_a_wrong_sequence_count_misses_the_state_line() -> None:
    """The state lines pin the sequence count: one sequence fewer misses by a whole
    sequence's state (149.62 MiB for the 27B)."""
    case = next(c for c in CASES if c.name == "qwen3.6-27b RS 3 seqs")
    fewer = replace(case, settings=replace(case.settings, parallel=2))
    assert abs(rigspark_bytes(fewer) / MIB - case.mib) > 100
