"""How a path loads the weights its CPU holds, when llama.cpp repacks some of them: the
flag its launch carries (`--load-mode none`, or `--no-repack` when asked for) and the
path's memory with it and with llama.cpp's defaults (the file mapped: the repacked
tensors' pages stay resident beside their copy). Figures checked against llama-server's
resident memory in docs/validation.md ("CPU memory with and without mmap").
"""

from __future__ import annotations

from rigspark_gui.core.memory import (
    LOAD_FLAG_BACKENDS,
    NO_MMAP_FLAG,
    NO_REPACK_FLAG,
    CpuLoading,
    RepackBytes,
    loading_note,
    reads_in,
    repack_for,
)
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import CPU, FitEvaluator
from rigspark_gui.core.plan.path_fit import Trial, measure_path
from rigspark_gui.core.plan.paths import PathCandidate
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings


def repacked_on_cpu(
    repack: RepackBytes, ranges: list[tuple[str, int, int]], n_layer: int, cpu_experts: int = 0
) -> int:
    """The CPU_REPACK bytes of the units the slot runs put on the CPU (with the routed
    experts of blocks below `cpu_experts` kept in system memory)."""
    total = 0
    for d, lo, end in ranges:
        hi = min(end, n_layer)
        for i in range(lo, hi):
            if d == CPU:
                total += repack.block_bytes[i]
            elif i < cpu_experts:
                total += repack.block_expert_bytes[i]
        if end > n_layer and d == CPU:
            total += repack.output_bytes
    return total


def loading_flag(s: PlanSettings, repacks: bool) -> str:
    """The loading flag a llama.cpp launch carries ("" for none)."""
    if not s.repack:
        return NO_REPACK_FLAG
    return NO_MMAP_FLAG if reads_in(s, repacks) else ""


def cpu_loading(
    spec: ModelSpec, rig: Rig, s: PlanSettings, cand: PathCandidate, trial: Trial
) -> CpuLoading | None:
    """The path's loading when its CPU holds weights the CPU backend repacks (None when
    it holds none, or the engine's launch cannot say how to load)."""
    if s.backend not in LOAD_FLAG_BACKENDS:
        return None
    default = repack_for(spec, trial.quant, rig.cpu.features)
    if default is None:
        return None
    held = repacked_on_cpu(default, trial.ranges, spec.geometry.n_layer, trial.cpu_experts)
    if held == 0:
        return None
    ev = trial.ev
    mapped = FitEvaluator(ev.g, trial.layout, rig, ev.s, default, ev.ctx)
    tally = mapped.tally_ranges(trial.ranges, trial.cpu_experts)
    mapped_required = measure_path(tally, cand).required
    flag = loading_flag(s, True)
    required = trial.m.required
    return CpuLoading(
        flag=flag,
        repacked_bytes=held,
        required_bytes=required,
        mapped_required_bytes=mapped_required,
        note=loading_note(flag, held, required, mapped_required),
    )
