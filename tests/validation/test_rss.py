"""The CPU's weights as llama-server b11434 holds them, with the file mapped (its
default), read in (`--load-mode none`) and without repacking (`--no-repack`).

validation/rss_b11434.json holds what validation/rss_probe.py measured: the model buffer
lines llama-server printed and its resident memory (/proc/PID/status) after one short
completion, for a synthetic Llama-shaped model stored in Q4_0, Q4_K (repacked on AVX2)
and Q5_K (not repacked). The engine's CPU weights must equal the buffers, and explain the
resident memory between the loading modes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.core.memory import repack_for, weights_layout
from rigspark_gui.core.model import Geometry, ModelSpec, TensorGroup, TensorInfo
from rigspark_gui.core.placement import CPU, device_loads, uniform_placement
from rigspark_gui.core.rig import Cpu, Rig
from rigspark_gui.core.settings import PlanSettings

DATA = json.loads((Path(__file__).resolve().parents[2] / "validation/rss_b11434.json").read_text())
MIB = 1 << 20
# the buffer lines carry two decimals of MiB
LINE_ROUNDING = 0.005 * MIB
# resident memory the weights do not explain: the process, its KV and compute pages,
# and the token table's rows a GET_ROWS never touched while mapped
RSS_SLACK = 16 * MIB
SETTINGS = {
    "default": {"mmap": True},
    "load-mode none": {"mmap": False},
    "no-repack": {"mmap": True, "repack": False},
}


def _spec(quant: str) -> ModelSpec:
    from validation.synth import Synth, _tensors

    m = Synth(**DATA["model"])
    g = Geometry(
        architecture=m.arch,
        n_layer=m.n_layer,
        n_embd=m.n_embd,
        n_head=m.n_head,
        n_head_kv=m.n_head_kv,
        head_dim_k=m.head_dim,
        head_dim_v=m.head_dim,
        n_vocab=m.n_vocab,
        n_ff=m.n_ff,
        context_length=m.context_length,
    )
    tensors = []
    for name, shape in _tensors(m):
        if name.startswith("blk."):
            group, layer = TensorGroup.BLOCK, int(name.split(".")[1])
        else:
            group = TensorGroup.INPUT if name == "token_embd.weight" else TensorGroup.OUTPUT
            layer = None
        kind = "F32" if len(shape) == 1 else quant
        tensors.append(TensorInfo(name=name, type=kind, shape=shape, group=group, layer=layer))
    return ModelSpec(id="synth", name="synth", geometry=g, quants=(quant,), tensors=tuple(tensors))


def _cpu_weights(quant: str, mode: str) -> int:
    spec = _spec(quant)
    rig = Rig(ram_total_bytes=64 << 30, cpu=Cpu(features=("avx2", "avx512")))
    s = PlanSettings(context=512, parallel=1, **SETTINGS[mode])  # type: ignore[arg-type]
    p = uniform_placement(spec.geometry, rig, s, CPU)
    repack = repack_for(spec, "file", rig.cpu.features, s)
    layout = weights_layout(spec, "file")
    loads = device_loads(p, spec.geometry, layout, rig, s, cpu_repack=repack)
    return next(x.weights_bytes for x in loads if x.device == CPU)


RUNS = [(r["quant"], r["mode"], r) for r in DATA["runs"]]


@pytest.mark.parametrize(("quant", "mode", "run"), RUNS, ids=[f"{q}-{m}" for q, m, _ in RUNS])
def test_cpu_weights_are_llama_servers_model_buffers(quant, mode, run) -> None:
    buffers = sum(run["model_buffers_bytes"].values())
    assert abs(_cpu_weights(quant, mode) - buffers) <= LINE_ROUNDING * len(
        run["model_buffers_bytes"]
    )


@pytest.mark.parametrize("quant", ["Q4_0", "Q4_K", "Q5_K"])
def test_resident_memory_follows_the_loading_mode(quant) -> None:
    runs = {r["mode"]: r for r in DATA["runs"] if r["quant"] == quant}
    rss = {m: r["after_completion"]["VmRSS_kib"] * 1024 for m, r in runs.items()}
    weights = {m: _cpu_weights(quant, m) for m in runs}
    for mode in runs:
        # what the weights do not explain is the same small remainder in every mode
        assert abs((rss[mode] - weights[mode]) - (rss["no-repack"] - weights["no-repack"])) < (
            RSS_SLACK
        )
    repacked = quant != "Q5_K"
    # mapped and repacked: the repacked tensors' pages stay resident beside the copy
    assert (rss["default"] > 1.8 * rss["load-mode none"]) is repacked
    assert abs(rss["load-mode none"] - rss["no-repack"]) < RSS_SLACK
    file_pages = runs["default"]["after_completion"]["RssFile_kib"] * 1024
    assert (file_pages > 0.9 * runs["default"]["file_bytes"]) is True
    read_in = runs["load-mode none"]["after_completion"]["RssFile_kib"] * 1024
    assert read_in < RSS_SLACK  # read in: no file pages, the program's own only
