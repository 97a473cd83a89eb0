"""The ggml tensor type table and the KV cache types.

Block sizes and bytes per block follow ggml's type traits (ggml/src/ggml.c,
ggml/src/ggml-common.h); tests cross-check them against the `gguf` package's
GGML_QUANT_SIZES. Tensor bytes = elements / block_size * bytes_per_block.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from rigspark_gui.core.errors import InvalidModelError, InvalidSettingsError


class GgmlType(NamedTuple):
    name: str
    type_id: int
    block_size: int
    bytes_per_block: int

    @property
    def bits_per_weight(self) -> float:
        return self.bytes_per_block * 8 / self.block_size

    @property
    def quantized(self) -> bool:
        return self.block_size > 1


_TYPES = [
    GgmlType("F32", 0, 1, 4),
    GgmlType("F16", 1, 1, 2),
    GgmlType("Q4_0", 2, 32, 18),
    GgmlType("Q4_1", 3, 32, 20),
    GgmlType("Q5_0", 6, 32, 22),
    GgmlType("Q5_1", 7, 32, 24),
    GgmlType("Q8_0", 8, 32, 34),
    GgmlType("Q8_1", 9, 32, 36),
    GgmlType("Q2_K", 10, 256, 84),
    GgmlType("Q3_K", 11, 256, 110),
    GgmlType("Q4_K", 12, 256, 144),
    GgmlType("Q5_K", 13, 256, 176),
    GgmlType("Q6_K", 14, 256, 210),
    GgmlType("Q8_K", 15, 256, 292),
    GgmlType("IQ2_XXS", 16, 256, 66),
    GgmlType("IQ2_XS", 17, 256, 74),
    GgmlType("IQ3_XXS", 18, 256, 98),
    GgmlType("IQ1_S", 19, 256, 50),
    GgmlType("IQ4_NL", 20, 32, 18),
    GgmlType("IQ3_S", 21, 256, 110),
    GgmlType("IQ2_S", 22, 256, 82),
    GgmlType("IQ4_XS", 23, 256, 136),
    GgmlType("I8", 24, 1, 1),
    GgmlType("I16", 25, 1, 2),
    GgmlType("I32", 26, 1, 4),
    GgmlType("I64", 27, 1, 8),
    GgmlType("F64", 28, 1, 8),
    GgmlType("IQ1_M", 29, 256, 56),
    GgmlType("BF16", 30, 1, 2),
    GgmlType("TQ1_0", 34, 256, 54),
    GgmlType("TQ2_0", 35, 256, 66),
    GgmlType("MXFP4", 39, 32, 17),
    GgmlType("NVFP4", 40, 64, 36),
    GgmlType("Q1_0", 41, 128, 18),
]

GGML_TYPES: dict[str, GgmlType] = {t.name: t for t in _TYPES}
GGML_TYPES_BY_ID: dict[int, GgmlType] = {t.type_id: t for t in _TYPES}


def ggml_type(name: str) -> GgmlType:
    try:
        return GGML_TYPES[name.upper()]
    except KeyError:
        raise InvalidModelError(f"unknown tensor type {name!r}") from None


def row_bytes(type_name: str, n_elements: int) -> int:
    """Bytes of `n_elements` values of one type, as ggml_row_size computes them."""
    t = ggml_type(type_name)
    if n_elements % t.block_size:
        raise InvalidModelError(
            f"{n_elements} values cannot be stored as {t.name}: "
            f"not a multiple of its block size {t.block_size}"
        )
    return n_elements // t.block_size * t.bytes_per_block


def tensor_bytes(type_name: str, shape: tuple[int, ...]) -> int:
    n = 1
    for dim in shape:
        n *= dim
    return row_bytes(type_name, n)


class KvCacheType(StrEnum):
    """Element types a KV cache can hold: llama.cpp's set, plus vLLM's fp8."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    Q8_0 = "q8_0"
    Q5_1 = "q5_1"
    Q5_0 = "q5_0"
    Q4_1 = "q4_1"
    IQ4_NL = "iq4_nl"
    Q4_0 = "q4_0"
    FP8 = "fp8"

    @property
    def quantized(self) -> bool:
        return self not in (KvCacheType.F32, KvCacheType.F16, KvCacheType.BF16, KvCacheType.FP8)

    @property
    def llama_cpp(self) -> bool:
        return self is not KvCacheType.FP8


# vLLM stores fp8 (e4m3/e5m2) as one byte per value; ggml has no such cache type.
_KV_LAYOUT: dict[KvCacheType, tuple[int, int]] = {
    KvCacheType.FP8: (1, 1),
    **{
        k: (GGML_TYPES[k.value.upper()].block_size, GGML_TYPES[k.value.upper()].bytes_per_block)
        for k in KvCacheType
        if k is not KvCacheType.FP8
    },
}


def kv_cache_type(name: str) -> KvCacheType:
    try:
        return KvCacheType(name.lower())
    except ValueError:
        choices = ", ".join(k.value for k in KvCacheType)
        raise InvalidSettingsError(
            f"unknown KV cache type {name!r} (choose from {choices})"
        ) from None


def kv_row_bytes(kind: KvCacheType, n_elements: int) -> int:
    block, size = _KV_LAYOUT[kind]
    if n_elements % block:
        raise InvalidSettingsError(
            f"KV type {kind.value} needs rows that are a multiple of {block} values; "
            f"this model's rows hold {n_elements}"
        )
    return n_elements // block * size


def kv_bits_per_value(kind: KvCacheType) -> float:
    block, size = _KV_LAYOUT[kind]
    return size * 8 / block
