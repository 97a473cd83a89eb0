"""Architectures whose compute graph the compute-buffer estimate does not follow: their
buffers are a plain transformer's of the same size, and the plan says so. Measured
against llama.cpp b11434 in docs/validation.md (the xfail rows of the compute tables).
Every architecture measured so far is modelled (Kimi Linear's graph in compute_kimi), so
the table is empty; the plan's note stays for the next one that is not."""

from __future__ import annotations

COMPUTE_NOT_MODELLED: dict[str, str] = {}


def compute_note(architecture: str) -> str | None:
    """The plan's note for an architecture whose compute buffer is not modelled."""
    return COMPUTE_NOT_MODELLED.get(architecture)
