"""MTP drafting against llama.cpp b11434 (validation/mtp_b11434.py): for the synthetic
GGUFs with an MTP block (Qwen3.5 at F32, Q8_0, Q4_K_M; Nemotron-H MoE, DeepSeek V3.2 and
GLM-5 as written), core/plan/mtp.py gives the MTP weights, the MTP context's KV, output
and compute buffers and the target's extra recurrent rows to the byte as b11434
allocated them on the CPU. The rows are kept in validation/mtp_b11434.json; the headers
are re-read from freshly written files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.core.model import ModelSpec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))
sys.path.insert(0, str(ROOT))

from validation.agreement import compute_tolerance  # noqa: E402
from validation.mtp_b11434 import MODEL, MORE, predict, write_model  # noqa: E402

DATA = json.loads((ROOT / "validation" / "mtp_b11434.json").read_text())
EXACT = ("weights", "kv", "state", "output")


@pytest.fixture(scope="module")
def f32_spec(tmp_path_factory: pytest.TempPathFactory) -> ModelSpec:
    path = tmp_path_factory.mktemp("mtp") / f"{MODEL}-F32.gguf"
    write_model(MODEL, path)
    return import_gguf(path)


def _rows(quant: str, model: str = MODEL) -> list[dict[str, Any]]:
    return [r for r in DATA["rows"] if r["quant"] == quant and r["model"] == model]


MORE_ROWS = [r for r in DATA["rows"] if r["model"] in MORE]


def test_the_recording_covers_the_settings() -> None:
    rows = _rows("F32")
    assert DATA["build"] == "b11434" and len(rows) >= 6
    assert {r["flash_attn"] for r in rows} == {True, False}
    assert {r["n_seq"] for r in rows} >= {1, 2, 4} and any(r["kv_unified"] for r in rows)
    assert {r["quant"] for r in DATA["rows"] if r["model"] == MODEL} == {"F32", "Q8_0", "Q4_K_M"}
    for name in MORE:
        rows = [r for r in MORE_ROWS if r["model"] == name]
        assert len(rows) >= 6 and {r["flash_attn"] for r in rows} == {True, False}


@pytest.mark.parametrize("i", range(len(_rows("F32"))))
def test_f32_rows(f32_spec: ModelSpec, i: int) -> None:
    row = _rows("F32")[i]
    got, want = predict(f32_spec, row), row["measured"]
    for k in EXACT:
        assert got[k] == want[k], (k, row)
    assert got["compute"] == want["compute"], row


@pytest.fixture(scope="module")
def more_specs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelSpec]:
    d = tmp_path_factory.mktemp("mtp-more")
    out = {}
    for name in MORE:
        write_model(name, d / f"{name}.gguf")
        out[name] = import_gguf(d / f"{name}.gguf")
    return out


@pytest.mark.parametrize("i", range(len(MORE_ROWS)))
def test_other_architectures(more_specs: dict[str, ModelSpec], i: int) -> None:
    """Nemotron-H MoE (GQA without RoPE, the MoE on the output rows alone), DeepSeek V3.2
    and GLM-5 (absorbed MLA, no indexer cache): every figure to the byte."""
    row = MORE_ROWS[i]
    got, want = predict(more_specs[row["model"]], row), row["measured"]
    for k in (*EXACT, "compute"):
        assert got[k] == want[k], (k, row)
    assert abs(got["compute"] - want["compute"]) <= compute_tolerance(want["compute"])


@pytest.mark.parametrize("quant", ["Q8_0", "Q4_K_M"])
def test_quantized_rows_from_the_recipe(quant: str) -> None:
    """The quantized files' MTP tensors as llama-quantize typed them, predicted for a
    catalog model (no header: llama-quantize's recipe, the MTP block's attn_v and
    ffn_down counted after the trunk's)."""
    from synth_hybrid import MODELS

    g = next(m for m in MODELS if m.name == MODEL).geometry
    spec = ModelSpec(id=MODEL, name=MODEL, geometry=g, quants=(quant,))
    (row,) = _rows(quant)
    got, want = predict(spec, row), row["measured"]
    for k in EXACT:
        assert got[k] == want[k], (k, row)
    assert want["weights"] < _rows("F32")[0]["measured"]["weights"]


def test_llama_server_runs_the_mtp_context() -> None:
    """llama-server --spec-type draft-mtp itself: the MTP context after the target's,
    n_rs_seq 3 on the target, one output row for the draft and its buffers in MiB."""
    lines = DATA["server"]
    at = next(i for i, x in enumerate(lines) if "creating MTP draft context" in x)
    target, draft = lines[:at], lines[at:]
    assert "llama_context: n_rs_seq              = 3" in target
    assert "llama_context: n_rs_seq              = 0" in draft
    assert any("KV buffer size =     4.00 MiB" in x for x in draft)
    first = next(r for r in _rows("F32") if r["n_ctx"] == 4096 and r["flash_attn"])
    mib = round(first["measured"]["compute"] / (1 << 20), 2)
    assert any(f"compute buffer size = {mib:8.2f} MiB" in x for x in draft)


def test_the_probe_source_is_kept() -> None:
    src = (ROOT / "validation" / "mtp_probe.c").read_text()
    assert "LLAMA_CONTEXT_TYPE_MTP" in src and "load_mtp" in src
