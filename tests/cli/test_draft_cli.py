"""`--model-draft` (llama.cpp's -md) on the CLI: Qwen2.5 0.5B drafting for Qwen2.5 32B
shows the draft's memory per device and the speed with its basis; a draft of another
vocabulary is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rigspark_gui.cli import main

RIG = {
    "schema_version": 1,
    "name": "one 24 GB card",
    "gpus": [
        {
            "name": "NVIDIA GeForce RTX 4090",
            "memory_total_bytes": 25757220864,
            "memory_free_bytes": 25283264512,
        }
    ],
    "ram_total_bytes": 68719476736,
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def rig(tmp_path: Path) -> Path:
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(RIG))
    return path


BASE = ("plan", "--model", "qwen2.5-32b-instruct", "--context", "8192", "--kv-compare", "none")


def test_qwen_05b_drafting_for_32b_shows_its_memory_and_speed_basis(
    capsys: pytest.CaptureFixture[str], rig: Path
) -> None:
    argv = (*BASE, "--rig", str(rig), "--model-draft", "qwen2.5-0.5b-instruct")
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert (
        "draft"
        in out.splitlines()[next(i for i, x in enumerate(out.splitlines()) if "Per device" in x)]
    )
    assert "Draft Qwen2.5 0.5B Instruct Q8_0" in out and "speed gain: unknown" in out
    code, out, err = run(capsys, *argv, "--json")
    data = json.loads(out)
    on = dict(map(tuple, data["draft"]["bytes_on"]))
    assert {d["device"]: d["draft_bytes"] for d in data["device_loads"]} == on
    assert data["draft"]["accepted_per_step"] is None
    # fit counts the draft with the target: in the projection, not the margin
    assert data["fit"]["devices"][0]["margin_bytes"] == 1024 << 20


def test_draft_flags_as_llama_cpp_spells_them(
    capsys: pytest.CaptureFixture[str], rig: Path
) -> None:
    argv = (*BASE, "--rig", str(rig), "-md", "qwen2.5-0.5b-instruct", "--json")
    code, out, err = run(capsys, *argv, "-ngld", "5", "-ctkd", "q8_0", "-ctvd", "q8_0")
    assert code == 0, err
    d = json.loads(out)["draft"]
    assert d["n_gpu_layers"] == 5 and d["kv_k"] == "q8_0" and d["kv_v"] == "q8_0"
    code, _, err = run(capsys, *argv, "-ngld", "lots")
    assert code == 2 and "-ngld" in err


def test_a_draft_of_another_vocabulary_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], rig: Path
) -> None:
    argv = (*BASE, "--rig", str(rig), "--model-draft", "llama-3.2-1b-instruct")
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "vocabulary" in err


def test_the_draft_runs_at_the_context_llama_cpp_settles_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # context auto: fit settles on more than its floor; the draft's KV follows (-c is shared)
    code, out, _ = run(
        capsys, "plan", "--model", "qwen3-8b", "--rig",
        str(Path(__file__).parents[2] / "examples" / "rig-2x3090.json"),
        "-md", "qwen3-0.6b", "--kv-compare", "none", "--json",
    )  # fmt: skip
    data = json.loads(out)
    assert code == 0
    context = data["resolved"]["context"]
    assert context > 4096 and data["draft"]["context"] == context
    per_token = 28 * 2 * 8 * 128 * 2  # Qwen3 0.6B: 28 layers, K and V, 8 heads of 128, f16
    assert data["draft"]["kv_bytes"] >= per_token * context


@pytest.mark.parametrize("backend", ["koboldcpp", "lm-studio", "ollama"])
def test_engines_whose_command_takes_no_draft_plan_none(
    capsys: pytest.CaptureFixture[str], rig: Path, backend: str
) -> None:
    _, out, _ = run(capsys, *BASE, "--rig", str(rig), "-md", "qwen2.5-0.5b-instruct",
                       "--backend", backend, "--json")  # fmt: skip
    data = json.loads(out)
    assert data["draft"] is None
    assert all(d["draft_bytes"] == 0 for d in data["device_loads"])


def test_mtp_drafting_with_qwen35_shows_its_memory_and_the_flag(
    capsys: pytest.CaptureFixture[str], rig: Path
) -> None:
    argv = ("plan", "--model", "qwen3.5-9b", "--context", "8192", "--kv-compare", "none")
    argv += ("--rig", str(rig))
    code, plain, err = run(capsys, *argv)
    assert code == 0, err
    assert "draft-mtp" not in plain
    code, out, err = run(capsys, *argv, "--spec-type", "draft-mtp")
    assert code == 0, err
    assert "MTP drafting (--spec-type draft-mtp) with the MTP blocks of" in out
    assert "speed gain: unknown" in out and "--spec-type draft-mtp" in out
    code, out, err = run(capsys, *argv, "--spec-type", "draft-mtp", "--json")
    data = json.loads(out)
    assert data["draft"]["mtp"] is True and data["draft"]["state_bytes"] > 0
    on = dict(map(tuple, data["draft"]["bytes_on"]))
    assert {d["device"]: d["draft_bytes"] for d in data["device_loads"]} == on


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--device-draft", "CUDA1"), "--device-draft set without --model-draft"),
        (("-ctkd", "q8_0"), "-ctkd set without --model-draft"),
        (("--spec-type", "draft-mtp", "-ngld", "5"), "-ngld: not planned for MTP drafting"),
    ],
)
def test_draft_flags_without_a_draft_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], rig: Path, flags: tuple[str, ...], said: str
) -> None:
    code, out, err = run(capsys, "plan", "--model", "glm-4.5-air", "--rig", str(rig), *flags)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and said in err
