"""Reading the program's JSON files (catalog, GPU database, calibration, rig files).

One reader so every file gets the same bounds: a size cap before anything is read, and
bad JSON, bad UTF-8, integers past Python's 4300-digit limit (ValueError) and nesting
deeper than the decoder's stack (RecursionError) all become the caller's typed error.
"""

from __future__ import annotations

import json
from pathlib import Path

from rigspark_gui.core.errors import RigSparkError


def _short(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def read_json(
    path: Path, *, what: str, error: type[RigSparkError], max_bytes: int = 32 << 20
) -> object:
    """The parsed content of `path`, or `error` with a one-line reason naming `what`."""
    try:
        if path.stat().st_size > max_bytes:
            raise error(f"{path.name}: not a {what} (larger than {max_bytes >> 20} MiB)")
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err.strerror or err}") from None
    except (ValueError, RecursionError) as err:
        raise error(f"{path.name} is not valid JSON: {_short(err)}") from None


def parse_json(data: bytes, path: Path, *, error: type[RigSparkError] | None = None) -> object:
    """Bytes read from `path` as JSON, or `error` (CatalogError by default) naming it."""
    from rigspark_gui.core.errors import CatalogError

    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as err:
        raise (error or CatalogError)(f"{path.name} is not valid JSON: {_short(err)}") from None
