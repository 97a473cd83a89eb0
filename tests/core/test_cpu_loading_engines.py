"""The loading flags and the memory the plan counts agree: llama-server's command carries
exactly the flag the plan counted (a plan pinned to the command's own flags gives the
same figure); koboldcpp, Ollama and LM Studio are planned with their own default loading
(koboldcpp reads the file in, Ollama reads it in when no layer goes to a GPU, LM Studio
maps it) and say a pinned choice their own way (`--usemmap`, `use_mmap`, a note); none
of them can turn repacking off."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rigspark_gui.core.launch import launch_command
from rigspark_gui.core.launch.engine import Engine
from rigspark_gui.core.memory import LOAD_FLAG_BACKENDS, NO_MMAP_FLAG, NO_REPACK_FLAG
from rigspark_gui.core.memory.repack import (
    KOBOLD_MMAP_FLAG,
    MMAP_CHOICE_BACKENDS,
    REPACK_FLAG_BACKENDS,
    engine_reads_in,
)
from rigspark_gui.core.placement import CPU
from rigspark_gui.core.plan import PathName, plan
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import Backend, PlanSettings
from tests.conftest import make_rig

AVX2 = Cpu(cores=8, memory_bandwidth_gbps=40.0, features=("avx2",))
CPU_ONLY = Rig(ram_total_bytes=64 * GIB, cpu=AVX2)
# one 8 GiB GPU: an 8B model at Q8_0 spills blocks onto the CPU (a hybrid path)
HYBRID = replace(make_rig(1, ram_gib=64, vram_gib=8), cpu=AVX2)
# one 4 GiB GPU: at Q4_K_M (repacked on AVX2) about half the blocks stay on the CPU
SMALL_GPU = replace(make_rig(1, ram_gib=64, vram_gib=4), cpu=AVX2)
ENGINES = {
    Backend.OLLAMA: Engine.OLLAMA,
    Backend.LM_STUDIO: Engine.LM_STUDIO,
    Backend.KOBOLDCPP: Engine.KOBOLDCPP,
}


def _cpu_path(p):
    return next(x for x in p.paths if x.path is PathName.CPU)


def _path(p, name):
    return next(x for x in p.paths if x.path is name)


def _command(spec, p, backend, rig):
    assert p.placement is not None
    cmd = launch_command(ENGINES[backend], p.placement, spec, "Q4_K_M", p.settings, rig)
    assert cmd.supported, cmd.explanation
    return cmd


def _on_gpu(placement) -> bool:
    return any(d not in (None, CPU) for u in placement.units for d in (u.device, u.experts_device))


def _reads_in(cmd, backend: Backend, placement) -> bool:
    """How the command loads the file, read from the command alone: koboldcpp maps only
    with --usemmap; Ollama as its `use_mmap` says, else reads in when no layer goes to a
    GPU; LM Studio reads in only when its note says to turn "Try mmap()" off."""
    if backend is Backend.KOBOLDCPP:
        return KOBOLD_MMAP_FLAG not in cmd.argv
    if backend is Backend.OLLAMA:
        if "use_mmap false" in cmd.text:
            return True
        return "use_mmap true" not in cmd.text and not _on_gpu(placement)
    return any("Try mmap()" in n for n in cmd.notes)


@pytest.mark.parametrize("backend", list(ENGINES))
@pytest.mark.parametrize("rig", [CPU_ONLY, SMALL_GPU], ids=["cpu", "hybrid"])
@pytest.mark.parametrize("mmap", [None, True, False])
@pytest.mark.parametrize("repack", [True, False])
def test_each_engine_loads_as_its_command_says(llama8b, perf, backend, rig, mmap, repack):
    s = PlanSettings(quant="Q4_K_M", backend=backend, parallel=1, context=8192)
    p = plan(llama8b, rig, replace(s, mmap=mmap, repack=repack), perf)
    assert p.recommended is not None and p.placement is not None
    rec = _path(p, p.recommended)
    cmd = _command(llama8b, p, backend, rig)
    reads_in = _reads_in(cmd, backend, p.placement)
    if mmap is not None:
        assert reads_in is not mmap
    # no engine but llama-server turns repacking off, and none takes llama.cpp's flags
    assert "repack" not in cmd.text and "load-mode" not in cmd.text
    if not repack:
        assert any("repack" in n for n in cmd.notes)
    # the plan with the command's own loading pinned needs what was counted
    pinned = plan(llama8b, rig, replace(s, mmap=not reads_in), perf)
    again = _path(pinned, rec.path)
    assert again.quant == rec.quant
    assert again.required_bytes == rec.required_bytes
    # the engine's own loading is what the plan counts (no CpuLoading: llama-server only)
    assert rec.cpu_loading is None


def test_koboldcpp_reads_in_by_default_and_maps_only_with_usemmap(llama8b, perf) -> None:
    s = PlanSettings(quant="Q4_K_M", backend=Backend.KOBOLDCPP, parallel=1)
    default = plan(llama8b, CPU_ONLY, s, perf)
    mapped = plan(llama8b, CPU_ONLY, replace(s, mmap=True), perf)
    assert KOBOLD_MMAP_FLAG not in _command(llama8b, default, Backend.KOBOLDCPP, CPU_ONLY).argv
    assert KOBOLD_MMAP_FLAG in _command(llama8b, mapped, Backend.KOBOLDCPP, CPU_ONLY).argv
    # the repacked Q4_K weights (several GiB for an 8B model) are held once
    assert _cpu_path(mapped).required_bytes - _cpu_path(default).required_bytes > 3 * GIB


def test_ollama_reads_in_on_the_cpu_alone_and_maps_beside_a_gpu(llama8b, perf) -> None:
    """server/sched.go disableMmapDefaultReason: `num_gpu` 0 (or no GPU) reads the file in;
    a CUDA GPU taking part of the layers leaves it mapped (on Linux)."""
    s = PlanSettings(quant="Q4_K_M", backend=Backend.OLLAMA, parallel=1, context=8192)
    default = plan(llama8b, SMALL_GPU, s, perf)
    read_in = plan(llama8b, SMALL_GPU, replace(s, mmap=False), perf)
    mapped = plan(llama8b, SMALL_GPU, replace(s, mmap=True), perf)
    cpu, offload = PathName.CPU, PathName.CPU_OFFLOAD
    assert _path(default, cpu).required_bytes == _path(read_in, cpu).required_bytes
    assert _path(default, offload).required_bytes == _path(mapped, offload).required_bytes
    assert _path(mapped, offload).required_bytes - _path(read_in, offload).required_bytes > GIB
    # its own choice is not written; a pinned one is, both ways
    own = _command(llama8b, default, Backend.OLLAMA, SMALL_GPU)
    assert "use_mmap" not in own.text
    # a rig does not say its OS: CUDA on Windows reads in, which a note says
    assert any("on Windows with CUDA" in n for n in own.notes)
    assert "PARAMETER use_mmap false" in _command(llama8b, read_in, Backend.OLLAMA, SMALL_GPU).text
    tagged = replace(llama8b, ollama_tag="llama3.1:8b-instruct-q4_K_M")
    p = plan(tagged, SMALL_GPU, replace(s, mmap=True), perf)
    assert "/set parameter use_mmap true" in _command(tagged, p, Backend.OLLAMA, SMALL_GPU).text


def test_ollama_default_by_placement() -> None:
    nvidia = Gpu(name="n", vendor=Vendor.NVIDIA)
    apple = Gpu(name="m", vendor=Vendor.APPLE, unified=True)
    assert engine_reads_in(Backend.OLLAMA, True, ())
    assert not engine_reads_in(Backend.OLLAMA, True, (nvidia,))
    # Metal with part of the layers on the CPU: read in
    assert engine_reads_in(Backend.OLLAMA, True, (apple,))
    # not said: the larger (mapped) figure
    assert not engine_reads_in(Backend.OLLAMA, True, None)
    assert engine_reads_in(Backend.KOBOLDCPP, False, (nvidia,))
    assert not engine_reads_in(Backend.LM_STUDIO, True, ())


def test_lm_studio_maps_unless_told_and_says_how_to_read_in(llama8b, perf) -> None:
    s = PlanSettings(quant="Q4_K_M", backend=Backend.LM_STUDIO, parallel=1)
    default = plan(llama8b, CPU_ONLY, s, perf)
    mapped = plan(llama8b, CPU_ONLY, replace(s, mmap=True), perf)
    read_in = plan(llama8b, CPU_ONLY, replace(s, mmap=False), perf)
    assert _cpu_path(default).required_bytes == _cpu_path(mapped).required_bytes
    assert _cpu_path(mapped).required_bytes - _cpu_path(read_in).required_bytes > 3 * GIB
    assert not any(
        "mmap" in n for n in _command(llama8b, default, Backend.LM_STUDIO, CPU_ONLY).notes
    )
    note = _command(llama8b, read_in, Backend.LM_STUDIO, CPU_ONLY).notes
    assert any('"Try mmap()"' in n for n in note)


def test_only_llama_server_turns_repacking_off() -> None:
    assert REPACK_FLAG_BACKENDS == LOAD_FLAG_BACKENDS == (Backend.LLAMA_CPP,)
    assert set(ENGINES) <= set(MMAP_CHOICE_BACKENDS)


def test_llama_cpp_reads_in_where_lm_studio_maps(llama8b, perf) -> None:
    """Left open, llama-server is told to read the file in (`--load-mode none`); LM Studio,
    whose `lms load` cannot say it, is planned with its own mapped default."""
    s = PlanSettings(quant="Q4_K_M")
    llama = _cpu_path(plan(llama8b, CPU_ONLY, s, perf))
    lms = _cpu_path(plan(llama8b, CPU_ONLY, replace(s, backend=Backend.LM_STUDIO), perf))
    assert llama.cpu_loading is not None and llama.cpu_loading.flag == NO_MMAP_FLAG
    assert llama.required_bytes == llama.cpu_loading.required_bytes
    # the repacked Q4_K weights (several GiB for an 8B model) are the difference
    assert lms.required_bytes == llama.cpu_loading.mapped_required_bytes
    assert lms.required_bytes - llama.required_bytes > 3 * GIB


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
