"""A few hundred inputs of the fuzz campaign (`make fuzz` runs the full one), and the
inputs that once broke a reader, kept as regressions."""

from __future__ import annotations

import random
import struct
import tracemalloc
from pathlib import Path

import pytest

from fuzz import harness, mutate, seeds
from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.catalog.hf_import import import_hf
from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.core.errors import CatalogError, InvalidRigError, ModelImportError

INPUTS_PER_TARGET = 80


@pytest.fixture(scope="module")
def corpus() -> harness.Corpus:
    return harness.Corpus(random.Random(0))


@pytest.mark.parametrize("target", harness.TARGETS)
def test_mutated_inputs_give_only_typed_errors(
    corpus: harness.Corpus, tmp_path: Path, target: str
) -> None:
    report = harness.fuzz(target, INPUTS_PER_TARGET, seed=20261130, work=tmp_path, corpus=corpus)

    stats = report.stats[target]
    assert stats.inputs == INPUTS_PER_TARGET
    assert report.failures == {}, "\n\n".join(f.detail for f in report.failures.values())
    assert stats.typed_errors > 0  # the mutations do reach the readers' checks


def test_seeds_are_accepted(corpus: harness.Corpus, tmp_path: Path) -> None:
    """Unmutated seeds import: the campaign starts from valid files, not from noise."""
    for i, data in enumerate(corpus.gguf):
        path = tmp_path / f"seed{i}.gguf"
        path.write_bytes(data)
        import_gguf(path)
    assert mutate.gguf_spots(corpus.gguf[0])[0]  # the mutator finds the header fields


def test_the_harness_reports_a_crash(tmp_path: Path) -> None:
    report = harness.Report()

    def broken() -> None:
        raise IndexError("reader bug")

    harness.check_one("gguf", broken, b"x", report)
    harness.check_one("gguf", lambda: None, b"y", report)

    assert report.stats["gguf"].failures == 1 and report.stats["gguf"].accepted == 1
    (failure,) = report.failures.values()
    assert failure.kind == "exception" and failure.data == b"x"


def test_the_harness_reports_memory_hogs(tmp_path: Path) -> None:
    report = harness.Report()
    tracemalloc.start()
    try:
        harness.check_one(
            "rig", lambda: bytearray(harness.MEMORY_LIMIT_BYTES + (1 << 20)), b"z", report
        )
    finally:
        tracemalloc.stop()
    (failure,) = report.failures.values()
    assert failure.kind == "memory"


# --------------------------------------------------------------------------- regressions
# Each of these escaped as a bare exception before the fix named in docs/reliability.md.

JSON_BREAKERS = {
    "nesting deeper than the decoder's stack": b'{"gpus": ' + b"[" * 100_000,
    "a 5000-digit integer": b'{"schema_version": ' + b"9" * 5000 + b"}",
    "invalid UTF-8": b'{"name": "\xff\xfe"}',
    "a lone surrogate byte sequence": b'{"name": "\xed\xa0\x80"}',
}


@pytest.mark.parametrize("case", JSON_BREAKERS)
def test_rig_file_json_breakers(tmp_path: Path, case: str) -> None:
    path = tmp_path / "rig.json"
    path.write_bytes(JSON_BREAKERS[case])
    with pytest.raises(InvalidRigError, match="is not valid JSON"):
        load_rig(path, None)


@pytest.mark.parametrize("case", JSON_BREAKERS)
def test_catalog_json_breakers(tmp_path: Path, case: str) -> None:
    path = tmp_path / "models.json"
    path.write_bytes(JSON_BREAKERS[case])
    with pytest.raises(CatalogError, match="is not valid JSON"):
        load_catalog(path)


@pytest.mark.parametrize("case", JSON_BREAKERS)
def test_gpu_database_json_breakers(tmp_path: Path, case: str) -> None:
    path = tmp_path / "gpus.json"
    path.write_bytes(JSON_BREAKERS[case])
    with pytest.raises(CatalogError, match="not valid JSON"):
        load_gpu_database(path)


def test_safetensors_index_is_read_without_a_64_mib_buffer(tmp_path: Path) -> None:
    # f.read(limit + 1) allocated the whole 64 MiB limit up front for a 100-byte index.
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(
        '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, '
        '"num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 32, '
        '"max_position_embeddings": 2048}',
        encoding="utf-8",
    )
    (folder / "model.safetensors.index.json").write_text(
        '{"metadata": {"total_size": 1000}}', encoding="utf-8"
    )
    tracemalloc.start()
    try:
        result = import_hf(folder)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.safetensors_total_bytes == 1000
    assert peak < 8 << 20


def test_huge_counts_allocate_nothing(tmp_path: Path) -> None:
    """A header claiming 2^60 tensors, or a 1 TB string, is refused before any allocation."""
    header = b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 1)
    key = struct.pack("<Q", 12) + b"general.name" + struct.pack("<IQ", 8, 1 << 40)
    path = tmp_path / "huge.gguf"
    path.write_bytes(header + key + b"\0" * 64)
    tracemalloc.start()
    try:
        with pytest.raises(ModelImportError, match=r"absurd count|truncated"):
            import_gguf(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


def test_seed_files_are_the_real_data() -> None:
    assert seeds.catalog_seed()["models"]
    assert seeds.gpu_database_seed()["gpus"]
    assert any(r.get("name") == "2x RTX 3090 workstation" for r in seeds.rig_seeds())


def test_config_name_with_a_lone_surrogate(tmp_path: Path) -> None:
    # JSON may escape a lone surrogate; validation once refused it as a bare ValidationError.
    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "llama", "_name_or_path": "org/Lla\\ud800ma", "num_hidden_layers": 2, '
        '"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, '
        '"vocab_size": 32, "max_position_embeddings": 2048}',
        encoding="utf-8",
    )
    spec = import_hf(config).spec
    assert spec.name == "Lla?ma"
    spec.name.encode("utf-8")  # printable and encodable anywhere

    config.write_text('{"model_type": "ll\\udc00ama"}', encoding="utf-8")
    with pytest.raises(ModelImportError) as err:
        import_hf(config)
    str(err.value).encode("utf-8")  # a message the CLI can print
