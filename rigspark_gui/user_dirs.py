"""Where RigSpark keeps what it learns about this machine (measured RAM bandwidth,
on-machine speed calibration): the per-user cache folder. No Qt, so the CLI shares it.

`RIGSPARK_CACHE_DIR` overrides the location (tests point it at a temporary folder)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

APP_DIR = "rigspark"


def cache_dir() -> Path:
    override = os.environ.get("RIGSPARK_CACHE_DIR")
    if override:
        return Path(override)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / APP_DIR
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / APP_DIR / "cache"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / APP_DIR
