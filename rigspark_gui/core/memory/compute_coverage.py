"""Architectures whose compute graph the compute-buffer estimate does not follow: their
buffers are a plain transformer's of the same size, and the plan says so. Measured
against llama.cpp b11434 in docs/validation.md (the xfail rows of the compute tables)."""

from __future__ import annotations

COMPUTE_NOT_MODELLED: dict[str, str] = {
    "kimi-linear": (
        "Kimi Linear's graph (absorbed MLA, the KDA chunked delta rule) is not modelled: "
        "at Kimi-Linear-48B's widths llama.cpp's CPU compute buffer is 16-52 MiB above the "
        "estimate on the validation models"
    ),
}


def compute_note(architecture: str) -> str | None:
    """The plan's note for an architecture whose compute buffer is not modelled."""
    return COMPUTE_NOT_MODELLED.get(architecture)
