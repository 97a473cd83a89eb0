"""GGUF import on broken and hostile files: always a prompt ModelImportError."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from importer_helpers import Dims, decoder_kv, decoder_tensors, write_gguf

from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.model.model_spec import ModelSpec

STRING, ARRAY, UINT8, UINT32 = 8, 9, 0, 4


def header(n_tensors: int = 0, n_kv: int = 0, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def gstr(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def kv_u32(key: str, value: int) -> bytes:
    return gstr(key) + struct.pack("<II", UINT32, value)


PAD = b"\0" * 256

HOSTILE: dict[str, bytes] = {
    "empty": b"",
    "three bytes": b"GGU",
    "not a gguf": b"PK\x03\x04" + PAD,
    "text file": b"hello, this is not a model\n" * 4,
    "version 1": header(version=1) + PAD,
    "version 4": header(version=4) + PAD,
    "version 0xFFFF": header(version=0xFFFF) + PAD,
    "header only, cut": header(0, 0)[:20],
    "2^60 tensors": header(n_tensors=1 << 60) + PAD,
    "2^60 metadata entries": header(n_kv=1 << 60) + PAD,
    "2^64-1 tensors": header(n_tensors=(1 << 64) - 1) + PAD,
    "2^40-byte key": header(n_kv=1) + struct.pack("<Q", 1 << 40) + PAD,
    "2^40-byte string value": header(n_kv=1)
    + gstr("general.name")
    + struct.pack("<IQ", STRING, 1 << 40)
    + PAD,
    "2^62-item u8 array": header(n_kv=1)
    + gstr("tokenizer.ggml.token_type")
    + struct.pack("<IIQ", ARRAY, UINT8, 1 << 62)
    + PAD,
    "2^61-string array": header(n_kv=1)
    + gstr("tokenizer.ggml.tokens")
    + struct.pack("<IIQ", ARRAY, STRING, 1 << 61)
    + PAD,
    "strings past the end": header(n_kv=1)
    + gstr("tokenizer.ggml.tokens")
    + struct.pack("<IIQ", ARRAY, STRING, 20)
    + struct.pack("<Q", 3)
    + b"abc"
    + struct.pack("<Q", 1 << 40)
    + PAD[:150],
    "nested array": header(n_kv=1) + gstr("x") + struct.pack("<IIQ", ARRAY, ARRAY, 1) + PAD,
    "unknown value type": header(n_kv=1) + gstr("x") + struct.pack("<I", 99) + PAD,
    "invalid utf-8 key": header(n_kv=1) + struct.pack("<Q", 2) + b"\xff\xfe" + PAD,
    "duplicate key": header(n_kv=2) + kv_u32("a.b", 1) + kv_u32("a.b", 2) + PAD,
    "bad alignment": header(n_kv=1) + kv_u32("general.alignment", 3) + PAD,
    "1000 dims": header(n_tensors=1) + gstr("t") + struct.pack("<I", 1000) + PAD,
    "unknown tensor type": header(n_tensors=1)
    + gstr("t")
    + struct.pack("<IQIQ", 1, 32, 999, 0)
    + PAD,
    "huge tensor": header(n_tensors=1)
    + gstr("t")
    + struct.pack("<IQQIQ", 2, 1 << 31, 1 << 31, 0, 0)
    + PAD,
    "tensor data past the end": header(n_tensors=1)
    + gstr("t")
    + struct.pack("<IQIQ", 1, 4096, 0, 0)
    + PAD,
    "misaligned offset": header(n_tensors=1) + gstr("t") + struct.pack("<IQIQ", 1, 4, 0, 3) + PAD,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_header_is_refused_quickly(tmp_path: Path, name: str) -> None:
    path = tmp_path / "bad.gguf"
    path.write_bytes(HOSTILE[name])
    start = time.perf_counter()
    with pytest.raises(ModelImportError) as err:
        import_gguf(path)
    assert time.perf_counter() - start < 1.0
    message = str(err.value)
    assert message.startswith("bad.gguf: ") and "\n" not in message


def test_reasons_are_specific(tmp_path: Path) -> None:
    cases = {
        "not a gguf": "not a GGUF",
        "version 4": "unsupported GGUF version 4",
        "version 1": "version 1",
        "2^60 tensors": "absurd count",
        "2^40-byte key": "truncated",
        "2^62-item u8 array": "absurd count",
        "tensor data past the end": "truncated",
        "header only, cut": "truncated",
    }
    for name, reason in cases.items():
        path = tmp_path / "bad.gguf"
        path.write_bytes(HOSTILE[name])
        with pytest.raises(ModelImportError, match=reason):
            import_gguf(path)


@pytest.mark.parametrize("keep", [0.5, 0.9, 0.999])
def test_truncated_file(tiny_gguf: Path, tmp_path: Path, keep: float) -> None:
    data = tiny_gguf.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: int(len(data) * keep)])
    start = time.perf_counter()
    with pytest.raises(ModelImportError, match="truncated"):
        import_gguf(cut)
    assert time.perf_counter() - start < 1.0


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelImportError, match=r"nothing\.gguf"):
        import_gguf(tmp_path / "nothing.gguf")
    folder = tmp_path / "folder.gguf"
    folder.mkdir()
    with pytest.raises(ModelImportError, match=r"folder\.gguf"):
        import_gguf(folder)


def test_tiny_gguf_is_valid(tiny_gguf: Path) -> None:
    assert import_gguf(tiny_gguf).geometry.n_layer == 1


@settings(
    max_examples=200,
    deadline=2000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_bytes_only_raise_model_import_error(
    tiny_gguf: Path, tmp_path: Path, data: st.DataObject
) -> None:
    original = tiny_gguf.read_bytes()
    blob = bytearray(original)
    # The header (metadata and tensor table) is where parsing can go wrong; bias there.
    header_end = min(len(blob), 1200)
    mutations = data.draw(
        st.lists(
            st.tuples(
                st.one_of(st.integers(0, header_end - 1), st.integers(0, len(blob) - 1)),
                st.integers(0, 255),
            ),
            min_size=1,
            max_size=6,
        )
    )
    for index, value in mutations:
        blob[index] = value
    if data.draw(st.booleans()):
        blob = blob[: data.draw(st.integers(0, len(blob)))]
    path = tmp_path / "mutated.gguf"
    path.write_bytes(bytes(blob))
    start = time.perf_counter()
    try:
        spec = import_gguf(path)
    except ModelImportError as err:
        assert "\n" not in str(err)
    else:
        assert isinstance(spec, ModelSpec)
    assert time.perf_counter() - start < 1.0


@settings(
    max_examples=60,
    deadline=2000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(index=st.integers(0, 40_000), value=st.integers(0, 255), cut=st.booleans())
def test_mutated_long_arrays_only_raise_model_import_error(
    tmp_path: Path, index: int, value: int, cut: bool
) -> None:
    d = Dims(n_layer=1, n_embd=32, n_head=2, n_head_kv=1, head_dim=16, n_ff=64, n_vocab=8)
    kv = decoder_kv("llama", d)
    kv["tokenizer.ggml.tokens"] = [f"t{i}" for i in range(5000)]
    source = tmp_path / "long.gguf"
    if not source.exists():
        write_gguf(source, "llama", kv, decoder_tensors(d))
    blob = bytearray(source.read_bytes())
    blob[index % len(blob)] = value
    if cut:
        blob = blob[: index % len(blob)]
    path = tmp_path / "mutated.gguf"
    path.write_bytes(bytes(blob))
    try:
        import_gguf(path)
    except ModelImportError as err:
        assert "\n" not in str(err)
