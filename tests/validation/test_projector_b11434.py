"""Vision projectors against llama.cpp b11434 (validation/projector_b11434.py): for each
synthetic mmproj llama-server loaded, RigSpark's header reader gives the weights clip.cpp
logs, and core/memory/projector.py the compute buffer it reserves at warm-up, with and
without flash attention (CPU backend), and fit's own estimate is their sum. The rows were
measured once and are kept in validation/projector_b11434.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rigspark_gui.core.memory.projector import compute_bytes
from rigspark_gui.core.model import Projector

ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((ROOT / "validation" / "projector_b11434.json").read_text())
ROWS: list[dict[str, Any]] = DATA["rows"]
MIB = 1 << 20


def _projector(row: dict[str, Any]) -> Projector:
    m = row["synth"]
    return Projector(
        projector_type=m["projector_type"],
        n_embd=m["n_embd"],
        n_ff=m["n_ff"],
        n_head=m["n_head"],
        n_layer=m["n_layer"],
        image_size=m["image_size"],
        patch_size=m["patch_size"],
        n_merge=m["merge"],
        projection_dim=m["text_embd"],
        weights_bytes=row["header_weight_bytes"],
        warmup_image_size=row["header_warmup_size"],
    )


def _mib(n: int) -> float:
    # llama.cpp prints "%.2f" of bytes / 1024 / 1024
    return float(f"{n / MIB:.2f}")


def test_the_measurements_cover_the_matrix() -> None:
    assert DATA["build"] == "b11434" and len(ROWS) >= 24
    assert {r["fa"] for r in ROWS} == {"on", "off"}
    assert all(r["flash_attn"] == (r["fa"] == "on") for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['synth']['name']}-fa-{r['fa']}")
def test_weights_and_compute_match_llama_server(row: dict[str, Any]) -> None:
    p = _projector(row)
    # the header reader sums the same tensors clip.cpp loads, to the log's last digit
    assert row["header_weight_bytes"] == row["weight_bytes"]
    assert _mib(p.weights_bytes) == row["weights_mib"]
    assert row["warmup_size"] == p.warmup_image_size
    compute = compute_bytes(p, row["warmup_size"], row["fa"] == "on")
    assert _mib(compute) == row["compute_mib"]
    # llama-server's "[mtmd] estimated worst-case memory usage" (what fit adds to the margin)
    assert abs(_mib(p.weights_bytes + compute) - row["fit_estimate_mib"]) <= 0.01
