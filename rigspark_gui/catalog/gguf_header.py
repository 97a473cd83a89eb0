"""The bounded GGUF header reader: one GGUF file (or one part of a split model) read
into its metadata values and its tensor table, from the header only.

Every length in the header, metadata and tensor-info sections is checked with `struct`
before the `gguf` package's GGUFReader sees the file: the reader trusts the counts it
reads, so a hostile header (2^60 tensors, a 1 TB string, an array claiming 2^62 items)
would make it loop or allocate without bound. Tensor data is never read; GGUFReader
memory-maps the file and only the header pages are touched. Every failure is one
ModelImportError line naming the file.
"""

from __future__ import annotations

import mmap
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType

from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.model import GGML_TYPES_BY_ID

__all__ = [
    "INT_TYPES",
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
        # where each long string array's items start -> their bytes, for the reader
        self.string_arrays: dict[int, int] = {}

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
            buf, start, end = self.buf, self.pos, self.size
            pos = start
            for _ in range(count):
                if end - pos < 8:
                    self.fail(f"truncated: array {key} runs past the end of the file")
                (n,) = unpack(buf, pos)
                pos += 8
                if n > end - pos:
                    self.fail(f"truncated: a string in array {key} runs past the end of the file")
                pos += n
            self.string_arrays[start] = pos - start
            self.pos = pos
        elif itype == _VT_ARRAY:
            self.fail(f"metadata {key}: nested arrays are not supported")
        else:
            self.fail(f"metadata {key} has unknown array item type {itype}")

    def run(self) -> list[_ScannedTensor]:
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
                self.fail(f"duplicate metadata key {safe_label(key)}")
            keys.add(key)
            vtype = self.u32(f"type of metadata {safe_label(key)}")
            if key == "general.alignment":
                if vtype != int(GGUFValueType.UINT32):
                    self.fail("general.alignment must be a uint32")
                alignment = self.u32(key)
                if alignment == 0 or alignment & (alignment - 1):
                    self.fail(f"general.alignment {alignment} is not a power of two")
                continue
            self.skip_value(safe_label(key), vtype)

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
                self.fail(f"truncated: data of tensor {safe_label(scanned.name)} runs past the end")
        return tensors


def _scan(path: Path) -> tuple[list[_ScannedTensor], dict[int, int]]:
    """The tensor table, and the bytes of each long string array by where it starts."""
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
                scanner = _Scanner(buf, size, fname)
                return scanner.run(), scanner.string_arrays
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


class _HeaderReader(GGUFReader):
    """GGUFReader that keeps long metadata arrays (tokenizer vocabularies and merges) as
    one opaque field instead of one numpy view per item: on a 150k-token vocabulary that
    is 0.1 s instead of 8 s. Their items are never read here, only their length, and a
    string array's bytes are taken from the bounded scan, which walked it already."""

    def __init__(self, path: Path, string_arrays: dict[int, int]) -> None:
        self._string_arrays = string_arrays
        super().__init__(path, "r")

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
        known = self._string_arrays.get(offs)
        if known is not None:
            return known
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


def _copy_field(field: Any) -> MetaValue:
    types: list[GGUFValueType] = list(field.types)
    vtype = types[0]
    if vtype == GGUFValueType.ARRAY:
        item_type = types[-1] if len(types) > 1 else None
        # parts: key length, key, value type, item type, item count, items...
        length = int(field.parts[4][0])
        keep = 0 < len(field.data) == length <= _KEEP_ARRAY_ITEMS
        return MetaValue(vtype, item_type, field.contents() if keep else None, length)
    return MetaValue(vtype, None, field.contents(), 1)


def read_part(path: Path) -> PartHeader:
    """One file's header, scanned with bounds first, then read by the gguf reader."""
    scanned, string_arrays = _scan(path)
    fname = path.name
    try:
        reader = _HeaderReader(path, string_arrays)
        meta = {
            key: _copy_field(f) for key, f in reader.fields.items() if not key.startswith("GGUF.")
        }
        tensors = [
            RawTensor(
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
        raise import_error(fname, f"unreadable GGUF header ({_reason(exc)})") from exc
    if [(t.name, t.n_bytes) for t in tensors] != [(s.name, s.n_bytes) for s in scanned]:
        raise import_error(fname, "the tensor table could not be read consistently")
    return PartHeader(path, meta, tensors)
