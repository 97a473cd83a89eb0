"""Import a GGUF file (or a set of split GGUF parts) as a ModelSpec, from its header only.

Every length in the header, metadata and tensor-info sections is checked with `struct`
before the `gguf` package's GGUFReader sees the file: the reader trusts the counts it
reads, so a hostile header (2^60 tensors, a 1 TB string, an array claiming 2^62 items)
would make it loop or allocate without bound. Tensor data is never read; GGUFReader
memory-maps the file and only the header pages are touched.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType

from rigspark_gui.catalog.gguf_names import SPLIT_NAME as _SPLIT_NAME
from rigspark_gui.core.errors import ModelImportError, validation_message
from rigspark_gui.core.model import GGML_TYPES_BY_ID, Geometry, ModelSpec, TensorGroup, TensorInfo
from rigspark_gui.formats.model_spec import Geometry as GeometryFile

__all__ = ["FILE_TYPE_LABELS", "import_gguf", "swa_period"]

_MAGIC = b"GGUF"
_SUPPORTED_VERSIONS = (2, 3)
_FIXED_HEADER = 4 + 4 + 8 + 8  # magic, version, n_tensors, n_kv
_MIN_KV_RECORD = 8 + 4 + 1  # key length, value type, smallest value (1 byte)
_MIN_TENSOR_RECORD = 8 + 4 + 8 + 4 + 8  # name length, n_dims, one dim, type, offset
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_NAME = 64  # GGML_MAX_NAME: llama.cpp refuses longer tensor names
_MAX_LAYERS = 4096  # Geometry's bound; checked early because arrays are sized by it
_MAX_INT = 1 << 31
_KEEP_ARRAY_ITEMS = 4096  # per-layer arrays are kept; tokenizer arrays only counted
_VT_STRING = 8
_VT_ARRAY = 9
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

_INT_TYPES = frozenset(
    {
        GGUFValueType.UINT8,
        GGUFValueType.INT8,
        GGUFValueType.UINT16,
        GGUFValueType.INT16,
        GGUFValueType.UINT32,
        GGUFValueType.INT32,
        GGUFValueType.UINT64,
        GGUFValueType.INT64,
    }
)
_FLOAT_TYPES = frozenset({GGUFValueType.FLOAT32, GGUFValueType.FLOAT64})

# llama.cpp's LLAMA_FTYPE enum (include/llama.h); gaps are removed or deprecated types.
FILE_TYPE_LABELS: dict[int, str] = {
    0: "F32",  # llama.cpp names it LLAMA_FTYPE_ALL_F32
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}

# Architectures whose memory is (partly) recurrent state, or that have no decoder KV
# cache at all: their geometry does not map onto KV-per-layer sizing yet.
_UNSUPPORTED_ARCHS = frozenset(
    {
        "mamba",
        "mamba2",
        "rwkv6",
        "rwkv6qwen2",
        "rwkv7",
        "arwkv7",
        "jamba",
        "falcon-h1",
        "granitehybrid",
        "lfm2",
        "lfm2moe",
        "nemotron_h",
        "nemotron_h_moe",
        "plamo2",
        "qwen3next",
        "qwen35",
        "qwen35moe",
        "kimi-linear",
        "gemma3n",
        "t5",
        "t5encoder",
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "neo-bert",
        "modern-bert",
    }
)
_RECURRENT_TENSOR_MARKERS = (".ssm_", ".time_mix_", ".channel_mix_", ".shortconv")

# Sliding-window period each loader in llama.cpp (src/llama-model.cpp) sets with
# hparams.set_swa_pattern(); a `{arch}.attention.sliding_window_pattern` key overrides it.
_SWA_PERIOD = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "gpt-oss": 2, "exaone4": 4}
# Loaders that read the window with a required get_key: llama.cpp refuses the file without it.
_SWA_WINDOW_REQUIRED = frozenset({"gemma3", "cohere2", "gpt-oss"})
_GEMMA2_DEFAULT_WINDOW = 4096  # llama.cpp presets n_swa before the optional key
# Llama 4: chunked attention, 8192-token chunks on 3 of every 4 layers (hard-coded).
_LLAMA4_CHUNK = 8192
_LLAMA4_PERIOD = 4

_BLOCK_NAME = re.compile(r"^blk\.(\d+)\.")
_INPUT_PREFIXES = ("token_embd", "position_embd", "token_types")


def _label(text: str) -> str:
    """A file-supplied name made safe for a one-line message."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text)
    return clean if len(clean) <= 60 else clean[:57] + "..."


