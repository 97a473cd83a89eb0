import gguf
import pytest

from rigspark_gui.core.errors import InvalidModelError, InvalidSettingsError
from rigspark_gui.core.model.ggml_types import (
    GGML_TYPES,
    KvCacheType,
    kv_bits_per_value,
    kv_cache_type,
    kv_row_bytes,
    row_bytes,
    tensor_bytes,
)


def test_block_table_matches_ggml_own_table() -> None:
    # gguf's GGML_QUANT_SIZES is maintained beside ggml itself: every type we know must agree.
    for qtype, (block, size) in gguf.GGML_QUANT_SIZES.items():
        # Q8_1 is a compute-only type; gguf-py still lists its old float layout (40 B), ggml
        # stores two halves since the ds change (ggml-common.h block_q8_1: 36 B).
        if qtype.name in GGML_TYPES and qtype.name != "Q8_1":
            t = GGML_TYPES[qtype.name]
            assert (t.block_size, t.bytes_per_block, t.type_id) == (block, size, qtype.value)


def test_every_design_type_is_present() -> None:
    for name in [
        "F32",
        "F16",
        "BF16",
        "Q8_0",
        "Q5_1",
        "Q5_0",
        "Q4_1",
        "Q4_0",
        "IQ4_NL",
        "MXFP4",
        "Q2_K",
        "Q3_K",
        "Q4_K",
        "Q5_K",
        "Q6_K",
        "IQ4_XS",
    ]:
        assert name in GGML_TYPES


def test_tensor_bytes() -> None:
    assert tensor_bytes("F16", (4096, 128256)) == 4096 * 128256 * 2
    assert tensor_bytes("Q4_K", (4096, 14336)) == 4096 * 14336 // 256 * 144
    assert row_bytes("Q8_0", 1024) == 1088
    with pytest.raises(InvalidModelError, match="block size"):
        row_bytes("Q4_K", 100)


def test_kv_types() -> None:
    assert kv_cache_type("Q8_0") is KvCacheType.Q8_0
    assert kv_row_bytes(KvCacheType.Q4_0, 1024) == 576
    assert kv_row_bytes(KvCacheType.FP8, 1024) == 1024
    assert kv_bits_per_value(KvCacheType.Q8_0) == 8.5
    with pytest.raises(InvalidSettingsError, match="unknown KV cache type 'q3'"):
        kv_cache_type("q3")
    assert KvCacheType.Q4_0.quantized and not KvCacheType.BF16.quantized
