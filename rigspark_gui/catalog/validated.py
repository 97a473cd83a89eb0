"""Files validated once: the records a file gave, kept by its content for the next run.

Every file RigSpark reads is validated by its pydantic model. Importing pydantic and
building its validators costs more than a whole plan on a small machine (~0.1 s on two
cores), and most files (the shipped catalog, GPU database and speed model, a user's rig
file) are the same bytes run after run. So the engine records a file turned into are
kept in the user cache under a hash of the file's bytes, the program's version and the
layout of those records; reading the same bytes again loads the records without
pydantic. Different bytes, another version, changed records, or an entry that cannot be
read: the file is validated again. A cache that cannot be written is simply not used.

Only engine records (frozen dataclasses, tuples, enums) are kept, never pydantic models,
and only in the user's own cache folder.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from rigspark_gui.identity import APP_VERSION
from rigspark_gui.user_dirs import cache_dir

try:  # the builtin module: hashlib would first load OpenSSL (~5 ms at start-up)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - CPython builds without it
    from hashlib import blake2b

T = TypeVar("T")
FOLDER = "validated"
MAX_ENTRIES = 128  # beyond this many kept files, the oldest go


@cache
def code_stamp() -> str:
    """When and how big each of the program's modules is: an upgrade or an edit of the
    code that reads a file must not reuse what an older version made of it."""
    root = Path(__file__).resolve().parents[1]
    stamps = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                stamps.append(f"{name}:{st.st_mtime_ns}:{st.st_size}")
    return ",".join(sorted(stamps))


def layout_of(*records: type) -> str:
    """What a kept value's classes look like: their names and fields with types."""
    parts = []
    for cls in records:
        fields = (
            ((f.name, str(f.type)) for f in dataclasses.fields(cls))
            if dataclasses.is_dataclass(cls)
            else ()
        )
        parts.append(f"{cls.__module__}.{cls.__qualname__}{tuple(fields)}")
    return ";".join(parts)


def read_validated(data: bytes, *, kind: str, layout: str, validate: Callable[[bytes], T]) -> T:
    """`validate(data)`, or what it returned for these bytes before."""
    key = blake2b(
        b"\0".join(
            (kind.encode(), APP_VERSION.encode(), code_stamp().encode(), layout.encode(), data)
        ),
        digest_size=20,
    ).hexdigest()
    kept = cache_dir() / FOLDER / f"{kind}-{key}.pickle"
    try:
        with kept.open("rb") as f:
            value: T = pickle.load(f)
        return value
    except Exception:  # absent, unreadable or from other code: validate again
        pass
    value = validate(data)
    _keep(kept, value)
    return value


def _keep(kept: Path, value: Any) -> None:
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        part = kept.with_name(f"{kept.name}.{os.getpid()}.part")
        with part.open("wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(part, kept)
        _prune(kept.parent)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return  # a read-only or full cache: validate each time


def _prune(folder: Path) -> None:
    entries = [e for e in os.scandir(folder) if e.name.endswith(".pickle")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime)
    for e in entries[: len(entries) - MAX_ENTRIES]:
        Path(e.path).unlink(missing_ok=True)


def read_bytes(path: Path, *, what: str, error: type[Exception], max_bytes: int) -> bytes:
    """A file's bytes within `max_bytes`, or `error` with a one-line reason."""
    try:
        if path.stat().st_size > max_bytes:
            raise error(f"{path.name}: not a {what} (larger than {max_bytes >> 20} MiB)")
        return path.read_bytes()
    except OSError as err:
        raise error(f"cannot read {what} {path}: {err.strerror or err}") from None
