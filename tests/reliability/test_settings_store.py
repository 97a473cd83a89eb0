"""A damaged settings file is set aside (never deleted), the user told once, the app starts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, QStandardPaths

from rigspark_gui.ui import dialogs, settings_store
from rigspark_gui.ui.settings_store import IMPORTED_KEY, open_settings

pytestmark = pytest.mark.gui

GARBAGE: dict[str, bytes] = {
    "random bytes": random.Random(7).randbytes(4096),
    "NUL bytes": b"\0" * 512,
    "a PNG": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4,
    "invalid UTF-8": b"[General]\nplan/model=\xff\xfe\n",
    "unclosed section": b"[General\nplan/context=8192\n",
    "prose": b"this is not a settings file\nat all\n",
}


@pytest.fixture(autouse=True)
def _headless(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    dialogs.shown.clear()


@pytest.mark.parametrize("case", GARBAGE)
def test_corrupt_file_is_set_aside_and_the_user_told_once(qapp, tmp_path: Path, case: str) -> None:
    path = tmp_path / "settings.ini"
    path.write_bytes(GARBAGE[case])

    settings = open_settings(path)

    kept = tmp_path / "settings.ini.corrupt-1"
    assert kept.read_bytes() == GARBAGE[case]  # the user's file, byte for byte
    assert [(m.kind, m.title) for m in dialogs.shown] == [("error", "Settings reset")]
    assert "settings.ini.corrupt-1" in dialogs.shown[0].message
    assert settings.status() == QSettings.Status.NoError
    assert settings.allKeys() == []
    settings.setValue("plan/context", 4096)
    settings.sync()
    assert path.is_file()

    # The next start finds a sound file: nothing to say, nothing set aside.
    dialogs.shown.clear()
    again = open_settings(path)
    assert dialogs.shown == []
    assert str(again.value("plan/context")) == "4096"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.ini", "settings.ini.corrupt-1"]


def test_earlier_copies_are_never_overwritten(qapp, tmp_path: Path) -> None:
    path = tmp_path / "settings.ini"
    for n in (1, 2):
        (tmp_path / f"settings.ini.corrupt-{n}").write_bytes(b"older %d" % n)
    path.write_bytes(b"\0\0\0")

    open_settings(path)

    assert (tmp_path / "settings.ini.corrupt-1").read_bytes() == b"older 1"
    assert (tmp_path / "settings.ini.corrupt-2").read_bytes() == b"older 2"
    assert (tmp_path / "settings.ini.corrupt-3").read_bytes() == b"\0\0\0"


def test_a_sound_file_is_kept_as_it_is(qapp, tmp_path: Path) -> None:
    path = tmp_path / "settings.ini"
    first = QSettings(str(path), QSettings.Format.IniFormat)
    first.setValue("plan/model", "qwen2.5-7b-instruct")
    first.setValue("window/geometry", b"\x01\x00\xff binary is escaped by Qt")
    first.setValue("models/imported", ["/models/a.gguf", "/models/b, with comma.gguf"])
    first.sync()
    del first

    settings = open_settings(path)

    assert dialogs.shown == []
    assert settings.value("plan/model") == "qwen2.5-7b-instruct"
    assert settings.value(IMPORTED_KEY) == ["/models/a.gguf", "/models/b, with comma.gguf"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("imported=@Variant(\\0\\0\\0\\x2\\0\\0\\0\\x5)", None),  # an int
        ("imported=@ByteArray(\\xff\\0)", None),
        ("imported=", None),
        ("imported=/a.gguf, /a.gguf, /b.gguf", ["/a.gguf", "/b.gguf"]),
    ],
)
def test_garbled_imported_list_loses_entries_not_the_start(
    qapp, tmp_path: Path, raw: str, expected: list[str] | None
) -> None:
    path = tmp_path / "settings.ini"
    path.write_text(f"[models]\n{raw}\n", encoding="utf-8")  # as Qt writes the key

    settings = open_settings(path)

    assert dialogs.shown == []
    value = settings.value(IMPORTED_KEY)
    assert value == expected


def test_the_window_starts_on_a_garbled_imported_list(qtbot, tmp_path: Path, monkeypatch) -> None:
    from rigspark_gui.ui import background
    from rigspark_gui.ui.main_window import MainWindow

    monkeypatch.setattr(background, "POOL", background.SyncPool())
    path = tmp_path / "settings.ini"
    path.write_text(
        "[models]\nimported=@Variant(\\0\\0\\0\\x2\\0\\0\\0\\x5)\n[plan]\ncontext=banana\n",
        encoding="utf-8",
    )

    window = MainWindow(detect_on_start=False, settings=open_settings(path))
    qtbot.addWidget(window)

    assert window.session.spec is not None
    assert dialogs.shown == []


def test_default_location_is_the_app_config_folder(qapp, monkeypatch, tmp_path: Path) -> None:
    QStandardPaths.setTestModeEnabled(True)
    try:
        path = settings_store.settings_path()
        folder = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppConfigLocation)
        assert path == Path(folder) / "settings.ini"
    finally:
        QStandardPaths.setTestModeEnabled(False)


def test_a_file_that_cannot_be_moved_is_left_alone(qapp, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "settings.ini"
    path.write_bytes(b"\0garbage")

    def refuse(_path: Path) -> Path:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(settings_store, "set_aside", refuse)

    settings = open_settings(path)

    assert path.read_bytes() == b"\0garbage"
    assert [m.title for m in dialogs.shown] == ["Settings not loaded"]
    settings.setValue("plan/context", 1)
    settings.sync()
    assert path.read_bytes() == b"\0garbage"
