"""A plan's settings as the engine resolves what the user left to it ("auto").

Each engine has its own defaults (sources in docs/engines.md and /shared facts):
- llama.cpp (llama-server): context 0 = the trained context, shrunk by --fit until the
  model fits (never below --fit-ctx); flash attention auto (on when every device holding
  KV runs the op); 4 slots sharing one unified KV cache (tools/server/server.cpp).
- Ollama >= 0.30: a context tier by total VRAM, one slot, flash attention auto.
- LM Studio, koboldcpp, MLX, vLLM, SGLang: their defaults are not modelled here; an auto
  context is RigSpark's own default and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rigspark_gui.core.flash_attn import auto_note, resolve_flash_attn_auto
from rigspark_gui.core.launch import (
    OLLAMA_VERSIONS,
    ollama_context,
    ollama_flash_attn,
    ollama_total_vram,
)
from rigspark_gui.core.model import Geometry, ModelSpec
from rigspark_gui.core.placement import gpu_device
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import Backend, PlanSettings

# RigSpark's own context for engines whose default is not modelled
PLAN_CONTEXT = 8192
# llama-server's automatic slots (tools/server/server.cpp: n_parallel -1 -> 4, kv_unified)
LLAMA_SERVER_SLOTS = 4


# engines whose one sequence at a time is their documented default
_ONE_SLOT = {
    Backend.OLLAMA: "OLLAMA_NUM_PARALLEL defaults to 1",
    Backend.KOBOLDCPP: "koboldcpp serves one sequence per context",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceFlash:
    device: str
    on: bool
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """What each setting became for this plan, and the defaults it took."""

    engine: str
    context: int
    flash_attn: bool
    flash_attn_devices: tuple[DeviceFlash, ...]
    parallel: int
    kv_unified: bool
    # one sentence per default taken ("context: ...")
    assumed: tuple[str, ...]


def resolve_flash_attn(
    rig: Rig, s: PlanSettings, g: Geometry
) -> tuple[bool, tuple[DeviceFlash, ...], str]:
    """llama.cpp's -fa auto for these K/V types on the rig's GPUs (every one may hold a
    layer's KV under the default split; the CPU runs the op for every type): whether it
    ends on, each device's answer, and a one-line reason where it is not plain."""
    devices = [gpu_device(i) for i in range(len(rig.gpus))]
    on, answers = resolve_flash_attn_auto(rig, devices, s.kv_k, s.kv_v, g, s.gpu_backend)
    flash = tuple(
        DeviceFlash(device=d, on=a.supported, reason=a.reason or "the device runs the op")
        for d, a in answers.items()
    )
    return on, flash, auto_note(on, answers, g)


def resolve_defaults(spec: ModelSpec, rig: Rig, s: PlanSettings) -> tuple[PlanSettings, Resolved]:
    """Concrete settings for planning, and what was resolved. An auto context under
    llama.cpp's fit starts at the smallest context fit may choose (the planner then
    raises it to what fit settles on for the chosen quantization)."""
    g = spec.geometry
    assumed: list[str] = []
    b = s.backend
    parallel, unified = s.parallel, s.kv_unified
    if s.is_auto("parallel"):
        if b is Backend.LLAMA_CPP:
            parallel, unified = LLAMA_SERVER_SLOTS, True
            assumed.append("parallel: llama-server's 4 slots sharing one unified KV cache")
        else:
            parallel = 1
            source = _ONE_SLOT.get(b, f"RigSpark's assumption: {b.label}'s own is not modelled")
            assumed.append(f"parallel: 1 slot ({source})")
    flash = s.flash_attn
    flash_devices: tuple[DeviceFlash, ...] = ()
    if s.is_auto("flash_attn"):
        ollama_off = ollama_flash_attn(rig.gpus) if b is Backend.OLLAMA else (True, "")
        if not ollama_off[0]:
            flash = False
            assumed.append(f"flash attention: off ({ollama_off[1]})")
        elif b.ggml_based:
            flash, flash_devices, why = resolve_flash_attn(rig, s, g)
            state = "on" if flash else "off"
            assumed.append(f"flash attention: auto, {state}" + (f" ({why})" if why else ""))
            if not flash and s.kv_v.quantized:
                assumed.append(
                    f"llama.cpp refuses a quantized V cache ({s.kv_v.value}) without flash "
                    "attention"
                )
        else:
            flash = False
    context = s.context
    if s.is_auto("context"):
        trained = g.context_length
        if b is Backend.LLAMA_CPP and s.fit:
            context = min(s.fit_ctx, trained)
            assumed.append(
                f"context: the trained {trained:,} tokens, shrunk by llama.cpp's fit "
                f"(never below {s.fit_ctx:,})"
            )
        elif b is Backend.LLAMA_CPP:
            context = trained
            assumed.append(f"context: the trained {trained:,} tokens (--fit off)")
        elif b is Backend.OLLAMA:
            # a vision model gets 2048 at least (server/sched.go getRunner)
            vision = spec.projector is not None and not s.text_only
            context = ollama_context(ollama_total_vram(rig.gpus), trained, vision=vision)
            context *= parallel
            assumed.append(
                f"context: Ollama {OLLAMA_VERSIONS}'s {context:,} tokens for this much VRAM"
            )
        else:
            context = min(PLAN_CONTEXT, trained)
            assumed.append(
                f"context: {context:,} tokens (RigSpark's default; {b.label}'s own is not modelled)"
            )
    concrete = replace(s, context=context, flash_attn=flash, parallel=parallel, kv_unified=unified)
    resolved = Resolved(
        engine=b.label,
        context=context,
        flash_attn=flash,
        flash_attn_devices=flash_devices,
        parallel=parallel,
        kv_unified=unified,
        assumed=tuple(assumed),
    )
    return concrete, resolved
