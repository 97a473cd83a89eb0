"""The loading flag of a launch: for llama-server `--load-mode none` where the CPU holds
weights its backend repacks and the plan reads them in rather than mapping them (the
mapped pages would stay resident beside the repacked copy), `--no-repack` where the plan
asks for it; for koboldcpp `--usemmap` where the plan maps the file (it reads it in by
itself); for Ollama the `use_mmap` parameter where the plan pins the loading. The memory
figures behind them are in core/memory/repack.py."""

from __future__ import annotations

from rigspark_gui.core.memory import (
    KOBOLD_MMAP_FLAG,
    NO_MMAP_FLAG,
    NO_REPACK_FLAG,
    reads_in,
    repack_for,
)
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import CPU, INPUT, OUTPUT, Placement, gpu_device
from rigspark_gui.core.rig import Gpu, Rig
from rigspark_gui.core.settings import PlanSettings


def cpu_repacks(placement: Placement, spec: ModelSpec, quant: str, rig: Rig) -> bool:
    """Whether the CPU holds any weight its backend repacks under this placement."""
    r = repack_for(spec, quant, rig.cpu.features)
    if r is None:
        return False
    for u in placement.units:
        if u.unit == INPUT:
            continue
        if u.unit == OUTPUT:
            if u.device == CPU and r.output_bytes:
                return True
            continue
        whole = u.experts_device is None or u.experts_device == u.device
        dense = r.block_bytes[u.index] - (0 if whole else r.block_expert_bytes[u.index])
        if u.device == CPU and dense:
            return True
        if u.experts_device == CPU and r.block_expert_bytes[u.index]:
            return True
    return False


def placement_gpus(placement: Placement, rig: Rig) -> tuple[Gpu, ...]:
    """The rig's GPUs this placement gives any unit to (an engine that loads its own way
    may load differently without them: core/memory/repack.py engine_reads_in)."""
    used = {
        d for u in placement.units for d in (u.device, u.experts_device) if d not in (None, CPU)
    }
    return tuple(g for i, g in enumerate(rig.gpus) if gpu_device(i) in used)


def loading_args(
    placement: Placement, spec: ModelSpec, quant: str, s: PlanSettings, rig: Rig
) -> list[str]:
    """llama-server's loading flags for this plan (none: its defaults)."""
    args = [] if s.repack else [NO_REPACK_FLAG]
    # an explicit --no-mmap holds with --no-repack too; left open, only a repacked CPU
    # share makes reading the weights in worth it
    if s.mmap is False or (
        s.mmap is None and reads_in(s, cpu_repacks(placement, spec, quant, rig))
    ):
        args += NO_MMAP_FLAG.split()
    return args


def koboldcpp_loading_args(s: PlanSettings) -> list[str]:
    """koboldcpp's loading flag: `--usemmap` where the plan maps the file (koboldcpp
    reads it in by itself and has no flag against repacking, so it always repacks)."""
    return [] if reads_in(s, True) else [KOBOLD_MMAP_FLAG]


def ollama_use_mmap(s: PlanSettings) -> bool | None:
    """The `use_mmap` parameter Ollama's recipe sets: the plan's pinned loading, or None
    (Ollama's own choice, as planned). A pinned choice is always written: Ollama's own
    depends on the placement and the OS (server/sched.go disableMmapDefaultReason)."""
    return s.mmap