def _error(fname: str, reason: str) -> ModelImportError:
    message = "".join(ch if ch.isprintable() else "?" for ch in f"{fname}: {reason}")
    return ModelImportError(message if len(message) <= 400 else message[:397] + "...")


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "no detail"
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(exc).__name__}: {text}"


# --------------------------------------------------------------------------- header scan


@dataclass(frozen=True, slots=True)
class _ScannedTensor:
    name: str
    type_id: int
    ne: tuple[int, ...]
    n_bytes: int


class _Scanner:
    """Walks the header with struct, bounding every count by the bytes left in the file."""

    def __init__(self, buf: mmap.mmap, size: int, fname: str) -> None:
        self.buf = buf
        self.size = size
        self.fname = fname
        self.pos = 0
        self.order = "<"

    def fail(self, reason: str) -> NoReturn:
        raise _error(self.fname, reason)

    def need(self, n: int, what: str) -> None:
        if n > self.size - self.pos:
            self.fail(f"truncated: {what} runs past the end of the file")

    def u32(self, what: str) -> int:
        self.need(4, what)
        (v,) = struct.unpack_from(self.order + "I", self.buf, self.pos)
        self.pos += 4
        return int(v)

    def u64(self, what: str) -> int:
        self.need(8, what)
        (v,) = struct.unpack_from(self.order + "Q", self.buf, self.pos)
        self.pos += 8
        return int(v)

    def skip_string(self, what: str) -> None:
        n = self.u64(what)
        self.need(n, what)
        self.pos += n

    def text(self, what: str) -> str:
        n = self.u64(what)
        self.need(n, what)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"{what} is not valid UTF-8")

    def skip_value(self, key: str, vtype: int) -> None:
        if vtype in _SCALAR_SIZES:
            self.need(_SCALAR_SIZES[vtype], f"metadata {key}")
            self.pos += _SCALAR_SIZES[vtype]
        elif vtype == _VT_STRING:
            self.skip_string(f"metadata {key}")
        elif vtype == _VT_ARRAY:
            self.skip_array(key)
        else:
            self.fail(f"metadata {key} has unknown value type {vtype}")

    def skip_array(self, key: str) -> None:
        itype = self.u32(f"metadata {key}")
        count = self.u64(f"metadata {key}")
        left = self.size - self.pos
        if itype in _SCALAR_SIZES:
            if count * _SCALAR_SIZES[itype] > left:
                self.fail(f"absurd count: array {key} claims {count} items, past the end of file")
            self.pos += count * _SCALAR_SIZES[itype]
        elif itype == _VT_STRING:
            if count * 8 > left:
                self.fail(f"absurd count: array {key} claims {count} strings, past end of file")
            # A tight loop: tokenizer arrays hold a few hundred thousand strings.
            unpack = struct.Struct(self.order + "Q").unpack_from
            buf, pos, end = self.buf, self.pos, self.size
            for _ in range(count):
                if end - pos < 8:
                    self.fail(f"truncated: array {key} runs past the end of the file")
                (n,) = unpack(buf, pos)
                pos += 8
                if n > end - pos:
                    self.fail(f"truncated: a string in array {key} runs past the end of the file")
                pos += n
            self.pos = pos
        elif itype == _VT_ARRAY:
            self.fail(f"metadata {key}: nested arrays are not supported")
        else:
            self.fail(f"metadata {key} has unknown array item type {itype}")

    def run(self) -> tuple[int, list[_ScannedTensor]]:
        if self.buf[:4] != _MAGIC:
            self.fail("not a GGUF file (bad magic)")
        (raw,) = struct.unpack_from("<I", self.buf, 4)
        if raw & 0xFFFF == 0 and raw != 0:
            # Written on a big-endian machine; GGUFReader detects it the same way.
            self.order = ">"
            (raw,) = struct.unpack_from(">I", self.buf, 4)
        version = int(raw)
        if version == 1:
            self.fail("GGUF version 1 is not supported (re-convert the model)")
        if version not in _SUPPORTED_VERSIONS:
            self.fail(f"unsupported GGUF version {version}")
        self.pos = 8
        n_tensors = self.u64("tensor count")
        n_kv = self.u64("metadata count")
        if n_tensors * _MIN_TENSOR_RECORD + n_kv * _MIN_KV_RECORD > self.size - _FIXED_HEADER:
            self.fail(
                f"absurd count: header claims {n_tensors} tensors and {n_kv} metadata "
                f"entries, more than a {self.size}-byte file can hold"
            )

        alignment = 32  # GGUF_DEFAULT_ALIGNMENT
        keys: set[str] = set()
        for i in range(n_kv):
            key = self.text(f"metadata key {i}")
            if key in keys:
                self.fail(f"duplicate metadata key {_label(key)}")
            keys.add(key)
            vtype = self.u32(f"type of metadata {_label(key)}")
            if key == "general.alignment":
                if vtype != int(GGUFValueType.UINT32):
                    self.fail("general.alignment must be a uint32")
                alignment = self.u32(key)
                if alignment == 0 or alignment & (alignment - 1):
                    self.fail(f"general.alignment {alignment} is not a power of two")
                continue
            self.skip_value(_label(key), vtype)

        tensors: list[_ScannedTensor] = []
        offsets: list[int] = []
        names: set[str] = set()
        for i in range(n_tensors):
            full_name = self.text(f"name of tensor {i}")
            name = _label(full_name)
            if len(full_name.encode()) >= _MAX_NAME:
                self.fail(f"tensor name too long: {name}")
            if full_name in names:
                self.fail(f"duplicate tensor {name}")
            names.add(full_name)
            n_dims = self.u32(f"tensor {name}")
            if not 1 <= n_dims <= _MAX_DIMS:
                self.fail(f"tensor {name} has {n_dims} dimensions (1 to {_MAX_DIMS} allowed)")
            ne = tuple(self.u64(f"tensor {name}") for _ in range(n_dims))
            type_id = self.u32(f"tensor {name}")
            offset = self.u64(f"tensor {name}")
            t = GGML_TYPES_BY_ID.get(type_id)
            if t is None:
                try:
                    known = GGMLQuantizationType(type_id).name
                except ValueError:
                    self.fail(f"tensor {name} has unknown type id {type_id}")
                self.fail(f"tensor {name}: type {known} not supported yet")
            if any(d == 0 or d >= 1 << 62 for d in ne):
                self.fail(f"tensor {name} has an empty or absurd dimension {list(ne)}")
            if ne[0] % t.block_size:
                self.fail(
                    f"tensor {name}: rows of {ne[0]} values are not a multiple of the "
                    f"{t.name} block size {t.block_size}"
                )
            n_el = 1
            for d in ne:
                n_el *= d
            n_bytes = n_el // t.block_size * t.bytes_per_block
            if n_bytes > self.size:
                self.fail(f"truncated or absurd shape: tensor {name} needs {n_bytes} bytes")
            if offset % alignment:
                self.fail(f"tensor {name} data offset {offset} is not aligned to {alignment}")
            tensors.append(_ScannedTensor(full_name, type_id, ne, n_bytes))
            offsets.append(offset)

        # Offsets count from the data section, which starts at the next aligned byte.
        data_start = -(-self.pos // alignment) * alignment
        for scanned, offset in zip(tensors, offsets, strict=True):
            if data_start + offset + scanned.n_bytes > self.size:
                self.fail(f"truncated: data of tensor {_label(scanned.name)} runs past the end")
        return version, tensors


def _scan(path: Path) -> list[_ScannedTensor]:
    fname = path.name
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(4)
            if len(head) == 4 and head != _MAGIC:
                raise _error(fname, "not a GGUF file (bad magic)")
            if size < _FIXED_HEADER:
                raise _error(fname, f"truncated: {size} bytes, less than a GGUF header")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _Scanner(buf, size, fname).run()[1]
    except ModelImportError:
        raise
    except OSError as exc:
        raise _error(fname, f"cannot read the file ({_reason(exc)})") from exc


# --------------------------------------------------------------------------- metadata


@dataclass(frozen=True, slots=True)
class _Value:
    """One metadata value, copied out of the reader so the mapping can be released."""

    vtype: GGUFValueType
    item_type: GGUFValueType | None  # for arrays
    value: Any  # scalar, or list of items (None for arrays too long to keep)
    length: int  # number of items for arrays, 1 otherwise


@dataclass(frozen=True, slots=True)
class _RawTensor:
    name: str
    type_name: str
    ne: tuple[int, ...]
    n_bytes: int


@dataclass(frozen=True, slots=True)
class _Part:
    path: Path
    meta: dict[str, _Value]
    tensors: list[_RawTensor]


class _HeaderReader(GGUFReader):
    """GGUFReader that keeps long metadata arrays (tokenizer vocabularies and merges) as
    one opaque field instead of one numpy view per item: on a 150k-token vocabulary that
    is 0.1 s instead of 8 s. Their items are never read here, only their length."""

    def _get_field_parts(
        self, orig_offs: int, raw_type: int
    ) -> tuple[int, list[npt.NDArray[Any]], list[int], list[GGUFValueType]]:
        if raw_type == GGUFValueType.ARRAY:
            raw_itype = self._get(orig_offs, np.uint32)
            alen = self._get(orig_offs + 4, np.uint64)
            if len(raw_itype) == 1 and len(alen) == 1 and int(alen[0]) > _KEEP_ARRAY_ITEMS:
                size = self._opaque_array_size(orig_offs + 12, int(raw_itype[0]), int(alen[0]))
                if size is not None:
                    types = [GGUFValueType.ARRAY, GGUFValueType(int(raw_itype[0]))]
                    return 12 + size, [raw_itype, alen], [], types
        return super()._get_field_parts(orig_offs, raw_type)

    def _opaque_array_size(self, offs: int, itype: int, count: int) -> int | None:
        if itype in _SCALAR_SIZES:
            return count * _SCALAR_SIZES[itype]
        if itype != _VT_STRING:
            return None
        # Same byte order the reader detected; bounds were checked by the scan.
        swapped = self.byte_order == "S"
        order = "<" if (sys.byteorder == "little") != swapped else ">"
        unpack = struct.Struct(order + "Q").unpack_from
        buf = self.data.data  # the mapped bytes, without a copy
        pos = offs
        for _ in range(count):
            (n,) = unpack(buf, pos)
            pos += 8 + n
        return pos - offs


def _copy_field(field: Any) -> _Value:
    types: list[GGUFValueType] = list(field.types)
    vtype = types[0]
    if vtype == GGUFValueType.ARRAY:
        item_type = types[-1] if len(types) > 1 else None
        # parts: key length, key, value type, item type, item count, items...
        length = int(field.parts[4][0])
        keep = 0 < len(field.data) == length <= _KEEP_ARRAY_ITEMS
        return _Value(vtype, item_type, field.contents() if keep else None, length)
    return _Value(vtype, None, field.contents(), 1)


def _read_part(path: Path) -> _Part:
    scanned = _scan(path)
    fname = path.name
    try:
        reader = _HeaderReader(path, "r")
        meta = {
            key: _copy_field(f) for key, f in reader.fields.items() if not key.startswith("GGUF.")
        }
        tensors = [
            _RawTensor(
                name=t.name,
                type_name=GGMLQuantizationType(int(t.tensor_type)).name,
                ne=tuple(int(d) for d in t.shape),
                n_bytes=int(t.n_bytes),
            )
            for t in reader.tensors
        ]
        del reader  # drops the memory map
    except ModelImportError:
        raise
    except Exception as exc:  # the reader raises anything from ValueError to IndexError
        raise _error(fname, f"unreadable GGUF header ({_reason(exc)})") from exc
    if [(t.name, t.n_bytes) for t in tensors] != [(s.name, s.n_bytes) for s in scanned]:
        raise _error(fname, "the tensor table could not be read consistently")
    return _Part(path, meta, tensors)


class _Meta:
    """Typed access to metadata; every failure names the key."""

    def __init__(self, values: dict[str, _Value], fname: str) -> None:
        self.values = values
        self.fname = fname

    def fail(self, reason: str) -> NoReturn:
        raise _error(self.fname, reason)

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
        if val.vtype not in _INT_TYPES:
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
        if val.length != n_layer or val.value is None or val.item_type not in _INT_TYPES:
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
            if val.item_type in _INT_TYPES:
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


def _tensor_ne(tensors: dict[str, _RawTensor], pattern: str, dim: int) -> int:
    rx = re.compile(pattern)
    for name, t in tensors.items():
        if rx.match(name) and len(t.ne) > dim:
            return t.ne[dim]
    return 0


def _geometry(m: _Meta, arch: str, tensors: dict[str, _RawTensor]) -> Geometry:
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

    try:
        return GeometryFile(
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
        ).to_record()
    except ValueError as exc:  # pydantic's ValidationError, or fields that disagree
        m.fail(f"unusable geometry ({_validation_reason(exc)})")


def _sliding_window(m: _Meta, arch: str, n_layer: int) -> tuple[int | None, int | None]:
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


def _validation_reason(exc: ValueError) -> str:
    return " ".join(validation_message(exc).split())


# --------------------------------------------------------------------------- assembly


def _split_parts(path: Path) -> tuple[list[Path], str]:
    """All parts of a split model named like llama.cpp's gguf-split does, and the base name."""
    match = _SPLIT_NAME.match(path.name)
    if match is None:
        return [path], path.stem
    no, count = int(match["no"]), int(match["count"])
    if not 1 <= no <= count:
        raise _error(path.name, f"split part number {no} is outside 1..{count}")
    prefix = match["prefix"]
    parts = [path.with_name(f"{prefix}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        shown = ", ".join(missing[:8]) + more
        raise _error(path.name, f"split model is missing {len(missing)} of {count} parts: {shown}")
    return parts, prefix


def _split_value(part: _Part, key: str) -> int | None:
    val = part.meta.get(key)
    if val is None:
        return None
    if val.vtype not in _INT_TYPES:
        raise _error(part.path.name, f"metadata {key} must be an integer")
    return int(val.value)


def _check_split(parts: list[_Part]) -> None:
    count = len(parts)
    for i, part in enumerate(parts):
        declared = _split_value(part, "split.count")
        no = _split_value(part, "split.no")
        if count == 1:
            if declared is not None and declared > 1:
                raise _error(
                    part.path.name,
                    f"this is one part of a {declared}-part split model, "
                    "but its name does not follow NAME-00001-of-0000N.gguf",
                )
            continue
        if declared is not None and declared != count:
            raise _error(
                part.path.name, f"says the model has {declared} parts, its name says {count}"
            )
        if no is not None and no != i:
            raise _error(part.path.name, f"says it is part {no + 1}, its name says {i + 1}")
    total = _split_value(parts[0], "split.tensors.count")
    found = sum(len(p.tensors) for p in parts)
    if count > 1 and total is not None and total != found:
        raise _error(
            parts[0].path.name, f"the split model declares {total} tensors, its parts hold {found}"
        )


def _group(name: str, n_layer: int) -> tuple[TensorGroup, int | None]:
    if name.startswith(_INPUT_PREFIXES):
        return TensorGroup.INPUT, None
    match = _BLOCK_NAME.match(name)
    if match is not None:
        layer = int(match[1])
        if layer < n_layer:
            return TensorGroup.BLOCK, layer
    # output head, output norm, rope tables, and blocks past block_count
    return TensorGroup.OUTPUT, None


def _file_quant(m: _Meta, tensors: Iterable[_RawTensor]) -> str | None:
    val = m.values.get("general.file_type")
    if val is not None and val.vtype in _INT_TYPES:
        label = FILE_TYPE_LABELS.get(int(val.value))
        if label is not None:
            return label
    weight: Counter[str] = Counter()
    for t in tensors:
        weight[t.type_name] += t.n_bytes
    return weight.most_common(1)[0][0] if weight else None


def import_gguf(path: str | os.PathLike[str]) -> ModelSpec:
    """Read a GGUF header (any part of a split model) into a ModelSpec with exact tensors."""
    given = Path(path)
    parts_paths, base = _split_parts(given)
    parts = [_read_part(p) for p in parts_paths]
    _check_split(parts)
    first = parts[0]
    fname = first.path.name if len(parts) == 1 else f"{base} ({len(parts)} parts)"
    m = _Meta(first.meta, fname)

    arch = m.text("general.architecture")
    if not arch:
        m.fail("missing metadata general.architecture")
    if len(arch) > 64 or not arch.isprintable():
        m.fail(f"general.architecture {_label(arch)} is not an architecture name")
    merged: dict[str, _RawTensor] = {}
    for part in parts:
        for t in part.tensors:
            if t.name in merged:
                raise _error(fname, f"tensor {_label(t.name)} appears in two parts")
            merged[t.name] = t
    if not merged:
        m.fail("the file holds no tensors")
    if arch in _UNSUPPORTED_ARCHS or any(
        marker in name for name in merged for marker in _RECURRENT_TENSOR_MARKERS
    ):
        m.fail(f"not supported yet: {arch} (recurrent, hybrid or encoder architecture)")

    geometry = _geometry(m, arch, merged)
    infos: list[TensorInfo] = []
    for t in merged.values():
        group, layer = _group(t.name, geometry.n_layer)
        infos.append(
            TensorInfo(
                name=t.name,
                type=t.type_name,
                shape=t.ne,
                group=group,
                layer=layer,
                expert="_exps" in t.name,
                n_bytes=t.n_bytes,
            )
        )
    name = (m.text("general.name") or "").strip() or base
    try:
        return ModelSpec(
            id=("file:" + base)[:200],
            name=name[:300],
            family=(m.text("general.basename") or "").strip()[:100],
            geometry=geometry,
            tensors=tuple(infos),
            file_quant=_file_quant(m, merged.values()),
            source=str(first.path),
            imported=True,
        )
    except ValueError as exc:
        m.fail(f"unusable model ({_validation_reason(exc)})")
