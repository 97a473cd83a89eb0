"""Pins RigSpark's llama.cpp RPC cluster estimates that docs/validation-serving.md
compares with published multi-node runs (last section), so that table cannot drift."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rigspark_gui.cli import main

_HOST = {
    "ram_total_bytes": 137438953472,
    "cpu": {"name": "AMD Ryzen AI Max+ 395", "cores": 16, "threads": 32},
    "unified_memory": True,
    "gpus": [{"name": "AMD Radeon 8060S Graphics", "unified": True}],
}


def _rig(boxes: int, bandwidth_gbps: float, latency_us: float) -> dict:
    rig = {
        "schema_version": 1,
        "name": f"{boxes} Ryzen AI Max+ 395 boxes over {bandwidth_gbps} Gbit/s",
        "address": "192.168.2.10",
        **copy.deepcopy(_HOST),
        "hosts": [
            {"name": f"halo{i}", "address": f"192.168.2.{10 + i}", **copy.deepcopy(_HOST)}
            for i in range(2, boxes + 1)
        ],
        "network": {"bandwidth_gbps": bandwidth_gbps, "latency_us": latency_us},
    }
    return rig


# (model, boxes, Gbit/s, round trip us, recorded tok/s, low, high, published tg128)
CASES = [
    ("glm-4.5", 2, 4.7, 100.0, 7.80, 6.59, 9.36, 8.72),  # kyuz0, 5 GbE, b7085
    ("glm-4.5", 2, 47.0, 30.0, 7.81, 6.60, 9.37, 8.55),  # kyuz0, 50 GbE, b7938
    ("llama-3.1-405b-instruct", 4, 4.7, 100.0, 0.711, 0.601, 0.854, 0.71),  # Geerling
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-x{c[1]}-{c[2]}g")
def test_rpc_cluster_estimate_is_pinned(case, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    model, boxes, gbps, lat, tok_s, low, high, measured = case
    rig = tmp_path / "rig.json"
    rig.write_text(json.dumps(_rig(boxes, gbps, lat)))
    argv = ["plan", "--model", model, "--rig", str(rig), "--quant", "Q4_K_M"]
    argv += ["--context", "4096", "--gpu-backend", "rocm", "--json"]
    main(argv)
    plan = json.loads(capsys.readouterr().out)
    path = next(p for p in plan["paths"] if p["path"] == "multi-host")
    got = path["throughput"]
    assert path["fits"]
    assert got["tok_s"] == pytest.approx(tok_s, rel=0.05)
    assert got["low_tok_s"] == pytest.approx(low, rel=0.05)
    assert got["high_tok_s"] == pytest.approx(high, rel=0.05)
    # the doc says each published figure lies inside the band
    assert got["low_tok_s"] <= measured <= got["high_tok_s"]
