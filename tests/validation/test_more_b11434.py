"""Seed-OSS, Apertus, ERNIE 4.5 MoE, MiniMax M2 and Mistral Small 4 against llama.cpp
b11434, from the recorded rows alone (validation/more_b11434.json, measured by
validation/more_b11434.py): weights synthesized from the geometry, KV and output buffers
must match byte for byte, compute within the suite's tolerance."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.core.memory.tensors import block_tensors
from validation.agreement import compute_tolerance
from validation.arch_b11434 import evaluate
from validation.more_b11434 import OUT
from validation.synth_more import MODELS

DATA = json.loads(OUT.read_text())
ROWS = evaluate(DATA)
IDS = [f"{r['model']}-c{r['context']}-fa{int(r['flash_attn'])}-{r['kv_type']}" for r in ROWS]


def test_every_architecture_is_covered_and_exact() -> None:
    archs = {v["geometry"]["architecture"] for v in DATA["models"].values()}
    assert archs == {"seed_oss", "apertus", "ernie4_5-moe", "minimax-m2", "mistral4"}
    assert all(r["exact"] for r in DATA["rows"]), "sizes must be exact bytes, not MiB"


def test_the_importer_reads_each_file_back_into_its_geometry() -> None:
    assert all(m["import_round_trip"] for m in DATA["models"].values())


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_weights_kv_and_output_are_exact(row: dict) -> None:
    assert row["error"]["weights"] == 0
    assert row["error"]["kv"] == 0
    assert row["error"]["output"] == 0


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_compute_within_tolerance(row: dict) -> None:
    measured = row["measured"]["compute"]
    assert abs(row["error"]["compute"]) <= compute_tolerance(measured)


def test_the_blocks_the_loaders_require() -> None:
    """What tells these blocks from a llama block: a missing one fails llama.cpp's load."""
    names = {a: {n.split(".", 2)[2] for n, _ in block_tensors(g, 1)}
             for a, g in ((g.architecture, g) for g in MODELS.values())}  # fmt: skip
    assert {"attn_q.bias", "post_attention_norm.weight"} <= names["seed_oss"]
    assert "ffn_norm.weight" not in names["seed_oss"]
    assert "ffn_gate.weight" not in names["apertus"]
    assert {"attn_q_norm.weight", "exp_probs_b.bias"} <= names["minimax-m2"]
    assert {"exp_probs_b.bias", "ffn_up_shexp.weight"} <= names["ernie4_5-moe"]
    mm = MODELS["minimax-m2-like"]
    shapes = dict(block_tensors(mm, 0))
    assert shapes["blk.0.attn_q_norm.weight"] == (mm.n_head * mm.head_dim_k,)
    assert shapes["blk.0.attn_k_norm.weight"] == (mm.n_head_kv * mm.head_dim_k,)
    m4 = MODELS["mistral4-like"]
    shapes = dict(block_tensors(m4, 0))
    assert shapes["blk.0.ffn_gate_up_exps.weight"] == (m4.n_embd, 2 * m4.n_ff_expert, m4.n_expert)
    assert "blk.0.attn_kv_b.weight" not in shapes  # current files split it in k_b / v_b
    ernie = MODELS["ernie45-moe-like"]
    assert "blk.0.ffn_gate.weight" in dict(block_tensors(ernie, 0))  # the dense lead
