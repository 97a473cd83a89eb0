"""Draft models against llama.cpp b11434 (validation/draft_b11434.py): for each
synthetic draft llama-server loaded beside a synthetic target (`-md`, CPU backend),
core/plan/draft.py gives the draft context's model, KV, output and compute buffers as
logged (two decimals of MiB; compute within the CPU formula's 0.005 MiB). The rows
are kept in validation/draft_b11434.json."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.core.memory import output_buffer_bytes
from rigspark_gui.core.model import DraftModel
from rigspark_gui.core.plan.draft import plan_draft
from rigspark_gui.core.rig import GIB, Rig
from rigspark_gui.core.settings import make_settings

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

from synth import Synth, write_gguf  # noqa: E402

DATA = json.loads((ROOT / "validation" / "draft_b11434.json").read_text())
MIB = 1 << 20


def _mib(n: int) -> float:
    return float(f"{n / MIB:.2f}")


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("draft")
    out = {"target": d / "target.gguf"}
    write_gguf(Synth(**DATA["target"]), out["target"])
    for row in DATA["rows"]:
        name = row["draft"]["name"]
        if name not in out:
            out[name] = d / f"{name}.gguf"
            write_gguf(Synth(**row["draft"]), out[name])
    return out


@pytest.mark.parametrize(
    "row",
    DATA["rows"],
    ids=lambda r: f"{r['draft']['name']}-{r['context']}-fa-{r['fa']}-np{r['np']}",
)
def test_the_draft_context_matches_llama_server(row: dict[str, Any], files) -> None:
    target = import_gguf(files["target"])
    draft = import_gguf(files[row["draft"]["name"]])
    spec = replace(target, draft=DraftModel(spec=draft, quant=draft.available_quants[0]))
    auto = row["np"] < 0  # llama-server's auto: 4 slots on one unified cache
    s = make_settings(
        context=row["context"],
        parallel=4 if auto else row["np"],
        kv_unified=auto,
        flash_attn=row["fa"] == "on",
    )
    d = plan_draft(spec, Rig(name="cpu", ram_total_bytes=24 * GIB), s)
    assert d is not None
    got = row["mib"]
    out = output_buffer_bytes(draft.geometry, s)
    assert _mib(d.weights_bytes) == got["model"]
    assert _mib(d.kv_bytes) == got["KV"]
    assert _mib(out) == got["output"]
    # the CPU compute formula's own tolerance (docs/validation.md: 0.005 MiB on
    # Llama-shaped graphs) plus the log's rounding
    assert abs((d.compute_bytes - out) / MIB - got["compute"]) <= 0.01
