"""Writes that never leave a partial file: write a temporary sibling, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from pathlib import Path

from rigspark_gui.core.errors import RigSparkError


class WriteError(RigSparkError):
    """A file could not be written; nothing was changed."""


_umask_lock = threading.Lock()


def _umask() -> int:
    with _umask_lock:  # reading the umask means setting it: keep other threads out
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as err:
        raise WriteError(f"cannot write {path}: {err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        # the temporary file was owner-only (0600): give the file the user's usual mode
        with contextlib.suppress(OSError):
            os.chmod(path, 0o666 & ~_umask())
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise WriteError(f"cannot write {path}: {err.strerror or err}") from None


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, text.encode("utf-8"))
