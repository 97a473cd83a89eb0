"""Where the program's own data lives, in a checkout, an install or a frozen bundle."""

from __future__ import annotations

import sys
from pathlib import Path


def _root() -> Path:
    # PyInstaller unpacks data/ and resources/ under sys._MEIPASS (packaging/rigspark.spec);
    # in a checkout or an editable install they sit at the repository root.
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen)
    return Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    return _root() / "data"


def data_file(name: str) -> Path:
    return data_dir() / name


def resource_file(name: str) -> Path:
    """A file from resources/ (the app icon), beside data/."""
    return _root() / "resources" / name
