"""Where the program's own data lives, in a checkout, an install or a frozen bundle."""

from __future__ import annotations

import sys
from pathlib import Path


def data_dir() -> Path:
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "data"
    return Path(__file__).resolve().parent.parent / "data"


def data_file(name: str) -> Path:
    return data_dir() / name
