"""Fixtures for the importer tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from importer_helpers import Dims, decoder_kv, decoder_tensors, write_gguf


@pytest.fixture
def tiny_gguf(tmp_path: Path) -> Path:
    """A complete but small GGUF (a few KB) for corruption tests."""
    d = Dims(n_layer=1, n_embd=32, n_head=2, n_head_kv=1, head_dim=16, n_ff=64, n_vocab=8)
    written = write_gguf(
        tmp_path / "tiny.gguf",
        "llama",
        decoder_kv("llama", d),
        decoder_tensors(d, wtype="Q8_0", embd_type="F16"),
    )
    return written.path
