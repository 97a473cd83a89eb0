"""Kimi Linear (KDA + MLA, MoE) against llama.cpp b11434's allocator, from the recorded
cases.

validation/kimi_b11434.json holds what b11434 allocated, in exact bytes, for synthetic
kimi-linear GGUFs (`python validation/kimi_b11434.py` records it), with each file's
imported ModelSpec. Every case is re-predicted here from the spec and settings alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.memory import kv_total_bytes
from rigspark_gui.core.memory.arch_kimi import kimi_kv_refusal
from rigspark_gui.core.memory.compute_buffer import n_graph_tokens
from rigspark_gui.core.memory.compute_kimi import kimi_compute_bytes
from rigspark_gui.core.model import KvCacheType
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.formats.model_spec import read_model_spec
from validation.agreement import compute_tolerance
from validation.hybrid_b11434 import errors, predict, settings_of
from validation.kimi_b11434 import OUT
from validation.synth_kimi import MODELS

DATA: dict[str, Any] = json.loads(OUT.read_text())
SPECS = {k: read_model_spec(v["spec"]) for k, v in DATA["models"].items()}
CASES = DATA["cases"]
IDS = [
    f"{c['model']}-ctx{c['n_ctx']}-{c['type_k']}-fa{int(c['flash_attn'])}-seq{c['n_seq']}"
    f"{'-unified' if c.get('kv_unified') else ''}"
    for c in CASES
]


def test_the_cases_cover_every_synthetic_model_and_setting() -> None:
    assert {m["arch"] for m in DATA["models"].values()} == {"kimi-linear"}
    assert set(DATA["models"]) == {f"{m.name}-{q}" for m in MODELS for q in m.quants}
    assert {q for m in MODELS for q in m.quants} == {"F16", "Q8_0", "Q4_0", "Q4_K_M"}
    assert all(c["measured"]["exact"] for c in CASES), "sizes must be exact bytes"
    assert all(c["measured"]["state"] > 0 and c["measured"]["kv"] > 0 for c in CASES)
    assert {c["n_seq"] for c in CASES} >= {1, 4} and any(c.get("kv_unified") for c in CASES)
    assert {c["flash_attn"] for c in CASES} == {True, False}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_weights_kv_state_and_output_are_exact(case: dict[str, Any]) -> None:
    err = errors(SPECS[case["model"]], case)
    assert (err["weights"], err["kv"], err["state"], err["output"]) == (0, 0, 0, 0)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compute_within_tolerance(case: dict[str, Any]) -> None:
    err = errors(SPECS[case["model"]], case)
    assert abs(err["compute"]) <= compute_tolerance(case["measured"]["compute"])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_mixers_phase_is_the_buffer_where_it_peaks(case: dict[str, Any]) -> None:
    """compute_kimi's KDA / MLA phase, read off the graph, is never above what b11434
    allocated, and at Kimi-Linear-48B's widths it is the buffer itself (within 1 KiB:
    three sequences reserve 513 tokens but 512 outputs), except at 512 cells without flash
    attention, where the head, the generic estimate's phase, is the peak."""
    g, s = SPECS[case["model"]].geometry, settings_of(case)
    own = kimi_compute_bytes(g, s, n_graph_tokens(s), list(range(g.n_layer)), cpu=True)
    measured = case["measured"]["compute"]
    assert own <= measured
    if case["model"].startswith("kimi-linear-48b-widths") and case["n_ctx"] != 512:
        assert measured - own < 1024


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_plan_shows_the_state_apart_from_the_kv(case: dict[str, Any]) -> None:
    p = predict(SPECS[case["model"]], case)
    assert p["state_in_load"] == case["measured"]["state"]
    assert p["kv"] == case["measured"]["kv"]


@pytest.mark.parametrize("name", [m.name for m in MODELS])
def test_the_header_reads_back_the_synthetic_geometry(name: str) -> None:
    written = next(m for m in MODELS if m.name == name).geometry
    assert SPECS[f"{name}-F16"].geometry == written


def test_the_measured_buffers_follow_llama_cpp_formulas() -> None:
    """Independent of the engine: b11434's RS buffer is, per KDA layer and sequence, f32
    r = 3 (d_conv - 1) n_head head_dim and s = head_dim^2 n_head (llama-hparams.cpp
    n_embd_r / n_embd_s); its KV buffer only the MLA layers' latent K, kv_lora_rank +
    rope values per cell (no V: is_mla)."""
    case = next(c for c in CASES if c["model"] == "kimi-linear-moe-F16" and c["n_seq"] == 4
                and not c.get("kv_unified"))  # fmt: skip
    # 5 KDA layers, 8 heads of 64, conv kernel 4; 2 MLA layers of 128 + 32, 16384 cells
    assert case["measured"]["state"] == 5 * 4 * 4 * (3 * 3 * 8 * 64 + 64 * 64 * 8)
    assert case["measured"]["kv"] == 2 * 16384 * (128 + 32) * 2


def test_the_48b_widths_state_and_latent_cache() -> None:
    """At Kimi-Linear-48B's widths (32 KDA heads of 128, kernel 4; latent 512 + 64) each KDA
    layer holds 36864 + 524288 f32 values per sequence, each MLA layer 576 f16 per cell."""
    case = next(c for c in CASES if c["model"] == "kimi-linear-48b-widths-F16"
                and c["n_ctx"] == 4096 and c["flash_attn"])  # fmt: skip
    assert case["measured"]["state"] == 3 * 4 * (3 * 3 * 32 * 128 + 128 * 128 * 32)
    assert case["measured"]["kv"] == 4096 * 576 * 2


@pytest.mark.parametrize(
    "row",
    DATA["refusals"],
    ids=[f"{r['model']}-{r['type_k']}-{r['type_v']}" for r in DATA["refusals"]],
)
def test_the_cache_pairs_b11434_refuses_are_refused(row: dict[str, Any]) -> None:
    """K and V of different types (MLA), or a quantized V whose block does not divide the
    file's value_length (72 at Kimi-Linear-48B's widths): no context, and no plan."""
    g = SPECS[row["model"]].geometry
    k, v = KvCacheType(row["type_k"]), KvCacheType(row["type_v"])
    assert (kimi_kv_refusal(g, k, v) is not None) == row["refused"]
    s = PlanSettings(context=4096, kv_k=k, kv_v=v, flash_attn=True)
    if row["refused"]:
        with pytest.raises(InvalidSettingsError):
            kv_total_bytes(g, s)
    else:
        assert kv_total_bytes(g, s) > 0


def test_some_pairs_of_each_kind_are_recorded() -> None:
    rows = DATA["refusals"]
    assert any(r["refused"] and "different K" in r["message"] for r in rows)
    assert any(r["refused"] and "does not divide" in r["message"] for r in rows)
    assert any(not r["refused"] and r["type_v"] == "q8_0" for r in rows)
