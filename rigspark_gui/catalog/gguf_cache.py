"""A GGUF header read once: the model spec a local file gave, kept in the user cache by
the file's identity (resolved path, size, modification time) and the program's code, so
asking again about the same file (another margin, another context) neither reads the
header nor imports the `gguf` package. A changed file is read again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from rigspark_gui.catalog.validated import layout_of, read_validated

if TYPE_CHECKING:
    from rigspark_gui.core.model import ModelSpec


def gguf_spec(path: Path) -> ModelSpec:
    from rigspark_gui.core.model import Geometry, ModelSpec, TensorInfo

    st = os.stat(path)
    identity = f"{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()

    def read(_: bytes) -> ModelSpec:
        from rigspark_gui.catalog.gguf_import import import_gguf

        return import_gguf(path)

    layout = layout_of(ModelSpec, Geometry, TensorInfo)
    return read_validated(identity, kind="gguf-header", layout=layout, validate=read)
