"""What loads beside the model, on the CLI and in a pasted command line: a draft pinned
with `--device-draft` / `-devd` (llama.cpp's spellings, common/arg.cpp b11434) and a
projector file given with `--mmproj`, which the llama-server command names by its path,
`-hf` or not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rigspark_gui.cli import main
from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.fit import parse_fit_command

ROOT = Path(__file__).resolve().parents[2]
GPU_RIG = ROOT / "examples" / "rig-2x3090.json"
sys.path.insert(0, str(ROOT / "validation"))

from mmproj_synth import MmprojSynth, write_mmproj  # noqa: E402

FOR_8B = MmprojSynth("small", 256, 1024, 4, 2, 448, 14, 4096)


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _llama(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    data = _json(capsys, "place", *argv, "--rig", str(GPU_RIG))
    return {c["engine"]: c for c in data["launch_commands"]}["llama.cpp"]


DRAFTED = ("--model", "qwen3-8b", "-md", "qwen3-0.6b")


def test_device_draft_pins_the_draft_and_the_command_says_so(capsys) -> None:
    plain = _json(capsys, "plan", *DRAFTED, "--rig", str(GPU_RIG), "--kv-compare", "none")
    on = dict(map(tuple, plain["draft"]["bytes_on"]))
    target_gpu = next(d for d in on if d.startswith("gpu:"))
    other = "gpu:1" if target_gpu == "gpu:0" else "gpu:0"
    name = f"CUDA{other[-1]}"
    data = _json(
        capsys, "plan", *DRAFTED, "--device-draft", name, "--rig", str(GPU_RIG),
        "--kv-compare", "none",
    )  # fmt: skip
    pinned = dict(map(tuple, data["draft"]["bytes_on"]))
    assert pinned.get(target_gpu, 0) == 0 and pinned[other] > 0
    llama = _llama(capsys, *DRAFTED, "-devd", name)
    assert llama["supported"]
    argv = llama["argv"]
    assert argv[argv.index("-devd") + 1] == name
    # none keeps it on the CPU
    cpu = _json(capsys, "plan", *DRAFTED, "-devd", "none", "--rig", str(GPU_RIG),
                "--kv-compare", "none")  # fmt: skip
    assert [d for d, _ in cpu["draft"]["bytes_on"]] == ["cpu"]
    assert "-devd none" in _llama(capsys, *DRAFTED, "-devd", "none")["text"]


def test_device_draft_that_llama_cpp_refuses_is_one_line_exit_2(capsys) -> None:
    code = main(["plan", *DRAFTED, "-devd", "CPU", "--rig", str(GPU_RIG)])
    _, err = capsys.readouterr()
    assert code == 2 and "invalid device: CPU" in err and len(err.strip().splitlines()) == 1


def test_a_pasted_devd_is_read_and_checked() -> None:
    cmd = parse_fit_command(["llama-server", "-m", "a.gguf", "-md", "b.gguf", "-devd", "CUDA1"])
    assert cmd.draft_devices == ("CUDA1",) and "-devd" in cmd.unmodelled
    alone = parse_fit_command(["llama-server", "-m", "a.gguf", "--device-draft=none"])
    assert alone.draft_devices == () and "-devd" not in alone.unmodelled
    spec = parse_fit_command(["llama-server", "-m", "a.gguf", "--spec-draft-device", "Vulkan0"])
    assert spec.draft_devices == ("Vulkan0",)
    for bad in ("CPU", "", "CUDA0,,CUDA1"):
        with pytest.raises(InvalidSettingsError, match="-devd"):
            parse_fit_command(["llama-server", "-m", "a.gguf", "-devd", bad])
    with pytest.raises(InvalidSettingsError, match="does not take"):
        parse_fit_command(["llama-fit-params", "-m", "a.gguf", "-devd", "CUDA0"])


def test_a_chosen_projector_file_is_named_by_its_path(capsys, tmp_path: Path) -> None:
    path = tmp_path / "my-vision" / "mmproj-small-f16.gguf"
    path.parent.mkdir()
    write_mmproj(FOR_8B, path)
    # a catalog model launched with -hf downloads its own: the file given must be named
    repo = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"
    hf = _llama(capsys, "--model", f"{repo}:Q4_K_M", "--mmproj", str(path))
    assert hf["argv"][:3] == ["llama-server", "-hf", f"{repo}:Q4_K_M"]
    assert hf["argv"][hf["argv"].index("--mmproj") + 1] == str(path)
    # a model file: the projector's whole path, not its name alone
    local = _llama(capsys, "--model", "llama-3.1-8b-instruct", "--mmproj", str(path))
    assert local["argv"][local["argv"].index("--mmproj") + 1] == str(path)
    # without a chosen file, -hf still leaves the projector to llama.cpp
    assert "--mmproj" not in _llama(capsys, "--model", f"{repo}:Q4_K_M")["argv"]
