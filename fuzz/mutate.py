"""Seeded structural mutators: GGUF header fields and JSON trees, plus raw byte damage.

Random bytes alone rarely get past a magic number or a JSON parser; these mutators know
where the counts, lengths, type ids and dimensions of a GGUF header sit, and edit JSON
as a tree, so most inputs reach the code that trusts those values.
"""

from __future__ import annotations

import copy
import json
import random
import struct
from dataclasses import dataclass
from typing import Any, Literal

# --------------------------------------------------------------------------- bytes

_INTERESTING_U64 = (
    0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 63, 64, 255, 256, 4095, 4096, 65535, 65536,
    (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, 1 << 40, 1 << 60, 1 << 62,
    (1 << 63) - 1, 1 << 63, (1 << 64) - 1,
)  # fmt: skip


def byte_damage(data: bytes, rng: random.Random) -> bytes:
    """One blind edit: flip, overwrite, insert, delete, duplicate or truncate."""
    buf = bytearray(data)
    op = rng.randrange(7)
    if not buf:
        return bytes(rng.randbytes(rng.randint(1, 64)))
    pos = rng.randrange(len(buf))
    if op == 0:
        buf[pos] ^= 1 << rng.randrange(8)
    elif op == 1:
        buf[pos] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
    elif op == 2:
        buf[pos:pos] = rng.randbytes(rng.randint(1, 16))
    elif op == 3:
        del buf[pos : pos + rng.randint(1, 64)]
    elif op == 4:
        n = rng.randint(1, 256)
        buf[pos:pos] = buf[pos : pos + n]
    elif op == 5:
        del buf[pos:]
    else:
        width = rng.choice((4, 8))
        value = rng.choice(_INTERESTING_U64) & ((1 << (8 * width)) - 1)
        buf[pos : pos + width] = value.to_bytes(width, "little")
    return bytes(buf)


# --------------------------------------------------------------------------- GGUF


@dataclass(frozen=True, slots=True)
class Spot:
    """A header field: where it is, how wide, and what it means."""

    offset: int
    width: int
    kind: str


_SCALARS = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


_SPOT_CACHE: dict[bytes, tuple[list[Spot], str]] = {}


def gguf_spots(data: bytes, *, cache: bool = False) -> tuple[list[Spot], str]:
    """The header fields of a (valid) GGUF, found by walking it; stops at the first oddity.

    `cache` keeps the answer for seeds, which every first edit starts from.
    """
    cached = _SPOT_CACHE.get(data) if cache else None
    if cached is not None:
        return cached
    found = _find_spots(data)
    if cache and len(_SPOT_CACHE) < 64:
        _SPOT_CACHE[data] = found
    return found


def _find_spots(data: bytes) -> tuple[list[Spot], str]:
    spots: list[Spot] = []
    if len(data) < 24 or data[:4] != b"GGUF":
        return spots, "<"
    order = "<" if struct.unpack_from("<I", data, 4)[0] & 0xFFFF else ">"
    pos = 4

    def take(width: int, kind: str) -> int:
        nonlocal pos
        if pos + width > len(data):
            raise IndexError
        spots.append(Spot(pos, width, kind))
        value = int.from_bytes(data[pos : pos + width], "little" if order == "<" else "big")
        pos += width
        return value

    def string(kind: str) -> None:
        nonlocal pos
        n = take(8, kind)
        if n > 4096:
            raise IndexError
        pos += n

    try:
        take(4, "version")
        n_tensors = take(8, "count")
        n_kv = take(8, "count")
        for _ in range(min(n_kv, 1000)):
            string("strlen")
            vtype = take(4, "vtype")
            if vtype in _SCALARS:
                take(_SCALARS[vtype], "scalar")
            elif vtype == 8:
                string("strlen")
            elif vtype == 9:
                itype = take(4, "vtype")
                count = take(8, "count")
                if count > len(data):
                    raise IndexError
                if itype in _SCALARS:
                    pos += count * _SCALARS[itype]
                elif itype == 8:
                    for i in range(count):
                        # Long arrays: remember a few item lengths, skip the rest.
                        if i < 4:
                            string("strlen")
                        else:
                            (n,) = struct.unpack_from(order + "Q", data, pos)
                            pos += 8 + n
                else:
                    raise IndexError
            else:
                raise IndexError
        for _ in range(min(n_tensors, 1000)):
            string("strlen")
            n_dims = take(4, "ndims")
            for _ in range(min(n_dims, 4)):
                take(8, "dim")
            take(4, "ttype")
            take(8, "toffset")
    except (IndexError, OverflowError, struct.error):
        pass
    return spots, order


def _spot_value(spot: Spot, old: int, rng: random.Random) -> int:
    mask = (1 << (8 * spot.width)) - 1
    if spot.kind in ("vtype", "ttype") and rng.random() < 0.7:
        return rng.randrange(48)
    if spot.kind == "ndims" and rng.random() < 0.7:
        return rng.randrange(8)
    if spot.kind == "version" and rng.random() < 0.7:
        return rng.choice((0, 1, 2, 3, 4, 0x10000, 0x03000000))
    choice = rng.randrange(6)
    if choice == 0:
        value = old + rng.choice((-1, 1))
    elif choice == 1:
        value = old * rng.choice((2, 256, 65536))
    elif choice == 2:
        value = old // rng.choice((2, 32))
    elif choice == 3:
        value = rng.randrange(1 << 16)
    else:
        value = rng.choice(_INTERESTING_U64)
    return value & mask


def mutate_gguf(seed: bytes, rng: random.Random, others: list[bytes]) -> bytes:
    """1 to 4 edits, most of them to header fields that the importer must not trust."""
    data = seed
    for _ in range(rng.randint(1, 4)):
        spots, order = gguf_spots(data, cache=data is seed)
        roll = rng.random()
        if spots and roll < 0.65:
            spot = rng.choice(spots)
            byteorder: Literal["little", "big"] = "little" if order == "<" else "big"
            old = int.from_bytes(data[spot.offset : spot.offset + spot.width], byteorder)
            new = _spot_value(spot, old, rng).to_bytes(spot.width, byteorder)
            data = data[: spot.offset] + new + data[spot.offset + spot.width :]
        elif roll < 0.75 and spots:
            # Cut inside the header, where the reader is most exposed.
            end = max(s.offset + s.width for s in spots)
            data = data[: rng.randint(0, end + 8)]
        elif roll < 0.8 and others:
            other = rng.choice(others)
            cut = rng.randrange(len(data) + 1)
            data = data[:cut] + other[rng.randrange(len(other) + 1) :]
        else:
            data = byte_damage(data, rng)
    return data


# --------------------------------------------------------------------------- JSON


def interesting_json(rng: random.Random, keys: list[str]) -> Any:
    pick = rng.randrange(24)
    if pick < 6:
        return rng.choice(_INTERESTING_U64) * rng.choice((1, 1, -1))
    if pick < 8:
        return rng.choice((-1, 0, 1, 2, 3, 10**30, -(10**30), 2**53 + 1, 2**63, 10**400))
    if pick < 10:
        return rng.choice((0.0, -0.0, 0.5, 1e-300, 1e308, -1e308, float("nan"), float("inf")))
    if pick < 15:
        return rng.choice(
            (
                "",
                " ",
                "x" * rng.choice((1, 64, 201, 4097, 100_000)),
                "\x00",
                "\ud800",
                "<b>bold</b>&amp;",
                "$(rm -rf ~)",
                "; rm -rf ~",
                "NVIDIA GeForce RTX 3090",
                "llama",
                "user",
                "unknown",
                "measured",
                "nvidia",
                "../../etc/passwd",
                "Q4_K_M",
                "full_attention",
                "sliding_attention",
                rng.choice(keys) if keys else "k",
            )
        )
    if pick < 17:
        return rng.choice((None, True, False))
    if pick < 19:
        return rng.choice(([], [0] * rng.choice((1, 4, 10_000)), ["x"], [None], [[]]))
    if pick < 21:
        return {rng.choice(keys) if keys else "k": rng.choice((0, "", None, 1 << 40))}
    return rng.choice(({}, {"": ""}, [{}], [[[[[]]]]]))


def json_keys(obj: Any, out: set[str] | None = None) -> set[str]:
    """Every object key in a document: the vocabulary for inserted fields."""
    out = set() if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.add(k)
            json_keys(v, out)
    elif isinstance(obj, list):
        for v in obj[:50]:
            json_keys(v, out)
    return out


def _walk(obj: Any, rng: random.Random) -> tuple[Any, Any]:
    """A random (container, key) pair: descend, stopping at each level with some chance."""
    parent: Any = None
    key: Any = None
    node = obj
    while isinstance(node, (dict, list)) and node:
        keys = list(node.keys()) if isinstance(node, dict) else list(range(len(node)))
        parent, key = node, rng.choice(keys)
        node = node[key]
        if rng.random() < 0.25:
            break
    return parent, key


def _tree_edit(doc: Any, rng: random.Random, keys: list[str]) -> Any:
    parent, key = _walk(doc, rng)
    if parent is None:
        return interesting_json(rng, keys) if rng.random() < 0.2 else doc
    op = rng.randrange(8)
    old = parent[key]
    if op <= 2:
        parent[key] = interesting_json(rng, keys)
    elif op == 3:
        del parent[key]
    elif op == 4:
        if isinstance(parent, dict):
            parent[rng.choice(keys) if keys else "k"] = interesting_json(rng, keys)
        else:
            parent.insert(rng.randrange(len(parent) + 1), copy.deepcopy(old))
    elif op == 5:
        # The right value in the wrong type.
        if isinstance(old, (int, float)) and not isinstance(old, bool):
            as_float = float(old) if abs(old) < 1e308 else float("inf")  # 10**400 has none
            parent[key] = rng.choice((str(old), [old], as_float, bool(old)))
        elif isinstance(old, str):
            parent[key] = rng.choice(([old], {old: old}, old * 3, old[::-1], old.upper()))
        else:
            parent[key] = rng.choice((str(old)[:100], None, 0))
    elif op == 6:
        if isinstance(old, list) and old:
            rng.shuffle(old)
            del old[rng.randrange(len(old)) :]
        elif isinstance(old, int) and not isinstance(old, bool):
            parent[key] = old + rng.choice((-1, 1, -old, old, -(old + 1)))
        else:
            parent[key] = interesting_json(rng, keys)
    else:
        # Graft a copy of another subtree here.
        _, other_key = _walk(doc, rng)
        other_parent, _ = _walk(doc, rng)
        if other_parent is not None:
            try:
                parent[key] = copy.deepcopy(other_parent[other_key])
            except (KeyError, IndexError, TypeError):
                parent[key] = copy.deepcopy(other_parent)
    return doc


_RAW_INSERTS = (
    b"[" * 100_000,
    b'{"a":' * 50_000,
    b"9" * 5000,
    b"1e99999",
    b"-0",
    b"NaN",
    b"\xff\xfe",
    b"\xed\xa0\x80",
    b"\x00",
    b'"\\ud800"',
)


def mutate_json(seed: Any, rng: random.Random, keys: list[str]) -> bytes:
    """1 to 5 tree edits, then sometimes raw damage to the encoded text."""
    doc = copy.deepcopy(seed)
    for _ in range(rng.randint(1, 5)):
        doc = _tree_edit(doc, rng, keys)
    text = json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
    roll = rng.random()
    if roll < 0.08:
        pos = rng.randrange(len(text) + 1)
        text = text[:pos] + rng.choice(_RAW_INSERTS) + text[pos:]
    elif roll < 0.16:
        # A value position: after a colon, where a literal is expected.
        colons = [i for i in range(min(len(text), 20_000)) if text[i] == ord(":")]
        if colons:
            pos = rng.choice(colons) + 1
            text = text[:pos] + rng.choice(_RAW_INSERTS) + text[pos:]
    elif roll < 0.22:
        text = byte_damage(text, rng)
    return text
