"""Files validated once (catalog/validated.py): the same bytes give the kept records,
anything else is validated again, and a broken or unwritable cache only costs time."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from rigspark_gui.catalog import validated
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.core.errors import InvalidRigError
from rigspark_gui.core.rig import GIB

RIG = '{"schema_version": 1, "ram_total_bytes": %d}'


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv("RIGSPARK_CACHE_DIR", str(where))
    return where / validated.FOLDER


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every validation that really runs, by the bytes it was given."""
    seen: list[bytes] = []
    real = validated.read_validated

    def spy(data, *, kind, layout, validate):  # type: ignore[no-untyped-def]
        def counted(b: bytes):  # type: ignore[no-untyped-def]
            seen.append(b)
            return validate(b)

        return real(data, kind=kind, layout=layout, validate=counted)

    monkeypatch.setattr(validated, "read_validated", spy)
    return seen


def test_the_same_bytes_are_validated_once(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _counting(monkeypatch)
    path = tmp_path / "rig.json"
    path.write_text(RIG % (64 * GIB))
    first = load_rig(path, None)
    again = load_rig(path, None)
    assert first == again and first.ram_total_bytes == 64 * GIB
    assert len(seen) == 1 and len(list(cache.glob("rig-*.pickle"))) == 1
    path.write_text(RIG % (32 * GIB))  # other bytes: validated, never the old answer
    assert load_rig(path, None).ram_total_bytes == 32 * GIB
    assert len(seen) == 2


def test_a_bad_file_is_refused_every_time_and_never_kept(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "rig.json"
    path.write_text('{"schema_version": 1, "ram_total_bytes": -1}')
    for _ in range(2):
        with pytest.raises(InvalidRigError, match="ram_total_bytes"):
            load_rig(path, None)
    assert not cache.exists() or not list(cache.iterdir())


def test_a_corrupt_entry_is_validated_again(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rig.json"
    path.write_text(RIG % GIB)
    load_rig(path, None)
    (kept,) = cache.glob("rig-*.pickle")
    kept.write_bytes(b"not a pickle")
    seen = _counting(monkeypatch)
    assert load_rig(path, None).ram_total_bytes == GIB
    assert len(seen) == 1


def test_another_program_version_or_record_layout_does_not_reuse_an_entry(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rig.json"
    path.write_text(RIG % GIB)
    load_rig(path, None)
    seen = _counting(monkeypatch)
    monkeypatch.setattr(validated, "APP_VERSION", "99.0")
    load_rig(path, None)
    assert len(seen) == 1
    data = path.read_bytes()
    ok = validated.read_validated(data, kind="x", layout="a", validate=lambda b: 1)
    assert ok == 1
    assert validated.read_validated(data, kind="x", layout="b", validate=lambda b: 2) == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_cache_still_plans(cache: Path, tmp_path: Path) -> None:
    cache.parent.mkdir(parents=True)
    cache.parent.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        path = tmp_path / "rig.json"
        path.write_text(RIG % GIB)
        assert load_rig(path, None).ram_total_bytes == GIB
    finally:
        cache.parent.chmod(stat.S_IRWXU)


def test_a_cache_that_is_a_file_still_plans(cache: Path, tmp_path: Path) -> None:
    cache.parent.mkdir(parents=True)
    cache.write_text("in the way")
    path = tmp_path / "rig.json"
    path.write_text(RIG % GIB)
    assert load_rig(path, None).ram_total_bytes == GIB


def test_the_cache_keeps_a_bounded_number_of_files(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(validated, "MAX_ENTRIES", 5)
    for i in range(9):
        path = tmp_path / f"rig{i}.json"
        path.write_text(RIG % ((i + 1) * GIB))
        load_rig(path, None)
    assert len(list(cache.glob("*.pickle"))) == 5
    assert not list(cache.glob("*.part"))


def test_the_shipped_files_load_the_same_from_the_cache(cache: Path) -> None:
    from rigspark_gui.catalog.gpu_database import load_gpu_database
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.catalog.perf import load_perf
    from rigspark_gui.resources import data_file

    cold = (load_catalog(), load_gpu_database(data_file("gpus.json")), load_perf())
    warm = (load_catalog(), load_gpu_database(data_file("gpus.json")), load_perf())
    assert [len(list(cache.glob(f"{k}-*.pickle"))) for k in ("catalog", "gpus", "speed")] == [
        1,
        1,
        1,
    ]
    assert cold[0].specs() == warm[0].specs() and cold[0].entries == warm[0].entries
    assert cold[1].gpus == warm[1].gpus
    assert warm[1].match("RTX 3090") == cold[1].match("RTX 3090")
    assert cold[2] == warm[2]
