"""Launch commands as `rigspark-plan place` prints them for a model named the way each
tool's users name it: an Ollama tag runs with `ollama run TAG`, a CPU-only machine gets
no GPU flag."""

from __future__ import annotations

import json
from pathlib import Path

from rigspark_gui.cli import main

ROOT = Path(__file__).resolve().parents[2]
CPU_RIG = ROOT / "examples" / "rig-cpu-only.json"
GPU_RIG = ROOT / "examples" / "rig-2x3090.json"


def _commands(capsys, *argv: str) -> dict[str, dict]:
    code = main(["place", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {c["engine"]: c for c in json.loads(out)["launch_commands"]}


def test_an_ollama_tag_runs_as_typed_on_a_cpu_only_machine(capsys) -> None:
    cmds = _commands(capsys, "--model", "llama3.1:8b", "--backend", "ollama", "--rig", str(CPU_RIG))
    ollama = cmds["ollama"]
    assert ollama["supported"] and ollama["argv"] == ["ollama", "run", "llama3.1:8b"]
    lines = ollama["text"].splitlines()
    assert "ollama run llama3.1:8b" in lines
    serve = next(line for line in lines if line.endswith("ollama serve"))
    # Ollama >= 0.30 on a machine without VRAM defaults to 4096 tokens, an f16 KV cache
    # and automatic flash attention, and a new plan takes exactly those: nothing to set
    assert serve == "ollama serve"
    assert "Modelfile" not in ollama["text"] and "ollama create" not in ollama["text"]
    kobold = cmds["koboldcpp"]
    assert kobold["supported"]
    assert not {"--usevulkan", "--usecublas"} & set(kobold["argv"])  # no GPU here


def test_a_named_gguf_quantization_launches_llama_cpp_by_its_repo(capsys) -> None:
    repo = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"
    cmds = _commands(capsys, "--model", f"{repo}:Q4_K_M", "--rig", str(GPU_RIG))
    llama = cmds["llama.cpp"]
    assert llama["argv"][:3] == ["llama-server", "-hf", f"{repo}:Q4_K_M"]
    assert "-m" not in llama["argv"]
    ollama = cmds["ollama"]
    assert ollama["argv"] == ["ollama", "run", f"hf.co/{repo}:Q4_K_M"]
    assert "--usecublas" in cmds["koboldcpp"]["argv"]
