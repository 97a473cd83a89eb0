"""The loading flags and the memory the plan counts agree: llama-server's command carries
exactly the flag the plan counted (a plan pinned to the command's own flags gives the
same figure), and an engine whose command cannot carry the flag is planned with
llama.cpp's default loading whatever the settings ask."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rigspark_gui.core.launch import launch_command
from rigspark_gui.core.launch.engine import Engine
from rigspark_gui.core.memory import LOAD_FLAG_BACKENDS, NO_MMAP_FLAG, NO_REPACK_FLAG
from rigspark_gui.core.plan import PathName, plan
from rigspark_gui.core.rig import GIB, Cpu, Rig
from rigspark_gui.core.settings import Backend, PlanSettings
from tests.conftest import make_rig

AVX2 = Cpu(cores=8, memory_bandwidth_gbps=40.0, features=("avx2",))
CPU_ONLY = Rig(ram_total_bytes=64 * GIB, cpu=AVX2)
# one 8 GiB GPU: an 8B model at Q8_0 spills blocks onto the CPU (a hybrid path)
HYBRID = replace(make_rig(1, ram_gib=64, vram_gib=8), cpu=AVX2)
ENGINES = {
    Backend.OLLAMA: Engine.OLLAMA,
    Backend.LM_STUDIO: Engine.LM_STUDIO,
    Backend.KOBOLDCPP: Engine.KOBOLDCPP,
}


def _cpu_path(p):
    return next(x for x in p.paths if x.path is PathName.CPU)


@pytest.mark.parametrize("backend", list(ENGINES))
@pytest.mark.parametrize("asked", [{"mmap": False}, {"repack": False}, {"mmap": None}])
def test_an_engine_without_the_flag_plans_its_default_loading(llama8b, perf, backend, asked):
    assert backend not in LOAD_FLAG_BACKENDS
    s = PlanSettings(quant="Q4_K_M", backend=backend, parallel=1)
    mapped = _cpu_path(plan(llama8b, CPU_ONLY, replace(s, mmap=True), perf))
    p = plan(llama8b, CPU_ONLY, replace(s, **asked), perf)
    cpu = _cpu_path(p)
    # the repacked weights' pages stay beside their copy: counted twice, as mapped
    assert cpu.required_bytes == mapped.required_bytes
    assert cpu.cpu_loading is None
    assert p.placement is not None
    cmd = launch_command(ENGINES[backend], p.placement, llama8b, "Q4_K_M", p.settings, CPU_ONLY)
    assert cmd.supported, cmd.explanation
    assert "load-mode" not in cmd.text and "repack" not in cmd.text and "mmap" not in cmd.text


def test_llama_cpp_counts_the_reduced_figure_the_others_do_not(llama8b, perf) -> None:
    s = PlanSettings(quant="Q4_K_M", mmap=False)
    llama = _cpu_path(plan(llama8b, CPU_ONLY, s, perf))
    ollama = _cpu_path(plan(llama8b, CPU_ONLY, replace(s, backend=Backend.OLLAMA), perf))
    assert llama.cpu_loading is not None
    assert llama.required_bytes == llama.cpu_loading.required_bytes
    # the repacked Q4_K weights (several GiB for an 8B model) are the difference
    assert ollama.required_bytes - llama.required_bytes > 3 * GIB


@pytest.mark.parametrize("rig", [CPU_ONLY, HYBRID], ids=["cpu", "hybrid"])
@pytest.mark.parametrize("quant", ["Q4_K_M", "Q8_0"])
@pytest.mark.parametrize("mmap", [None, True, False])
@pytest.mark.parametrize("repack", [True, False])
def test_the_command_carries_the_flag_the_plan_counted(llama8b, perf, rig, quant, mmap, repack):
    s = PlanSettings(quant=quant, mmap=mmap, repack=repack, context=8192)
    p = plan(llama8b, rig, s, perf)
    assert p.recommended is not None and p.placement is not None
    rec = next(x for x in p.paths if x.path is p.recommended)
    cmd = launch_command(Engine.LLAMA_CPP, p.placement, llama8b, quant, p.settings, rig)
    assert cmd.supported, cmd.explanation
    reads_in = NO_MMAP_FLAG in cmd.text
    no_repack = NO_REPACK_FLAG in cmd.text
    assert no_repack is not repack
    if mmap is not None:
        assert reads_in is not mmap
    if rec.cpu_loading is not None:
        # the path's own words name the flag it counted
        assert rec.cpu_loading.flag == (
            NO_REPACK_FLAG if no_repack else NO_MMAP_FLAG if reads_in else ""
        )
        assert rec.required_bytes == rec.cpu_loading.required_bytes
    # planned again with the command's flags pinned, the path needs what was counted
    pinned = plan(llama8b, rig, replace(s, mmap=not reads_in, repack=not no_repack), perf)
    again = next(x for x in pinned.paths if x.path is rec.path)
    assert again.quant == rec.quant
    assert again.required_bytes == rec.required_bytes


def test_q4_k_on_the_cpu_reads_in_and_q8_0_stays_mapped(llama8b, perf) -> None:
    """Left open, only weights the CPU repacks make the plan read the file in (Q8_0 is
    not repacked on x86: core/memory/repack.py REPACK_TYPES)."""
    for quant, flag in (("Q4_K_M", NO_MMAP_FLAG), ("Q8_0", "")):
        p = plan(llama8b, CPU_ONLY, PlanSettings(quant=quant), perf)
        cmd = launch_command(Engine.LLAMA_CPP, p.placement, llama8b, quant, p.settings, CPU_ONLY)
        assert (NO_MMAP_FLAG in cmd.text) is bool(flag)
        cpu = _cpu_path(p)
        assert (cpu.cpu_loading.flag if cpu.cpu_loading else "") == flag
