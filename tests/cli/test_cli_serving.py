"""The serving-engine and multi-host contract of `rigspark-plan plan`: the flags, the
JSON `serving` and `launch` records, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import run

ROOT = Path(__file__).resolve().parents[2]
ONE_3090 = {"gpus": [{"name": "NVIDIA GeForce RTX 3090"}], "ram_total_bytes": 68719476736}
KEYS = {
    "engine", "memory_utilization", "weights_bytes", "activation_bytes", "cuda_graph_bytes",
    "non_torch_bytes", "kv_cache_bytes", "kv_cache_tokens", "max_model_len",
    "max_concurrency", "gpus",
}  # fmt: skip


@pytest.fixture
def one_3090(tmp_path: Path) -> str:
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(ONE_3090))
    return str(path)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_llama8b_bf16_fits_at_20000_and_not_at_131072(capsys, one_3090: str, engine: str) -> None:
    base = ["plan", "--model", "llama-3.1-8b-instruct", "--rig", one_3090, "--backend", engine,
            "--quant", "BF16", "--json"]  # fmt: skip
    code, out, _ = run(capsys, *base, "--context", "20000")
    assert code == 0
    data = json.loads(out)
    sp = data["serving"]
    assert sp.keys() >= KEYS and sp["engine"] == engine and sp["kv_cache_tokens"] > 20000
    assert [p["path"] for p in data["paths"]] == ["gpu"]
    code, out, _ = run(capsys, *base, "--context", "131072")
    assert code == 1
    sp = json.loads(out)["serving"]
    assert sp["refusal"] and 20000 < sp["largest_max_model_len"] < 131072


def test_knobs_reach_the_plan(capsys, one_3090: str) -> None:
    code, out, _ = run(capsys, "plan", "--model", "llama-3.1-8b-instruct", "--rig", one_3090,
                       "--backend", "vllm", "--memory-utilization", "0.8", "--max-num-seqs",
                       "64", "--max-num-batched-tokens", "4096", "--json")  # fmt: skip
    sp = json.loads(out)["serving"]
    assert code == 0 and sp["memory_utilization"] == 0.8 and sp["max_num_seqs"] == 64
    assert sp["max_num_batched_tokens"] == 4096
    serve = json.loads(out)["launch"]["scripts"][-1]["text"]
    assert "--gpu-memory-utilization 0.8" in serve and "--max-num-seqs 64" in serve


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["--memory-utilization", "0.8"], "vLLM/SGLang setting"),
        (["--backend", "vllm", "--memory-utilization", "1.5"], "at most 1"),
        (["--backend", "vllm", "--tensor-parallel", "2"], "asks for 2 GPUs"),
        (["--backend", "vllm", "--quant", "Q4_K_M"], "checkpoint format"),
        (["--backend", "sglang", "--cpu-offload-gb", "4"], "vLLM option"),
        (["--backend", "vllm", "--cpu-offload-gb", "x"], "not a size in GB"),
    ],
)
def test_bad_serving_input_is_one_line_and_exit_2(
    capsys, one_3090: str, argv: list[str], why: str
) -> None:
    code, out, err = run(capsys, "plan", "--model", "llama-3.1-8b-instruct", "--rig",
                         one_3090, *argv)  # fmt: skip
    assert code == 2 and why in err and len(err.strip().splitlines()) == 1 and not out


def test_two_hosts_plan_rpc_scripts(capsys) -> None:
    rig = str(ROOT / "examples" / "rig-two-hosts-3090.json")
    code, out, _ = run(capsys, "plan", "--model", "llama-3.3-70b-instruct", "--rig", rig,
                       "--quant", "Q4_K_M", "--context", "8192")  # fmt: skip
    assert code == 0
    assert "multi-host (2 GPUs)" in out and "<- recommended" in out
    assert "rpc-server -H 0.0.0.0 -p 50052 -c" in out and "--rpc 192.168.1.11:50052" in out
    assert out.index("# 1. on box2") < out.index("# 2. on this machine")
