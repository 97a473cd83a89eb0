"""The window's settings file: an INI file that a damaged disk cannot keep from opening.

`open_settings()` opens `settings.ini` in the per-user config folder. A file that Qt
cannot parse, or that holds what Qt never writes (NUL bytes, other control characters,
invalid UTF-8), is set aside as `settings.ini.corrupt-<n>` (never deleted: it may hold
what the user wants back), a fresh file takes its place, and the user is told once.
Entries the window reads as lists (imported models) are normalised on open so that a
hand-edited or half-written value can only lose entries, never stop the start.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from PySide6.QtCore import QSettings, QStandardPaths

from rigspark_gui.ui import dialogs

SETTINGS_NAME = "settings.ini"
IMPORTED_KEY = "models/imported"
MAX_IMPORTED = 50
# A settings file is a few KB; anything this large is not one.
_MAX_SETTINGS_BYTES = 4 << 20
_ALLOWED_CONTROLS = frozenset("\t\r\n")


def settings_path() -> Path:
    """Where the settings live: Qt's per-user config folder for this application."""
    folder = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppConfigLocation)
    return Path(folder or Path.home() / ".config" / "rigspark") / SETTINGS_NAME


def corruption(path: Path) -> str | None:
    """Why the file at `path` is not a settings file Qt wrote, or None if it looks sound."""
    try:
        if path.stat().st_size > _MAX_SETTINGS_BYTES:
            return "it is far too large to be a settings file"
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"it cannot be read ({err.strerror or err})"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "it is not text (invalid UTF-8)"
    if any(ch < " " and ch not in _ALLOWED_CONTROLS for ch in text):
        return "it holds binary data"
    continuation = False
    for line in text.splitlines():
        stripped = line.strip()
        ok = (
            continuation
            or not stripped
            or stripped.startswith((";", "#"))
            or (stripped.startswith("[") and stripped.endswith("]"))
            or "=" in stripped
        )
        if not ok:
            return "a line is neither a section nor a key = value"
        continuation = stripped.endswith("\\")
    return None


def set_aside(path: Path) -> Path:
    """Rename `path` to the first free `<name>.corrupt-<n>` and return the new path."""
    n = 1
    while True:
        target = path.with_name(f"{path.name}.corrupt-{n}")
        if not target.exists():
            os.replace(path, target)
            return target
        n += 1


def _clean_imported(settings: QSettings) -> None:
    """Keep only usable paths in the imported-model list (str, no NUL, no duplicates)."""
    if not settings.contains(IMPORTED_KEY):
        return
    raw = settings.value(IMPORTED_KEY)
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    clean: list[str] = []
    for item in items:
        if isinstance(item, str) and item.strip() and "\0" not in item and item not in clean:
            clean.append(item)
    clean = clean[:MAX_IMPORTED]
    if clean != items or not isinstance(raw, (str, list)):
        if clean:
            settings.setValue(IMPORTED_KEY, clean)
        else:
            settings.remove(IMPORTED_KEY)


def open_settings(path: Path | None = None) -> QSettings:
    """The window's QSettings; a corrupt file is set aside and the user told why."""
    path = path or settings_path()
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
    reason = corruption(path)
    settings: QSettings | None = None
    if reason is None:
        settings = QSettings(str(path), QSettings.Format.IniFormat)
        if settings.status() == QSettings.Status.FormatError:
            reason = "Qt could not parse it"
        elif settings.status() == QSettings.Status.AccessError:
            reason = "it cannot be read"
    if reason is not None:
        settings = None
        try:
            kept = set_aside(path)
        except OSError as err:
            # Cannot move it: run on defaults in memory rather than overwrite the file.
            dialogs.show_error(
                None,
                "Settings not loaded",
                f"The settings file {path} is damaged ({reason}) and could not be set aside "
                f"({err.strerror or err}). RigSpark starts with default settings and keeps "
                f"them in {path.name}.unsaved, leaving the damaged file as it is.",
            )
            unsaved = path.with_name(path.name + ".unsaved")
            return QSettings(str(unsaved), QSettings.Format.IniFormat)
        dialogs.show_error(
            None,
            "Settings reset",
            f"The settings file was damaged ({reason}). It has been kept as {kept.name} "
            f"in {kept.parent}, and RigSpark starts with default settings.",
        )
    if settings is None:
        settings = QSettings(str(path), QSettings.Format.IniFormat)
    _clean_imported(settings)
    return settings
