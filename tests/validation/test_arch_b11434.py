"""Gemma 4, Gemma 3n and DeepSeek sparse attention against llama.cpp b11434, from the
recorded rows alone (validation/arch_b11434.json, measured by validation/arch_b11434.py):
weights synthesized from the geometry, KV (sliding / full head dims, shared-KV layers,
the DSA indexer cache, V padded to the widest layer without flash attention) and output
buffers must match byte for byte."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from validation.agreement import compute_tolerance
from validation.arch_b11434 import OUT, SETTINGS, evaluate

DATA = json.loads(OUT.read_text())
ROWS = evaluate(DATA)
IDS = [
    f"{r['model']}-c{r['context']}-fa{int(r['flash_attn'])}-{r['kv_type']}-{r.get('load_mode')}"
    for r in ROWS
]


def test_every_architecture_is_covered_and_exact() -> None:
    archs = {v["geometry"]["architecture"] for v in DATA["models"].values()}
    assert {"gemma4", "gemma3n", "deepseek32", "glm-dsa"} <= archs
    assert all(r["exact"] for r in DATA["rows"]), "sizes must be exact bytes, not MiB"


def test_the_importer_reads_each_file_back_into_its_geometry() -> None:
    assert all(m["import_round_trip"] for m in DATA["models"].values())


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_weights_kv_and_output_are_exact(row: dict) -> None:
    skipped = DATA["models"][row["model"]].get("skipped_bytes", 0)
    if row.get("load_mode", "auto") == "auto":
        # memory-mapped: the CPU buffer is the file range from the first loaded tensor to
        # the last, so an MTP block written between them counts though llama.cpp skips it
        assert row["error"]["weights"] == -skipped
    else:
        assert row["error"]["weights"] == 0
    assert row["error"]["kv"] == 0
    assert row["error"]["output"] == 0


def test_mtp_blocks_hold_no_kv_and_are_not_loaded() -> None:
    """deepseek32-mtp-like (one MTP block after four trunk layers): the same KV as the
    trunk alone, and without mmap a CPU buffer of the loaded tensors only."""
    mtp = [r for r in ROWS if r["model"] == "deepseek32-mtp-like"]
    trunk = {(r["context"], r["flash_attn"], r["kv_type"]): r for r in ROWS
             if r["model"] == "deepseek32-like"}  # fmt: skip
    assert DATA["models"]["deepseek32-mtp-like"]["skipped_bytes"] > 0
    assert any(r["load_mode"] == "none" and r["error"]["weights"] == 0 for r in mtp)
    for r in mtp:
        same = trunk[(r["context"], r["flash_attn"], r["kv_type"])]
        assert r["measured"]["kv"] == same["measured"]["kv"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_compute_within_tolerance(row: dict) -> None:
    measured = row["measured"]["compute"]
    assert abs(row["error"]["compute"]) <= compute_tolerance(measured)


def test_gemma3n_peaks_at_the_per_layer_projection() -> None:
    """gemma3n-like (25 layers, n_embd_per_layer 256, 512 tokens): four f32 tensors of
    25 x 256 per-layer values per token (the freed lookup's hole, the selected rows, the
    projection, its norm) over the CPU inputs, 50 MiB of every row's buffer; the model
    follows llama.cpp to within 0.1 MiB on each."""
    rows = [r for r in ROWS if r["model"] == "gemma3n-like"]
    assert len(rows) == len(SETTINGS)
    for r in rows:
        assert abs(r["error"]["compute"]) < (1 << 20) // 10
        assert r["measured"]["compute"] > 4 * 25 * 256 * 512 * 4


def test_shared_kv_layers_hold_none_and_v_pads_without_flash_attention() -> None:
    # gemma4-e2b-like, 4096 cells: one full layer of 128-wide K and V; four sliding layers
    # of 768 cells with 64-wide K and V padded to 128 (b11434 warns "padding V cache to
    # 128"); the five shared layers add nothing
    row = next(r for r in ROWS if r["model"] == "gemma4-e2b-like" and r["context"] == 4096
               and not r["flash_attn"])  # fmt: skip
    assert row["measured"]["kv"] == 4096 * (128 + 128) * 2 + 768 * 4 * (64 + 128) * 2


def test_gemma4_e4b_full_attention_cache_as_posted_in_the_tracker() -> None:
    """ggml-org/llama.cpp issue #21730 (Gemma 4 E4B, 131072 context, f16, one sequence):
    `llama_kv_cache: size = 2048.00 MiB (131072 cells, 4 layers, 1/1 seqs), K (f16):
    1024.00 MiB, V (f16): 1024.00 MiB` for the non-SWA cache, `creating SWA KV cache,
    size = 1024 cells`, layers 29/35/41 reusing layer 23 (print_info there: n_embd_k_gqa
    512 on sliding layers, 1024 on full ones, n_ff 10240). Geometry: transformers
    src/transformers/models/gemma4/convert_gemma4_weights.py @0f3f0632 (gemma-4-e4b)."""
    from rigspark_gui.core.memory import kv_bytes_per_layer, kv_cells
    from rigspark_gui.core.model.model_spec import Geometry
    from rigspark_gui.core.settings import PlanSettings

    g = Geometry(
        architecture="gemma4",
        n_layer=42,
        n_embd=2560,
        n_head=8,
        n_head_kv=2,
        head_dim_k=512,
        head_dim_v=512,
        head_dim_k_swa=256,
        head_dim_v_swa=256,
        n_vocab=262144,
        n_ff=10240,
        tied_embeddings=True,
        sliding_window=512,
        swa_pattern=6,
        n_layer_kv_from_start=24,
        n_embd_per_layer=256,
        context_length=131072,
    )
    mib = 1 << 20
    for fa in (True, False):  # full layers are the widest: no V padding either way
        s = PlanSettings(context=131072, flash_attn=fa, parallel=1)
        per_layer = kv_bytes_per_layer(g, s)
        full = [il for il in range(g.n_layer) if not g.is_sliding(il) and per_layer[il]]
        assert full == [5, 11, 17, 23]  # 29, 35 and 41 reuse layer 23's cache
        assert sum(per_layer[il] for il in full) == 2048 * mib
        assert kv_cells(g, 0, s) == 1024  # the SWA cache: 512 window + 512 ubatch


def test_gemma3n_on_a_gpu_holds_three_per_layer_tensors() -> None:
    """On a GPU the lookup runs on the host (the per-layer table is an input tensor): the
    device holds the selected rows' copy, the projection and its norm over its inputs."""
    from rigspark_gui.core.memory import device_compute_bytes
    from rigspark_gui.core.settings import PlanSettings
    from validation.arch_b11434 import geometry_of

    g = geometry_of(DATA["models"]["gemma3n-like"]["geometry"])
    s = PlanSettings(context=4096, flash_attn=True, parallel=1)
    ple = 4 * 25 * 256 * 512
    gpu = device_compute_bytes(g, s, list(range(g.n_layer)), True)
    inputs = 4 * 256 * 512 + 4 * 4096 * 512  # the row and the f32 mask it receives
    assert gpu == inputs + 3 * ple
