"""Where a GGUF's header ends, from its first bytes: how much of a remote file a plan
needs. No `gguf` import; the header is walked record by record, every length checked
against the header cap."""

from __future__ import annotations

import struct

from rigspark_gui.core.errors import ModelImportError

MAX_HEADER_BYTES = 64 << 20
# The longest time limit a remote read takes (--network-timeout, RIGSPARK_NETWORK_TIMEOUT).
MAX_TIMEOUT_S = 24 * 3600


class RemoteError(ModelImportError):
    """A remote model that could not be read: one plain sentence."""


# ---------------------------------------------------------------- the GGUF header's end

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


class ShortHeader(Exception):
    """The bytes so far end inside the header."""


def header_end(data: bytes) -> int:
    """Where tensor data starts in a GGUF whose first bytes are `data` (header records,
    then alignment padding); raises ShortHeader when `data` ends before that."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(data):
            raise ShortHeader
        out = data[pos : pos + n]
        pos += n
        return out

    magic = take(4)
    if magic != b"GGUF":
        raise RemoteError("not a GGUF file (its first bytes are not GGUF)")
    endian = "<" if struct.unpack("<I", take(4))[0] < 0x10000 else ">"

    def u32() -> int:
        return int(struct.unpack(endian + "I", take(4))[0])

    def u64() -> int:
        return int(struct.unpack(endian + "Q", take(8))[0])

    def string() -> str:
        n = u64()
        if n > MAX_HEADER_BYTES:
            raise RemoteError("a GGUF string longer than the header cap")
        return take(n).decode("utf-8", "replace")

    def skip_value(vtype: int) -> object:
        if vtype in _SCALAR:
            raw = take(_SCALAR[vtype])
            return int.from_bytes(raw, "little" if endian == "<" else "big")
        if vtype == _STRING:
            return string()
        if vtype == _ARRAY:
            inner, count = u32(), u64()
            if count > MAX_HEADER_BYTES:
                raise RemoteError("a GGUF array longer than the header cap")
            if inner in _SCALAR:
                take(_SCALAR[inner] * count)
            else:
                for _ in range(count):
                    skip_value(inner)
            return None
        raise RemoteError(f"unknown GGUF value type {vtype}")

    n_tensors, n_kv = u64(), u64()
    if n_tensors > 1 << 24 or n_kv > 1 << 24:
        raise RemoteError("implausible GGUF header counts")
    alignment = 32
    for _ in range(n_kv):
        key = string()
        value = skip_value(u32())
        if key == "general.alignment" and isinstance(value, int) and value > 0:
            alignment = value
    for _ in range(n_tensors):
        string()
        dims = u32()
        if dims > 8:
            raise RemoteError("a GGUF tensor with more than 8 dimensions")
        take(8 * dims + 4 + 8)
    return (pos + alignment - 1) // alignment * alignment
