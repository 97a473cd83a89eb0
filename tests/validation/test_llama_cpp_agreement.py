"""RigSpark against llama.cpp's own allocator, from the recorded cases alone.

validation/cases.json holds what llama.cpp allocated for synthetic GGUFs over a matrix
of contexts, K/V types, flash attention and sequences (`make validate` records it), with
each file's GGUF-derived ModelSpec. Every case is re-predicted here, so a formula change
that breaks agreement fails without building llama.cpp.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.catalog.perf import load_perf
from validation.agreement import (
    DECODE_MEDIAN_TOL,
    Row,
    compute_tolerance,
    evaluate,
    load_cases,
    measured_total,
)

DATA = load_cases()
ROWS = evaluate(DATA, load_perf())
IDS = [
    f"{r.case['model']}-ctx{r.case['n_ctx']}-{r.case['type_k']}-{r.case['type_v']}"
    f"-fa{int(r.case['flash_attn'])}-seq{r.case['n_seq']}"
    for r in ROWS
]


def test_the_matrix_covers_the_issue() -> None:
    archs = {m["arch"] for m in DATA["models"].values()}
    assert {"llama", "qwen2", "gemma2", "olmoe", "phi3", "deepseek2"} <= archs
    quants = {m["quant"] for m in DATA["models"].values()}
    assert {"F16", "Q8_0", "Q4_0", "Q4_K_M"} <= quants
    cases = DATA["cases"]
    assert {c["n_seq"] for c in cases} >= {1, 2, 4}
    assert {c["type_v"] for c in cases} >= {"f16", "q8_0", "q5_1", "q4_0"}
    assert min(c["n_ctx"] for c in cases) <= 512 and max(c["n_ctx"] for c in cases) >= 32768
    assert all(c["measured"]["exact"] for c in cases), "sizes must be exact bytes, not MiB"


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_weights_kv_and_output_are_exact(row: Row) -> None:
    assert row.errors["weights"] == 0
    assert row.errors["kv"] == 0
    assert row.errors["output"] == 0


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_compute_and_total_within_tolerance(row: Row) -> None:
    m = row.case["measured"]
    assert abs(row.errors["compute"]) <= compute_tolerance(m["compute"])
    assert abs(row.errors["total"]) <= compute_tolerance(measured_total(m))


def test_cpu_decode_speed_median_error() -> None:
    errors = [abs(r.decode_error) for r in ROWS if r.decode_error is not None]
    assert len(errors) >= 4
    assert statistics.median(errors) <= DECODE_MEDIAN_TOL
