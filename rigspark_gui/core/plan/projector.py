"""The model's vision/audio projector in a plan: where llama-server puts it, the memory
it sets aside before any layer is placed, and its own line on every device.

llama-server measures the projector first (`mtmd_get_memory_usage`) and, with `--fit`
on, adds its weights and compute buffer to the fit margin of the device it runs on
(tools/server/server-context.cpp, b11434: `fit_params_target[i] += size`). Setting that
memory aside on the device before planning is the same test for fit (free - margin -
projector) and for RigSpark's own rule, so every path, quantization search and KV
comparison of the plan sees it. The loads then show it as its own line
(`DeviceLoad.projector_bytes`) instead of inside the reserve.

Ollama (>= v0.30.11, ollama/ollama#16866) keeps the projector on the CPU when a GPU has
less than the projector + 1 GiB, and otherwise sets `--fit-target` to the projector's
weights + 1 GiB (`launch.ollama_fit_margin`); llama-server's own addition still applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from rigspark_gui.core.errors import InvalidModelError
from rigspark_gui.core.fit import FitOutcome
from rigspark_gui.core.launch import launch_gpus, ollama_fit_margin, ollama_projector_on_cpu
from rigspark_gui.core.memory import ProjectorLoad, projector_load
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import DeviceLoad, Placement, gpu_device
from rigspark_gui.core.plan.beside import claim, fit_beside, loads_beside, paths_beside
from rigspark_gui.core.plan.paths import PathName, PathPlan, model_paths
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import DEFAULT_FIT_TARGET_MIB, Backend, PlanSettings

CPU = "cpu"
MIB = 1 << 20


def projector_device(
    spec: ModelSpec, rig: Rig, s: PlanSettings, shown: Sequence[int] | None = None
) -> str:
    """cpu, or the GPU clip.cpp initialises: the first GPU the backend registers
    (`ggml_backend_init_by_type(GPU)`, tools/mtmd/clip.cpp b11434), unless
    `--no-mmproj-offload` or, under Ollama, its limited-VRAM rule keeps it on the CPU.
    `shown`: the rig GPUs the launch command lets llama-server see (CUDA_VISIBLE_DEVICES,
    `core.launch.launch_gpus`; None: all), so the first of those; none shown: the CPU."""
    local = [i for i in rig.local_gpus if shown is None or i in shown]
    if not s.mmproj_offload or not local or spec.projector is None:
        return CPU
    if s.backend is Backend.OLLAMA:
        on_cpu, _ = ollama_projector_on_cpu(spec.projector.weights_bytes, rig.gpus)
        if on_cpu:
            return CPU
    return gpu_device(local[0])


def placement_gpus(
    placement: Placement | Sequence[int] | None, rig: Rig, s: PlanSettings
) -> list[int] | None:
    """The GPUs llama-server sees for `placement` (or a path on the GPUs listed):
    llama.cpp and koboldcpp commands show only the GPUs it uses (`launch_gpus`); other
    engines (Ollama, LM Studio) see all."""
    if placement is None or s.backend not in (Backend.LLAMA_CPP, Backend.KOBOLDCPP):
        return None
    return launch_gpus(placement, rig)


def plan_projector(
    spec: ModelSpec, rig: Rig, s: PlanSettings, shown: Sequence[int] | None = None
) -> ProjectorLoad | None:
    """The projector a llama.cpp-based engine loads with this model (None: the model has
    none, "text only", or an engine that does not load it beside the model), on the
    device `projector_device` names for the GPUs `shown`. Its flash attention follows
    llama-server's `-fa`: off only when turned off."""
    p = spec.projector
    if p is None or s.text_only or not s.backend.ggml_based:
        return None
    width = spec.geometry.n_embd
    if p.projection_dim and p.projection_dim != width:
        raise InvalidModelError(
            f"the projector {p.file_name or p.projector_type} feeds {p.projection_dim}-wide "
            f"embeddings but {spec.name} is {width} wide: llama.cpp refuses it (mtmd.cpp: "
            "mismatch between text model and mmproj)"
        )
    fa = s.flash_attn or s.is_auto("flash_attn")
    return projector_load(p, projector_device(spec, rig, s, shown), fa, s.image_size)


def projector_settings(s: PlanSettings, load: ProjectorLoad | None) -> PlanSettings:
    """Ollama's fit margin with the projector on a GPU: its weights + 1 GiB, in whole
    MiB, where the margin was left at llama.cpp's default."""
    if (
        load is None
        or load.device == CPU
        or s.backend is not Backend.OLLAMA
        or s.fit_target_mib != (DEFAULT_FIT_TARGET_MIB,)
    ):
        return s
    return replace(s, fit_target_mib=(ollama_fit_margin(load.weights_bytes) // MIB,))


def projector_bytes_on(load: ProjectorLoad | None) -> dict[str, int]:
    """The projector's bytes per device: its weights and compute where it runs, the
    input image on the host when that is a GPU."""
    if load is None:
        return {}
    out = {load.device: load.device_bytes}
    if load.device != CPU and load.host_bytes:
        out[CPU] = load.host_bytes
    return out


def claimed_rig(rig: Rig, load: ProjectorLoad | None) -> Rig:
    """`rig` with the projector's memory set aside on its devices."""
    return claim(rig, projector_bytes_on(load))


def with_projector(
    loads: tuple[DeviceLoad, ...], load: ProjectorLoad | None, rig: Rig
) -> tuple[DeviceLoad, ...]:
    """The loads of a plan made on `claimed_rig`, told against the real `rig` with the
    projector as its own line (`projector_bytes`)."""
    return loads_beside(loads, projector_bytes_on(load), rig, "projector_bytes")


def with_projector_fit(fit: FitOutcome | None, load: ProjectorLoad | None) -> FitOutcome | None:
    """Fit's rows as llama-server logs them: the device's free memory as read, its
    margin grown by the projector (`fit_params_target[i] += size`)."""
    on = projector_bytes_on(load)
    return fit_beside(fit, {d: b for d, b in on.items() if d != CPU}, margin=True)


def path_projectors(
    spec: ModelSpec, rig: Rig, s: PlanSettings
) -> dict[PathName, ProjectorLoad | None]:
    """The projector on each path as that path's command would load it: on the first GPU
    the command shows (a CPU-only path's command shows none: on the CPU)."""
    out: dict[PathName, ProjectorLoad | None] = {}
    for c in model_paths(spec, rig, s.backend):
        local = [i for i in c.gpu_ids if i in rig.local_gpus]
        out[c.name] = plan_projector(spec, rig, s, placement_gpus(local, rig, s))
    return out


def with_projector_paths(
    paths: tuple[PathPlan, ...],
    load: ProjectorLoad | None,
    per_path: Mapping[PathName, ProjectorLoad | None] | None = None,
    recommended: PathName | None = None,
) -> tuple[PathPlan, ...]:
    """Each path's required and usable memory with the projector counted where it runs:
    the plan's `load` on the recommended path (and where the path's own is on the same
    device), the path's own (`per_path`) elsewhere."""
    out: list[PathPlan] = []
    for p in paths:
        own = (per_path or {}).get(p.path, load)
        if p.path is recommended or own is None or load is None or own.device == load.device:
            own = load
        out.extend(paths_beside((p,), projector_bytes_on(own), "projector_bytes"))
    return tuple(out)
