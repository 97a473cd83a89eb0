"""DeepSeek V4 against llama.cpp b11434, from the recorded cases alone
(validation/dsv4_b11434.json, measured by validation/dsv4_b11434.py): weights synthesized
from the geometry (F16 and quantized, with the CPU repack), the window / compressed /
indexer caches, the compressor states and the output buffer must match byte for byte."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from validation.agreement import compute_tolerance
from validation.dsv4_b11434 import MIB, OUT, doc_section, evaluate

DATA = json.loads(OUT.read_text())
ROWS = evaluate(DATA)
IDS = [
    f"{r['model']}-{r['quant']}-c{r['n_ctx']}-s{r['n_seq']}-{r['type_k']}-fa{int(r['flash_attn'])}"
    f"-u{int(r.get('kv_unified', False))}-rs{r.get('n_rs_seq', 0)}-sf{int(r.get('swa_full', 0))}"
    for r in ROWS
]


def _case(model: str, **kw: object) -> dict:
    return next(
        r for r in ROWS if r["model"] == model and all(r.get(k) == v for k, v in kw.items())
    )


def test_the_grid_covers_every_cache_shape() -> None:
    assert all(r["measured"]["exact"] for r in ROWS), "sizes must be exact bytes, not MiB"
    assert {r["quant"] for r in ROWS} == {"F16", "Q8_0", "Q4_K_M"}
    assert any(r.get("kv_unified") for r in ROWS)
    assert any(r.get("n_rs_seq") for r in ROWS)
    assert any(r.get("swa_full") for r in ROWS)
    assert {r["flash_attn"] for r in ROWS} == {True, False}
    assert {r["type_k"] for r in ROWS} >= {"f16", "q8_0", "q4_0"}


def test_the_importer_reads_each_file_back_into_its_geometry() -> None:
    assert all(m["import_round_trip"] for m in DATA["models"].values())


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_weights_kv_states_and_output_are_exact(row: dict) -> None:
    for k in ("weights", "kv", "state", "output"):
        assert row["error"][k] == 0, k


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_compute_within_tolerance(row: dict) -> None:
    assert abs(row["error"]["compute"]) <= compute_tolerance(row["measured"]["compute"])


def test_compute_follows_the_context_growth() -> None:
    """The indexer's scores and the CSA layer's masks grow with the compressed rows: from
    131,072 tokens on (one sequence) the buffer is 180 to 350 MiB, and the model stays
    within 2 MiB of it, well inside the tolerance."""
    long = [r for r in ROWS if r["n_ctx"] >= 131072 and r["n_seq"] == 1]
    assert len(long) == 4
    for r in long:
        assert r["measured"]["compute"] > 175 * MIB
        assert abs(r["error"]["compute"]) <= 2 * MIB


def test_buffers_follow_llama_cpp_formulas_by_hand() -> None:
    """deepseek4-wide (head_dim 512, indexer 128, window 128; HCA on layers 1 and 3, CSA
    on 4), 16384 context over 4 sequences, q4_0: n_ctx_seq 4096. q4_0 rows: 512 values =
    16 blocks of 18 bytes, 128 values = 72 bytes (src/llama-kv-cache-dsv4.cpp)."""
    r = _case("deepseek4-wide", n_ctx=16384, n_seq=4)
    kv = [b["bytes"] for b in r["measured"]["buffers"] if b["kind"] == "kv"]
    states = [b["bytes"] for b in r["measured"]["buffers"] if b["kind"] == "state"]
    window = 768  # pad256(min(4096, 128 + 512))
    assert kv == [
        5 * window * 4 * 288,  # every layer's raw window cache
        1 * 1024 * 4 * 288,  # CSA: pad256(4096 / 4) cells
        2 * 256 * 4 * 288,  # HCA: pad256(4096 / 128) cells
        1 * 1024 * 4 * 72,  # the indexer's cache, as many cells as CSA
    ]
    assert states == [
        1 * 2 * 4 * 8 * 4 * (2 * 512),  # CSA kv + score, f32, 8 rows of 2 x head_dim
        2 * 2 * 4 * 128 * 4 * 512,  # HCA: 128 rows of head_dim
        1 * 2 * 4 * 8 * 4 * (2 * 128),  # indexer: 8 rows of 2 x indexer_head_size
    ]


def test_a_unified_cache_keeps_a_stream_per_sequence_at_full_length() -> None:
    """With kv_unified each of the 4 streams spans the whole 8192 context: the window cache
    stays per sequence, the compressed caches grow 4x against a split cache."""
    r = _case("deepseek4-wide", n_ctx=8192, n_seq=4, kv_unified=True)
    kv = [b["bytes"] for b in r["measured"]["buffers"] if b["kind"] == "kv"]
    assert kv == [5 * 768 * 4 * 1024, 2048 * 4 * 1024, 2 * 256 * 4 * 1024, 2048 * 4 * 256]
    split = _case("deepseek4-wide", n_ctx=8192, n_seq=4, kv_unified=None)
    kv_split = [b["bytes"] for b in split["measured"]["buffers"] if b["kind"] == "kv"]
    assert kv_split[0] == kv[0] and kv_split[1] * 4 == kv[1] and kv_split[3] * 4 == kv[3]


def test_rollback_snapshots_multiply_only_the_states() -> None:
    """n_rs_seq 2 over 2 sequences: 2 x (1 + 2) planes of every compressor state."""
    rs = _case("deepseek4-like", n_ctx=8192, n_seq=2, n_rs_seq=2)
    one = _case("deepseek4-like", n_ctx=4096, n_seq=1, quant="F16", type_k="f16")
    assert rs["measured"]["state"] == 2 * 3 * one["measured"]["state"]


def test_docs_section_reports_every_case() -> None:
    text = doc_section(DATA)
    assert text.count("| deepseek4-") == len(ROWS)
    assert f"exact in {len(ROWS)} of {len(ROWS)} cases" in text


def _geometry(model: str):
    from validation.dsv4_b11434 import geometry_of

    return geometry_of(DATA["models"][model]["geometry"])


def test_the_csa_phase_by_hand() -> None:
    """deepseek4-like at 131,072 tokens, flash attention (f16 masks), 512 tokens: the
    first of its two CSA layers keeps the indexer's and CSA's masks (32768 cells each)
    for the second; the layer holds three hyper-connection states (4 rows), Q twice and
    k_all (768 window + 32768 compressed cells of 128 f16); then the indexer's f32 scores
    (whose hole the filled and top-k masks take) and the concatenated mask."""
    from rigspark_gui.core.memory.compute_dsv4 import dsv4_compute_bytes
    from rigspark_gui.core.settings import PlanSettings

    t, row, cells = 512, 4 * 256 * 512, 768 + 32768
    inputs = row + 2 * t * (768 + 32768 + 32768 + 1024)  # raw, indexer, CSA, HCA masks
    layer = 3 * 4 * row + 2 * (4 * 8 * 128 * t) + 2 * 128 * cells
    expected = inputs + layer + 4 * 32768 * t + 2 * cells * t
    s = PlanSettings(context=131072, flash_attn=True, parallel=1)
    g = _geometry("deepseek4-like")
    assert dsv4_compute_bytes(g, s, t, list(range(5))) == expected
    measured = _case("deepseek4-like", n_ctx=131072, n_seq=1)["measured"]["compute"]
    assert abs(expected - measured) < 2 * MIB


def test_a_device_without_csa_layers_holds_no_indexer_phase() -> None:
    """Split over two GPUs, the device running the window-only layers 0-1 never sees the
    compressed masks; the one running the CSA layers carries the indexer's phase."""
    from rigspark_gui.core.memory import device_compute_bytes
    from rigspark_gui.core.settings import PlanSettings

    g = _geometry("deepseek4-like")
    s = PlanSettings(context=131072, flash_attn=True, parallel=1)
    front = device_compute_bytes(g, s, [0, 1], False)
    back = device_compute_bytes(g, s, [2, 3, 4], True)
    assert front < 20 * MIB < 150 * MIB < back
