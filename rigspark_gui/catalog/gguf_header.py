"""The bounded GGUF header reader: one GGUF file (or one part of a split model) read
into its metadata values and its tensor table, from the header only.

The header is walked once with `struct`, every count and length checked against the
bytes left in the file before anything is read: a hostile header (2^60 tensors, a 1 TB
string, an array claiming 2^62 items) fails at once instead of looping or allocating
without bound. Tensor data is never read (the file is memory-mapped; only the header
pages are touched), and neither numpy nor the `gguf` package is loaded, so asking about a
file answers in a fraction of the time llama.cpp's own tools take. Every failure is one
ModelImportError line naming the file.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, NoReturn

from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.model import GGML_TYPES_BY_ID

__all__ = [
    "INT_TYPES",
    "GGUFValueType",
    "MetaValue",
    "PartHeader",
    "RawTensor",
    "import_error",
    "read_part",
    "safe_label",
]

_MAGIC = b"GGUF"
_SUPPORTED_VERSIONS = (2, 3)
_FIXED_HEADER = 4 + 4 + 8 + 8  # magic, version, n_tensors, n_kv
_MIN_KV_RECORD = 8 + 4 + 1  # key length, value type, smallest value (1 byte)
_MIN_TENSOR_RECORD = 8 + 4 + 8 + 4 + 8  # name length, n_dims, one dim, type, offset
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_NAME = 64  # GGML_MAX_NAME: llama.cpp refuses longer tensor names
_KEEP_ARRAY_ITEMS = 4096  # per-layer arrays are kept; tokenizer arrays only counted
_VT_STRING = 8
_VT_ARRAY = 9
_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
# struct codes of the scalar value types (gguf.h: gguf_type)
_SCALAR_CODES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q",
                 11: "q", 12: "d"}  # fmt: skip
# ggml.h's type ids llama.cpp knows but RigSpark does not size (named in the refusal)
_KNOWN_UNSIZED = {4: "Q4_2", 5: "Q4_3", 31: "Q4_0_4_4", 32: "Q4_0_4_8", 33: "Q4_0_8_8",
                  36: "IQ4_NL_4_4", 37: "IQ4_NL_4_8", 38: "IQ4_NL_8_8"}  # fmt: skip


class GGUFValueType(IntEnum):
    """gguf.h's gguf_type: the type of a metadata value (the same numbers as the `gguf`
    package's enum, which is not loaded here)."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


