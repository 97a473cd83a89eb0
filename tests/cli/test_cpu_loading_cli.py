"""A CPU-only rig whose CPU repacks weights (AVX2): the plan loads the model without
mmap where llama.cpp would otherwise hold the repacked weights twice, says so, and the
launch command carries the flag; pinned to mmap, the model does not fit and "What would
it take" offers the flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rigspark_gui.cli import main
from rigspark_gui.core.placement import HEADROOM

GB = 1_000_000_000
CPU_24GB = {
    "schema_version": 1,
    "name": "CPU-only 24 GB",
    "gpus": [],
    "ram_total_bytes": 24 * 1024**3,
    "ram_available_bytes": 23 * 1024**3,
    "cpu": {
        "name": "2-vCPU x86 VM",
        "cores": 2,
        "memory_bandwidth_gbps": 28.0,
        "features": ["avx2", "avx512"],
    },
    "unified_memory": False,
}


@pytest.fixture
def rig(tmp_path: Path) -> str:
    path = tmp_path / "cpu24.json"
    path.write_text(json.dumps(CPU_24GB), encoding="utf-8")
    return str(path)


def _plan(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    code = main(["plan", *argv, "--kv-compare", "none", "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, json.loads(out)


@pytest.mark.parametrize(
    ("model", "quant", "context"), [("gpt-oss-20b", None, "32768"), ("qwen3-32b", "Q4_K_M", "8192")]
)
def test_an_expert_loads_it_without_mmap(capsys, rig, model, quant, context) -> None:
    extra = ["--context", context] + (["--quant", quant] if quant else [])
    code, out = _plan(capsys, "--model", model, "--rig", rig, *extra)
    cpu = out["paths"][0]
    assert code == 0 and cpu["fits"], cpu
    loading = cpu["cpu_loading"]
    assert loading["flag"] == "--load-mode none"
    # with the file mapped, the repacked weights' pages stay resident beside the copy
    kept = (1 - HEADROOM) * cpu["usable_bytes"]  # what a path may fill
    assert loading["mapped_required_bytes"] > kept > loading["required_bytes"]
    assert (
        loading["mapped_required_bytes"] - loading["required_bytes"]
        >= 0.9 * loading["repacked_bytes"]
    )
    assert "without mmap (--load-mode none)" in loading["note"]
    # the same plan pinned to llama.cpp's mmap does not fit
    code, pinned = _plan(capsys, "--model", model, "--rig", rig, "--mmap", *extra)
    assert code == 1 and not pinned["paths"][0]["fits"]
    assert pinned["paths"][0]["cpu_loading"] is None


def test_the_words_and_the_launch_carry_the_flag(capsys, rig) -> None:
    assert main(["plan", "--model", "gpt-oss-20b", "--rig", rig, "--kv-compare", "none"]) == 0
    text = capsys.readouterr().out
    assert "loaded without mmap (--load-mode none) it holds them once" in text
    assert main(["place", "--model", "gpt-oss-20b", "--rig", rig]) == 0
    launch = next(line for line in capsys.readouterr().out.splitlines() if "llama-server" in line)
    assert launch.rstrip().endswith("--load-mode none")


def test_no_repack_is_a_setting_and_a_flag(capsys, rig) -> None:
    code, out = _plan(
        capsys, "--model", "qwen3-32b", "--quant", "Q4_K_M", "--rig", rig, "--no-repack"
    )
    cpu = out["paths"][0]
    assert code == 0 and cpu["fits"]
    assert cpu["cpu_loading"]["flag"] == "--no-repack"
    assert out["settings"]["repack"] is False
    assert main(["place", "--model", "qwen3-32b", "--quant", "Q4_K_M", "--rig", rig,
                 "--no-repack"]) == 0  # fmt: skip
    out_text = capsys.readouterr().out
    assert any(
        "llama-server" in line and "--no-repack" in line and "--load-mode" not in line
        for line in out_text.splitlines()
    )


def test_no_repack_and_no_mmap_both_reach_the_command(capsys, rig) -> None:
    assert main(["place", "--model", "qwen3-8b", "--quant", "Q4_0", "--context", "4096",
                 "--rig", rig, "--no-mmap", "--no-repack"]) == 0  # fmt: skip
    lines = [x for x in capsys.readouterr().out.splitlines() if "llama-server" in x]
    assert lines  # pinned and let-fit-decide forms alike
    assert all("--no-repack" in x and "--load-mode none" in x for x in lines)


def test_pinned_to_mmap_what_would_it_take_offers_the_flag(capsys, rig) -> None:
    _, out = _plan(capsys, "--model", "gpt-oss-20b", "--context", "32768", "--rig", rig, "--mmap")
    first = out["suggestions"][0]
    assert first["settings"] == {"mmap": False}
    assert "--load-mode none" in first["change"] and first["path"] == "cpu"
