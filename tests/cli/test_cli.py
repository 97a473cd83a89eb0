"""The headless CLI: exit codes, one-line errors, the JSON contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rigspark_gui.cli import main

ROOT = Path(__file__).resolve().parents[2]
RIG = ROOT / "examples" / "rig-2x3090.json"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_json_contract(capsys) -> None:
    code, out, err = run(
        capsys,
        "plan",
        "--model",
        "llama-3.1-8b-instruct",
        "--rig",
        str(RIG),
        "--context",
        "8192",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["schema_version"] == 1
    assert data["recommended"] == "gpu"
    path = data["paths"][0]
    for key in (
        "path",
        "fits",
        "quant",
        "required_bytes",
        "usable_bytes",
        "shortfall_bytes",
        "reason",
        "gpu_count",
        "throughput",
    ):
        assert key in path
    assert set(path["throughput"]) >= {"low_tok_s", "high_tok_s", "known", "basis"}
    load = data["device_loads"][0]
    for key in (
        "weights_bytes",
        "kv_bytes",
        "compute_bytes",
        "reserve_bytes",
        "total_bytes",
        "capacity_bytes",
    ):
        assert key in load
    assert data["placement"]["units"][0]["unit"] == "input"
    assert data["kv_comparison"], "plan --json carries the KV comparison"


def test_named_gpus_are_filled_from_the_database(capsys) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "--model",
        "llama-3.1-8b-instruct",
        "--rig",
        str(RIG),
        "--json",
        "--kv-compare",
        "none",
    )
    data = json.loads(out)
    gpu = data["paths"][0]
    # less the RTX 3090's CUDA context, as data/device_overhead.json gives it
    context = data["device_overhead"][0]
    assert context["bytes"] == 256 * 2**20 and "InvokeAI#9413" in context["source"]
    assert code == 0 and gpu["usable_bytes"] == 24 * 2**30 - context["bytes"]
    assert gpu["throughput"]["known"]  # bandwidth came from data/gpus.json


def test_plan_text_table(capsys) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "--model",
        "llama-3.3-70b-instruct",
        "--rig",
        str(RIG),
        "--context",
        "32k",
        "--kv-compare",
        "none",
    )
    assert code == 0
    # one GPU cannot hold it even at the smallest quantization
    assert "does not fit at IQ1_S; needs" in out
    assert "<- recommended" in out and "Recommended path: multi-gpu" in out


def test_nothing_fits_exits_1(capsys, tmp_path) -> None:
    rig = tmp_path / "tiny.json"
    rig.write_text(json.dumps({"schema_version": 1, "ram_total_bytes": 2**30}))
    code, out, _ = run(
        capsys,
        "plan",
        "--model",
        "llama-3.1-405b-instruct",
        "--rig",
        str(rig),
        "--kv-compare",
        "none",
    )
    assert code == 1 and "No path fits" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "--model", "nope"], "unknown model 'nope'"),
        (["plan", "--model", "llama-3.1-8b-instruct", "--context", "-5"], "--context"),
        (["plan", "--model", "llama-3.1-8b-instruct", "--context", "99999999999"], "--context"),
        (["plan", "--model", "llama-3.1-8b-instruct", "--kv-k", "q3"], "unknown KV cache type"),
        (
            ["plan", "--model", "llama-3.1-8b-instruct", "--kv-v", "q4_0", "--flash-attn", "off"],
            "needs flash attention",
        ),
        (["plan", "--model", "llama-3.1-8b-instruct", "--quant", "Q9"], "no quantization 'Q9'"),
        (["plan", "--model", "llama-3.1-8b-instruct", "--parallel", "0"], "--parallel"),
        (["plan"], "required"),
        (["frobnicate"], "invalid choice"),
        (["plan", "--model-file", "/nonexistent.gguf"], "no such model file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message) -> None:
    code, _, err = (
        run(capsys, *argv, "--rig", str(RIG))
        if argv[0] == "plan" and len(argv) > 1
        else run(capsys, *argv)
    )
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[]",
        '{"schema_version": 1}',
        '{"schema_version": 1, "ram_total_bytes": -1}',
        '{"schema_version": 9, "ram_total_bytes": 1}',
        '{"schema_version": 1, "ram_total_bytes": 1, "gpus": [{"name": "x", "memory_total_bytes": '
        '10, "memory_free_bytes": 20}]}',
    ],
)
def test_malformed_rig_is_exit_2(capsys, tmp_path, content) -> None:
    rig = tmp_path / "rig.json"
    rig.write_text(content)
    code, _, err = run(capsys, "plan", "--model", "llama-3.1-8b-instruct", "--rig", str(rig))
    assert code == 2 and err.startswith("rigspark-plan: error:") and err.count("\n") == 1


def test_unknown_gpu_is_kept_with_a_warning(capsys, tmp_path) -> None:
    rig = tmp_path / "rig.json"
    rig.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "ram_total_bytes": 64 * 2**30,
                "gpus": [
                    {"name": "Frobnitz 9000", "memory_total_bytes": 2**34, "vendor": "nvidia"}
                ],
            }
        )
    )
    code, out, _ = run(
        capsys,
        "plan",
        "--model",
        "llama-3.2-1b-instruct",
        "--rig",
        str(rig),
        "--kv-compare",
        "none",
    )
    assert code == 0
    assert "not in the GPU database" in out
    assert "bandwidth is not known" in out


def test_place_with_ngl_and_split(capsys) -> None:
    code, out, _ = run(
        capsys,
        "place",
        "--model",
        "llama-3.1-8b-instruct",
        "--rig",
        str(RIG),
        "--ngl",
        "20",
        "--tensor-split",
        "3,1",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    devices = [u["device"] for u in data["placement"]["units"]]
    assert devices[:14] == ["cpu"] * 14 and devices.count("gpu:0") == 15
    assert {d["device"] for d in data["device_loads"]} == {"cpu", "gpu:0", "gpu:1"}
    llama = next(c for c in data["launch_commands"] if c["engine"] == "llama.cpp")
    assert llama["supported"] and "-ngl 20" in llama["text"]


def test_models_and_gpus_lists(capsys) -> None:
    code, out, _ = run(capsys, "models", "--json")
    assert code == 0 and len(json.loads(out)["models"]) >= 100
    code, out, _ = run(capsys, "gpus")
    assert code == 0 and "NVIDIA H200" in out


def test_detect_json_runs_here(capsys) -> None:
    code, out, _ = run(capsys, "detect", "--json")
    data = json.loads(out)
    assert code == 0 and data["ram_total_bytes"] > 0 and data["schema_version"] == 1


def test_whole_process_prints_no_traceback_on_a_pipe_close() -> None:
    proc = subprocess.run(
        f"{sys.executable} -m rigspark_gui.cli models | head -1",
        shell=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr


def test_rank_lists_the_catalog_best_first(capsys) -> None:
    code, out, err = run(capsys, "rank", "--rig", str(RIG), "--family", "llama 3.1")
    assert code == 0, err
    lines = [line.split() for line in out.splitlines() if line.startswith("  fits", 0)]
    assert lines and lines[0][1] == "llama-3.1-70b-instruct"  # biggest that fits first
    slow = [line.split() for line in out.splitlines() if line.startswith("  slow")]
    assert slow and slow[0][1] == "llama-3.1-405b-instruct"  # fits only at 1.5 bits, slowly
    assert out.rstrip().endswith("run slowly.")


def test_rank_json_matches_the_plan_of_each_model(capsys) -> None:
    code, out, _ = run(capsys, "rank", "--rig", str(RIG), "--context", "16k", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema_version"] == 1 and data["settings"]["context"] == 16384
    row = next(r for r in data["models"] if r["model_id"] == "qwen2.5-32b-instruct")
    assert set(row) >= {"verdict", "path", "quant", "required_bytes", "low_tok_s", "high_tok_s"}
    code, out, _ = run(
        capsys, "plan", "--model", "qwen2.5-32b-instruct", "--rig", str(RIG),
        "--context", "16k", "--json",
    )  # fmt: skip
    planned = json.loads(out)
    best = next(p for p in planned["paths"] if p["path"] == planned["recommended"])
    assert (row["path"], row["quant"], row["required_bytes"]) == (
        best["path"],
        best["quant"],
        best["required_bytes"],
    )


def test_rank_exit_codes(capsys, tmp_path) -> None:
    tiny = tmp_path / "tiny.json"
    tiny.write_text(json.dumps({"schema_version": 1, "ram_total_bytes": 2**28}))
    code, out, _ = run(capsys, "rank", "--rig", str(tiny), "--family", "llama 3.1")
    assert code == 1 and "0 of 3 models fit" in out
    code, _, err = run(capsys, "rank", "--rig", str(RIG), "--family", "nope")
    assert code == 2 and err.count("\n") == 1 and "no catalog model" in err
    code, _, err = run(capsys, "rank", "--rig", str(RIG), "--quant", "Q4_K_M")
    assert code == 2 and err.count("\n") == 1


def _rig_file(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / "rig.json"
    path.write_text(json.dumps({"schema_version": 1, **body}))
    return path


def test_every_fitting_path_has_a_point_and_a_band(capsys) -> None:
    code, out, err = run(capsys, "plan", "--model", "llama-3.1-8b-instruct", "--rig", str(RIG),
                         "--kv-compare", "none", "--json")  # fmt: skip
    assert code == 0, err
    for path in json.loads(out)["paths"]:
        if not path["fits"]:
            continue
        t, f = path["throughput"], path["prefill"]
        assert t["low_tok_s"] <= t["tok_s"] <= t["high_tok_s"]
        assert t["high_tok_s"] <= 1.3 * t["tok_s"] or path["path"] == "cpu"
        assert "calibrated on" in t["basis"]
        assert f["low_seconds"] <= f["seconds"] <= f["high_seconds"]
        assert path["ladder"][0]["quant"] == "BF16"


def test_min_speed_and_gpu_backend_flags(capsys) -> None:
    base = ["plan", "--model", "llama-3.1-8b-instruct", "--rig", str(RIG), "--json",
            "--kv-compare", "none"]  # fmt: skip
    code, out, _ = run(capsys, *base, "--min-speed", "100")
    gpu = json.loads(out)["paths"][0]
    assert code == 0 and gpu["throughput"]["tok_s"] >= 100 and gpu["quant"] != "BF16"
    assert "below the 100 tok/s minimum" in gpu["choice"]
    code, out, _ = run(capsys, *base, "--min-speed", "0")
    assert json.loads(out)["paths"][0]["quant"] == "BF16"
    _, cuda, _ = run(capsys, *base, "--min-speed", "0")
    _, vulkan, _ = run(capsys, *base, "--min-speed", "0", "--gpu-backend", "vulkan")
    speed = [json.loads(x)["paths"][0]["throughput"]["tok_s"] for x in (cuda, vulkan)]
    assert speed[0] != speed[1]
    code, _, err = run(capsys, *base, "--gpu-backend", "metal")
    assert code == 0  # metal on NVIDIA: speed unknown, not a crash
    for bad in (["--min-speed", "-1"], ["--min-speed", "fast"], ["--gpu-backend", "cuda12"]):
        code, _, err = run(capsys, *base, *bad)
        assert code == 2 and err.count("\n") == 1, bad


def test_a_dgx_spark_plans_on_its_unified_memory(capsys, tmp_path) -> None:
    rig = _rig_file(tmp_path, {"name": "DGX Spark", "gpus": [{"name": "NVIDIA GB10"}],
                               "ram_total_bytes": 128 << 30})  # fmt: skip
    code, out, err = run(capsys, "plan", "--model", "gpt-oss-120b", "--rig", str(rig), "--json",
                         "--kv-compare", "none")  # fmt: skip
    assert code == 0, err
    data = json.loads(out)
    assert data["recommended"] == "unified"
    unified = data["paths"][0]
    assert unified["fits"] and unified["throughput"]["tok_s"] > 20


def test_rank_uses_the_same_rule(capsys) -> None:
    code, out, err = run(capsys, "rank", "--rig", str(RIG), "--family", "llama", "--json",
                         "--min-speed", "100")  # fmt: skip
    assert code == 0, err
    rows = [r for r in json.loads(out)["models"] if r["verdict"] != "no"]
    assert rows and all(r["tok_s"] is not None for r in rows)
    fast = [r for r in rows if r["verdict"] == "fits"]
    assert all(r["tok_s"] >= 100 for r in fast)


def test_rank_for_vllm_says_per_model_what_it_cannot_run(capsys) -> None:
    code, out, err = run(capsys, "rank", "--rig", str(RIG), "--backend", "vllm", "--json")
    assert code == 0, err
    rows = json.loads(out)["models"]
    assert any(r["verdict"] != "no" for r in rows)
    assert all(r["path"] in (None, "gpu", "multi-gpu") for r in rows)


@pytest.mark.parametrize(
    "name",
    ["llama3.1:8b", "meta-llama/Llama-3.1-8B-Instruct", "llama 3.1 8b", "Llama-3.1-8B"],
)
def test_the_names_users_type_plan_the_same_model(capsys, name: str) -> None:
    rig = ["--rig", "examples/rig-2x3090.json", "--json"]
    code, out, _ = run(capsys, "plan", "--model", name, *rig)
    assert code == 0
    assert json.loads(out)["model_id"] == "llama-3.1-8b-instruct"


def test_a_quantization_in_the_name_is_the_plans(capsys) -> None:
    rig = ["--rig", "examples/rig-2x3090.json", "--json"]
    code, out, _ = run(capsys, "plan", "--model", "llama3.1:8b-instruct-q3_K_M", *rig)
    assert code == 0
    plan = json.loads(out)
    assert plan["settings"]["quant"] == "Q3_K_M"
    assert {p["quant"] for p in plan["paths"] if p["quant"]} == {"Q3_K_M"}
    # an explicit --quant wins over the name's
    _, out, _ = run(
        capsys, "plan", "--model", "llama3.1:8b-instruct-q3_K_M", "--quant", "Q8_0", *rig
    )
    assert json.loads(out)["settings"]["quant"] == "Q8_0"


def test_an_ambiguous_name_is_exit_2_with_candidates(capsys) -> None:
    code, _, err = run(capsys, "plan", "--model", "phi3.5", "--rig", "examples/rig-2x3090.json")
    assert code == 2
    assert err.count("\n") == 1 and "phi-3.5-mini-instruct" in err and "add the size" in err


def test_detect_names_a_vms_vcpus_and_what_they_were_timed_at(capsys, monkeypatch) -> None:
    import importlib

    from rigspark_gui.core.rig import Cpu, Rig

    detect_module = importlib.import_module("rigspark_gui.hardware.detect")
    vm = Cpu(name="AMD EPYC", cores=2, features=("avx2", "hypervisor"))
    rig = Rig(ram_total_bytes=24 << 30, cpu=vm)
    monkeypatch.setattr(detect_module, "detect", lambda **_k: rig)
    code, out, _ = run(capsys, "detect")
    assert code == 0 and "CPU: AMD EPYC (2 vCPUs; whole cores or hyperthread pairs" in out
    pairs = Rig(ram_total_bytes=24 << 30, cpu=Cpu(name="AMD EPYC", cores=2,
                features=("hypervisor",), compute_cores=1.0))  # fmt: skip
    monkeypatch.setattr(detect_module, "detect", lambda **_k: pairs)
    code, out, _ = run(capsys, "detect")
    assert "(2 vCPUs giving 1 core's worth of compute, measured)" in out
    bare = Rig(ram_total_bytes=24 << 30, cpu=Cpu(name="Ryzen", cores=16))
    monkeypatch.setattr(detect_module, "detect", lambda **_k: bare)
    code, out, _ = run(capsys, "detect")
    assert "CPU: Ryzen (16 cores)" in out