INT_TYPES = frozenset(
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


def safe_label(text: str) -> str:
    """A file-supplied name made safe for a one-line message."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text)
    return clean if len(clean) <= 60 else clean[:57] + "..."


def import_error(fname: str, reason: str) -> ModelImportError:
    """The one-line ModelImportError for a file: printable, at most 400 characters."""
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
    type_name: str
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
        raise import_error(self.fname, reason)

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

    def scalar(self, key: str, vtype: int) -> Any:
        size = _SCALAR_SIZES[vtype]
        self.need(size, f"metadata {key}")
        (v,) = struct.unpack_from(self.order + _SCALAR_CODES[vtype], self.buf, self.pos)
        self.pos += size
        return v

    def value(self, key: str, vtype: int) -> MetaValue:
        if vtype in _SCALAR_SIZES:
            return MetaValue(GGUFValueType(vtype), None, self.scalar(key, vtype), 1)
        if vtype == _VT_STRING:
            return MetaValue(GGUFValueType.STRING, None, self.text(f"metadata {key}"), 1)
        if vtype == _VT_ARRAY:
            return self.array(key)
        self.fail(f"metadata {key} has unknown value type {vtype}")

    def array(self, key: str) -> MetaValue:
        """An array value: its items when there are at most _KEEP_ARRAY_ITEMS (per-layer
        figures), else only its length (tokenizer vocabularies and merges)."""
        itype = self.u32(f"metadata {key}")
        count = self.u64(f"metadata {key}")
        left = self.size - self.pos
        if itype in _SCALAR_SIZES:
            size = _SCALAR_SIZES[itype]
            if count * size > left:
                self.fail(f"absurd count: array {key} claims {count} items, past the end of file")
            items: list[Any] | None = None
            if count <= _KEEP_ARRAY_ITEMS:
                fmt = f"{self.order}{count}{_SCALAR_CODES[itype]}"
                items = list(struct.unpack_from(fmt, self.buf, self.pos))
            self.pos += count * size
            return MetaValue(GGUFValueType.ARRAY, GGUFValueType(itype), items, count)
        if itype == _VT_STRING:
            if count * 8 > left:
                self.fail(f"absurd count: array {key} claims {count} strings, past end of file")
            if count <= _KEEP_ARRAY_ITEMS:
                texts = [self.text(f"a string in array {key}") for _ in range(count)]
                return MetaValue(GGUFValueType.ARRAY, GGUFValueType.STRING, texts, count)
            # A tight loop: tokenizer arrays hold a few hundred thousand strings. A length
            # past the end makes the next unpack_from fail (struct.error), which bounds it.
            unpack = struct.Struct(self.order + "Q").unpack_from
            buf, pos = self.buf, self.pos
            try:
                for _ in range(count):
                    pos += 8 + unpack(buf, pos)[0]
            except (struct.error, OverflowError):  # past the end, or past any offset
                self.fail(f"truncated: array {key} runs past the end of the file")
            if pos > self.size:
                self.fail(f"truncated: a string in array {key} runs past the end of the file")
            self.pos = pos
            return MetaValue(GGUFValueType.ARRAY, GGUFValueType.STRING, None, count)
        if itype == _VT_ARRAY:
            self.fail(f"metadata {key}: nested arrays are not supported")
        self.fail(f"metadata {key} has unknown array item type {itype}")

    def run(self) -> tuple[int, list[_ScannedTensor], dict[str, MetaValue]]:
        if self.buf[:4] != _MAGIC:
            self.fail("not a GGUF file (bad magic)")
        (raw,) = struct.unpack_from("<I", self.buf, 4)
        if raw & 0xFFFF == 0 and raw != 0:
            # Written on a big-endian machine (the `gguf` package detects it the same way).
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
        values: dict[str, MetaValue] = {}
        for i in range(n_kv):
            key = self.text(f"metadata key {i}")
            if key in values:
                self.fail(f"duplicate metadata key {safe_label(key)}")
            vtype = self.u32(f"type of metadata {safe_label(key)}")
            if key == "general.alignment":
                if vtype != int(GGUFValueType.UINT32):
                    self.fail("general.alignment must be a uint32")
                alignment = self.u32(key)
                if alignment == 0 or alignment & (alignment - 1):
                    self.fail(f"general.alignment {alignment} is not a power of two")
                values[key] = MetaValue(GGUFValueType.UINT32, None, alignment, 1)
                continue
            values[key] = self.value(safe_label(key), vtype)

        tensors: list[_ScannedTensor] = []
        offsets: list[int] = []
        names: set[str] = set()
        for i in range(n_tensors):
            full_name = self.text(f"name of tensor {i}")
            name = safe_label(full_name)
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
                known = _KNOWN_UNSIZED.get(type_id)
                if known is None:
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
            tensors.append(_ScannedTensor(full_name, t.name, ne, n_bytes))
            offsets.append(offset)

        # Offsets count from the data section, which starts at the next aligned byte.
        data_start = -(-self.pos // alignment) * alignment
        for scanned, offset in zip(tensors, offsets, strict=True):
            if data_start + offset + scanned.n_bytes > self.size:
                self.fail(f"truncated: data of tensor {safe_label(scanned.name)} runs past the end")
        return version, tensors, values


def _scan(path: Path) -> tuple[list[_ScannedTensor], dict[str, MetaValue]]:
    fname = path.name
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(4)
            if len(head) == 4 and head != _MAGIC:
                raise import_error(fname, "not a GGUF file (bad magic)")
            if size < _FIXED_HEADER:
                raise import_error(fname, f"truncated: {size} bytes, less than a GGUF header")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                _, tensors, values = _Scanner(buf, size, fname).run()
                return tensors, values
    except ModelImportError:
        raise
    except OSError as exc:
        raise import_error(fname, f"cannot read the file ({_reason(exc)})") from exc


# --------------------------------------------------------------------------- metadata


@dataclass(frozen=True, slots=True)
class MetaValue:
    """One metadata value, copied out of the reader so the mapping can be released."""

    vtype: GGUFValueType
    item_type: GGUFValueType | None  # for arrays
    value: Any  # scalar, or list of items (None for arrays too long to keep)
    length: int  # number of items for arrays, 1 otherwise


@dataclass(frozen=True, slots=True)
class RawTensor:
    """One entry of the tensor table: name, GGML type name, shape and data size."""

    name: str
    type_name: str
    ne: tuple[int, ...]
    n_bytes: int


@dataclass(frozen=True, slots=True)
class PartHeader:
    """What one file's header holds: its metadata and its tensor table."""

    path: Path
    meta: dict[str, MetaValue]
    tensors: list[RawTensor]


def read_part(path: Path) -> PartHeader:
    """One file's header: metadata values and tensor table, every length bounded."""
    scanned, meta = _scan(path)
    tensors = [RawTensor(name=t.name, type_name=t.type_name, ne=t.ne, n_bytes=t.n_bytes)
               for t in scanned]  # fmt: skip
    return PartHeader(path, meta, tensors)
