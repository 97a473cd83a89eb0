"""The CPU side of the speed fit: rows whose size cannot be their model are left out, one
per-core memory stream serves every ISA, and this machine's llama-bench runs become rows
only when their two best samples agree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.core.speed import CpuIsa, QuantFamily
from validation import speed_fit, speed_local, speed_rows

GIB = 1 << 30


def test_a_size_column_twice_the_model_is_left_out() -> None:
    # ik_llama.cpp's README printed 59.11 GiB for Mixtral-8x7B (46.7 B) in Q5_0: 10.9 bits
    # a weight where Q5_0 stores 5.5
    why = speed_rows.size_inconsistent("Q5_0", 59.11 * GIB, 46.7e9)
    assert why is not None and "10.9 bits per weight" in why
    # llama-bench's own line for Llama-3.1-8B Q4_K_M: 4.58 GiB, 8.03 B
    assert speed_rows.size_inconsistent("Q4_K_M", 4.58 * GIB, 8.03e9) is None
    # a small model's mix keeps its embeddings high: 1B Q4_K_M at 5.2 bits is a real file
    assert speed_rows.size_inconsistent("Q4_K_M", 0.75 * GIB, 1.24e9) is None


def test_the_skipped_list_says_why_a_row_was_left_out() -> None:
    raw = {
        "device": "AMD Ryzen 9 7950X", "backend": "cpu", "model": "mixtral 8x7B Q5_0",
        "quant": "Q5_0", "size_gib": 59.11, "test": "tg128", "tok_s": 5.44, "threads": 4,
        "cpu_cores": 16, "isa": "avx512-vnni", "bandwidth_gbps": 83.2,
        "source": "https://example.org",
    }  # fmt: skip
    rows, skipped = speed_rows.build_rows({"rows": [raw]}, {})
    assert rows == [] and "bits per weight" in skipped[0]


def _cpu_row(isa: str, cores: int, family: QuantFamily = QuantFamily.Q8) -> speed_rows.Row:
    raw = {
        "device": f"cpu {isa}", "backend": "cpu", "model": "llama 8B Q8_0", "quant": "Q8_0",
        "size_gib": 7.95, "test": "tg128", "tok_s": 10.0, "threads": cores,
        "cpu_cores": 16, "isa": isa, "bandwidth_gbps": 400.0, "source": "https://example.org",
    }  # fmt: skip
    row = speed_rows.row_of(raw, {})
    assert isinstance(row, speed_rows.Row) and row.family is family
    return row


def test_one_per_core_stream_serves_every_isa() -> None:
    params = {
        "cpu_eff": 0.9, "cpu_core_bw[all]": 15e9, "cpu_rate[avx2]": 1e12,
        "cpu_rate[apple]": 1e12,
    }  # fmt: skip
    avx2, apple = _cpu_row("avx2", 4), _cpu_row("apple", 4)
    # bandwidth far above what four cores stream, compute far above both: the stream sets it
    assert speed_fit.cpu_limit(params, avx2) == "per-core stream"
    assert speed_fit.predict_decode(params, avx2) == pytest.approx(
        speed_fit.predict_decode(params, apple)
    )
    eight = speed_fit.predict_decode(params, _cpu_row("avx2", 8))
    assert eight == pytest.approx(2 * speed_fit.predict_decode(params, avx2), rel=0.05)


def test_the_engine_gets_the_shared_stream_for_every_isa() -> None:
    model = speed_fit.to_speed_model(
        {"cpu_eff": 0.9, "cpu_core_bw[all]": 14e9, "cpu_rate[avx2]": 5e9, "eff[nvidia]": 0.8},
        {},
        [],
        1,
        1,
    )
    assert model.decode is not None
    assert set(model.decode.cpu_core_bandwidth) == set(CpuIsa)
    assert set(model.decode.cpu_core_bandwidth.values()) == {14e9}


def test_bench_rows_keep_only_figures_whose_two_best_samples_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "speed_local.json"
    run = {
        "device": "a 2 vCPU VM", "geometry": "s8x2048", "threads": 2, "file_bytes": 294456032,
        "cpu_info": "AMD EPYC", "bandwidth_gbps": 30.0, "when": "2026-12-05 06:40 UTC",
    }  # fmt: skip
    out.write_text(
        json.dumps(
            {
                "runs": [],
                "bench_runs": [
                    {**run, "type": "Q4_K", "tg": [110.0, 108.0, 20.0], "pp": [400.0, 150.0]},
                ],
            }
        )
    )
    monkeypatch.setattr(speed_local, "OUT", out)
    rows = speed_local.bench_rows()
    assert [(r["test"], r["tok_s"]) for r in rows] == [("tg64", 110.0)]
    assert rows[0]["depth"] == 128 and rows[0]["vcpu"] and rows[0]["quant"] == "Q4_K_S"
