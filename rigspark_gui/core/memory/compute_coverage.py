"""Architectures whose compute graph the compute-buffer estimate does not follow: their
buffers are a plain transformer's of the same size, and the plan says so. Measured
against llama.cpp b11434 in docs/validation.md (the xfail rows of the compute tables)."""

from __future__ import annotations

COMPUTE_NOT_MODELLED: dict[str, str] = {
    "gemma3n": (
        "Gemma 3n's graph (AltUp, LAuReL, per-layer inputs) is not modelled: its compute "
        "buffer is a plain transformer's, up to 35 MiB above llama.cpp's on the validation "
        "models"
    ),
    "kimi-linear": (
        "Kimi Linear's graph (absorbed MLA, the KDA chunked delta rule) is not modelled: "
        "at Kimi-Linear-48B's widths llama.cpp's CPU compute buffer is 16-52 MiB above the "
        "estimate on the validation models"
    ),
    "deepseek4": (
        "DeepSeek V4's graph is not modelled: its compute buffer is a plain transformer's, "
        "while llama.cpp's grows with the context (indexer scores over the compressed "
        "rows; 180 MiB against 14 MiB estimated at 131,072 tokens on the validation "
        "models): leave room beyond the plan at long contexts"
    ),
}


def compute_note(architecture: str) -> str | None:
    """The plan's note for an architecture whose compute buffer is not modelled."""
    return COMPUTE_NOT_MODELLED.get(architecture)
