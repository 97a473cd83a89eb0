"""`plan` and `place` for an MoE model on one GPU + RAM: every layer on the GPU, the
first layers' experts in system memory, said as llama.cpp's `--n-cpu-moe N`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rigspark_gui.cli import main

RIG_3090_64GB = {
    "schema_version": 1,
    "name": "RTX 3090 + 64 GB",
    "gpus": [{"name": "NVIDIA GeForce RTX 3090"}],
    "ram_total_bytes": 64 << 30,
    "ram_available_bytes": 56 << 30,
    "cpu": {"name": "AMD Ryzen 9 5950X", "cores": 16, "memory_bandwidth_gbps": 51.2},
    "unified_memory": False,
}


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def test_plan_and_place_show_gpt_oss_120b_with_experts_in_ram(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rig = tmp_path / "rig.json"
    rig.write_text(json.dumps(RIG_3090_64GB), encoding="utf-8")
    args = ("--model", "gpt-oss-120b", "--rig", str(rig), "--json")
    plan_code, planned = _cli(capsys, "plan", *args, "--kv-compare", "none")
    place_code, placed = _cli(capsys, "place", *args)
    assert plan_code == place_code == 0
    assert planned["recommended"] == "cpu-offload"
    paths = planned["paths"]
    assert isinstance(paths, list)
    path = next(p for p in paths if p["path"] == "cpu-offload")
    n = path["n_cpu_moe"]
    assert isinstance(n, int) and 0 < n < 36 and path["ngl"] == 37
    # one placement: the plan's is the one `place` shows, with the same loads
    assert placed["placement"] == planned["placement"]
    assert placed["device_loads"] == planned["device_loads"]
    assert placed["fits"] is path["fits"] is True
    units = placed["placement"]["units"]  # type: ignore[index]
    blocks = [u for u in units if u["unit"].startswith("blk.")]
    assert all(u["device"] == "gpu:0" for u in blocks)
    assert [u["experts_device"] for u in blocks] == ["cpu"] * n + [None] * (36 - n)
    commands = placed["launch_commands"]
    assert isinstance(commands, list)
    llama = next(c for c in commands if c["engine"] == "llama.cpp")
    argv = llama["argv"]
    assert argv[argv.index("-ngl") + 1] == "37"
    assert argv[argv.index("--n-cpu-moe") + 1] == str(n)
    assert "-ot" not in argv
    assert placed["throughput"]["tok_s"] == path["throughput"]["tok_s"]  # type: ignore[index]
