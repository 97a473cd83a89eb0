""" "As the engine runs it": what llama.cpp's fit (or Ollama, which starts llama-server
and lets fit place the layers) does with the plan's model file, and how that compares
with RigSpark's own plan, in one sentence."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rigspark_gui.core.fit import FitOutcome, FitStatus, UserFlags, fit_devices, llama_fit
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.plan.path_fit import max_context
from rigspark_gui.core.plan.paths import PathName, model_paths
from rigspark_gui.core.rig import Rig, gpu_index
from rigspark_gui.core.settings import Backend, PlanSettings

# the start of the sentence when llama.cpp alone would run the plan as planned
SAME_AS_FIT = "llama.cpp's own fit runs it the same way"
# engines that load through llama.cpp's fit: llama-server itself, and Ollama >= 0.30
FIT_ENGINES = (Backend.LLAMA_CPP, Backend.OLLAMA)


def engine_fit(
    spec: ModelSpec, rig: Rig, s: PlanSettings, quant: str, *, multi_host: bool = False
) -> FitOutcome | None:
    """Fit's outcome for `quant` under the engine's own command line: llama-server with
    the plan's settings and no -c when the context is left to it; Ollama always passes
    -c num_ctx x num_parallel. None for engines that do not run fit."""
    if s.backend not in FIT_ENGINES:
        return None
    auto_ctx = s.is_auto("context") and s.backend is Backend.LLAMA_CPP
    devices = tuple(
        d
        for d in fit_devices(rig)
        if multi_host or ((i := gpu_index(d)) is not None and not rig.gpus[i].host)
    )
    return llama_fit(
        spec,
        quant,
        rig,
        s,
        devices=devices,
        user=UserFlags(context=None if auto_ctx else s.context),
    )


def settled_context(fit: FitOutcome | None, s: PlanSettings, room: Callable[[], int]) -> int | None:
    """The larger context an auto-context llama.cpp plan moves to once its quantization
    is chosen: what fit settles on, as far as RigSpark's own fit rule allows (`room`:
    the largest context that passes it). None: stay at the planned context."""
    if (
        fit is None
        or not s.is_auto("context")
        or s.backend is not Backend.LLAMA_CPP
        or fit.status is FitStatus.FAILED
        or fit.context <= s.context
    ):
        return None
    bigger = min(fit.context, room())
    return bigger if bigger > s.context else None


def settle(
    spec: ModelSpec, rig: Rig, s: PlanSettings, quant: str, path: PathName, chosen: bool
) -> tuple[FitOutcome | None, int | None]:
    """Fit's outcome for the quantization chosen on `path`, and the larger context an
    auto-context llama.cpp plan moves to (None: it stays), as far as RigSpark's own fit
    rule allows there. `chosen`: a path was recommended (else nothing moves)."""
    fit = engine_fit(spec, rig, s, quant, multi_host=path is PathName.MULTI_HOST)
    if not chosen:
        return fit, None

    def room() -> int:
        cand = next(c for c in model_paths(spec, rig, s.backend) if c.name is path)
        return max_context(spec, rig, replace(s, quant=quant), cand, quant)

    return fit, settled_context(fit, s, room)


def fit_sentence(
    fit: FitOutcome,
    n_layer: int,
    plan_context: int,
    plan_gpu_slots: int,
    plan_gpus: int,
    plan_expert_layers: int = 0,
) -> str:
    """What llama.cpp alone would do, against RigSpark's plan, in one sentence."""
    slots = n_layer + 1
    if fit.status is FitStatus.OFF:
        return "llama.cpp's fit is off: it loads exactly as the command says"
    if fit.status is FitStatus.FAILED:
        return (
            f"llama.cpp's fit gives up ({fit.reason}): it loads as given and may run out of memory"
        )
    on_gpu = slots if fit.ngl < 0 else min(fit.ngl, slots)
    gpus = len(fit.devices) if fit.devices and fit.devices[0].device != "cpu" else 0
    same_layers = (
        on_gpu == plan_gpu_slots and not fit.overrides and not plan_expert_layers
    ) and gpus == plan_gpus
    if fit.context == plan_context and (same_layers or not gpus):
        return f"{SAME_AS_FIT} ({fit.command})"
    parts = []
    if fit.context != fit.initial_context:
        parts.append(f"shrink the context to {fit.context:,} tokens")
    else:
        parts.append(f"keep the context at {fit.context:,} tokens")
    if fit.devices and fit.devices[0].device != "cpu":
        n = len(fit.devices)
        where = "the GPU" if n == 1 else f"the {n} GPUs"
        if on_gpu >= slots and not fit.overrides:
            parts.append(f"keep every layer on {where}")
        else:
            parts.append(f"put {on_gpu} of {slots} layers on {where}")
        experts = sum(1 for o in fit.overrides if "exps" in o)
        if experts:
            parts.append(f"leave the experts of {experts} layers in system memory")
    alone = "llama.cpp alone would " + ", ".join(parts)
    on = "1 GPU" if plan_gpus == 1 else f"{plan_gpus} GPUs"
    layers = (
        f"{plan_gpu_slots} of {slots} layers on {on}"
        if plan_gpus and plan_gpu_slots
        else "every layer on the CPU"
    )
    ours = f"RigSpark's plan: {plan_context:,} tokens, {layers}"
    if plan_expert_layers:
        ours += f", the experts of {plan_expert_layers} in system memory (--n-cpu-moe)"
    return f"{alone}; {ours}"
