"""Hybrid architectures against llama.cpp b11434's allocator, from the recorded cases.

validation/hybrid_b11434.json holds what b11434 allocated, in exact bytes, for synthetic
GGUFs of qwen35, qwen35moe, qwen3next, nemotron_h, nemotron_h_moe, granitehybrid, lfm2
and lfm2moe (`python validation/hybrid_b11434.py` records it), with each file's imported
ModelSpec. Every case is re-predicted here from the spec and settings alone.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.formats.model_spec import read_model_spec
from validation.agreement import compute_tolerance
from validation.hybrid_b11434 import OUT, errors, predict
from validation.synth_hybrid import MODELS, HybridSynth, write_gguf

DATA: dict[str, Any] = json.loads(OUT.read_text())
SPECS = {k: read_model_spec(v["spec"]) for k, v in DATA["models"].items()}
CASES = DATA["cases"]
IDS = [
    f"{c['model']}-ctx{c['n_ctx']}-{c['type_k']}-fa{int(c['flash_attn'])}-seq{c['n_seq']}"
    f"-rs{c.get('n_rs_seq', 0)}"
    for c in CASES
]


def test_the_cases_cover_every_hybrid_architecture() -> None:
    archs = {m["arch"] for m in DATA["models"].values()}
    assert archs == {
        "qwen35", "qwen35moe", "qwen3next", "nemotron_h", "nemotron_h_moe",
        "granitehybrid", "lfm2", "lfm2moe",
    }  # fmt: skip
    assert {m["quant"] for m in DATA["models"].values()} >= {"F16", "Q8_0", "Q4_0", "Q4_K_M"}
    assert all(c["measured"]["exact"] for c in CASES), "sizes must be exact bytes"
    assert all(c["measured"]["state"] > 0 for c in CASES)
    assert any(c.get("n_rs_seq", 0) for c in CASES) and {c["n_seq"] for c in CASES} >= {1, 4}
    assert any(c.get("kv_unified") for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_weights_kv_state_and_output_are_exact(case: dict[str, Any]) -> None:
    err = errors(SPECS[case["model"]], case)
    assert (err["weights"], err["kv"], err["state"], err["output"]) == (0, 0, 0, 0)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compute_within_tolerance(case: dict[str, Any]) -> None:
    err = errors(SPECS[case["model"]], case)
    assert abs(err["compute"]) <= compute_tolerance(case["measured"]["compute"])


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("n_rs_seq")])
def test_the_plan_shows_the_state_apart_from_the_kv(case: dict[str, Any]) -> None:
    p = predict(SPECS[case["model"]], case)
    assert p["state_in_load"] == case["measured"]["state"]
    assert p["kv"] == case["measured"]["kv"]


@pytest.mark.parametrize("name", [m.name for m in MODELS])
def test_the_header_reads_back_the_synthetic_geometry(name: str) -> None:
    """What the GGUF importer reads from each file is the geometry it was written from
    (the MTP block a slot without KV, state or tensors, as llama.cpp skips it)."""
    written = next(m for m in MODELS if m.name == name).geometry
    assert SPECS[f"{name}-F16"].geometry == written


def test_a_small_qwen35_file_imports_without_its_mtp_block(tmp_path: Path) -> None:
    g = replace(
        MODELS[0].geometry, n_embd=64, n_head=2, n_head_kv=1, head_dim_k=64, head_dim_v=64,
        n_head_kv_per_layer=(1,) * 8 + (0,), n_ff=128, n_vocab=300, ssm_d_inner=64,
        ssm_d_state=32, ssm_dt_rank=2, ssm_n_group=1, recurrent_r_values=0,
        recurrent_s_values=0,
    )  # fmt: skip
    path = tmp_path / "q.gguf"
    write_gguf(HybridSynth("tiny", g), path)
    spec = import_gguf(path)
    assert spec.geometry == g and (g.n_layer, g.n_layer_nextn) == (9, 1)  # -ngl counts it
    assert spec.tensors is not None
    assert not any(t.name.startswith("blk.8.") for t in spec.tensors)
    assert spec.geometry.recurrent_layers == (0, 1, 2, 4, 5, 6)
