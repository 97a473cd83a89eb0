"""Ollama, as its users run it: `ollama run NAME`, with only the settings where this
plan differs from what Ollama would choose by itself, for a placement that needs no `-ot`
rule. NAME is the model's tag (one in Ollama's store, or the library tag the user
typed) or `hf.co/REPO:QUANT` when a Hugging Face repository holds the file; only a
file on disk (or one no name is known for) gets a Modelfile and `ollama create`.

The recipe is for Ollama 0.30 and later (ollama/ollama PR #16031), which starts
llama.cpp's llama-server and lets `--fit` place the layers; `ollama_defaults.py` holds
what Ollama decides by itself there (context by VRAM, flash attention auto, one
sequence, an f16 KV cache) and where each rule is in Ollama's source. Only a context,
KV type or sequence count that differs from those is written (`OLLAMA_CONTEXT_LENGTH`
or a Modelfile's `PARAMETER num_ctx`, `OLLAMA_KV_CACHE_TYPE`, `OLLAMA_NUM_PARALLEL`),
and `num_gpu` only when the plan keeps layers off the GPU: Ollama's own automatic
flash attention is never overridden. The weights' loading is Ollama's own (read in when
no layer goes to a GPU or a Metal GPU takes only part of them, mapped otherwise), which
the plan counts; a loading the plan pins is written as the `use_mmap` parameter."""

from __future__ import annotations

import re
import shlex
from typing import NamedTuple

from rigspark_gui.core.launch.cpu_loading import cpu_repacks, ollama_use_mmap, placement_gpus
from rigspark_gui.core.launch.engine import (
    Engine,
    LaunchCommand,
    default_model_file,
    hf_gguf,
    per_sequence_context,
    refuse,
    shell_line,
    split_note,
    used_gpus,
)
from rigspark_gui.core.launch.llama_layout import simple_layout
from rigspark_gui.core.launch.ollama_defaults import (
    GIB,
    OLLAMA_VERSIONS_LABEL,
    ollama_context,
    ollama_context_fallback,
    ollama_flash_attn,
    ollama_num_parallel,
    ollama_total_vram,
)
from rigspark_gui.core.memory import reads_in
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.placement import Placement
from rigspark_gui.core.rig import Rig, Vendor
from rigspark_gui.core.settings import PlanSettings

# Ollama >= 0.30 hands OLLAMA_KV_CACHE_TYPE to llama-server unchecked (llm/server.go
# NewLlamaServer, llm/llama_server.go startLlamaServer): any llama.cpp cache type runs.
_OLLAMA_KV = tuple(k for k in KvCacheType if k.llama_cpp)
# K = V types with a flash-attention kernel in llama.cpp's standard CUDA/ROCm build
# (ggml-cuda/fattn.cu without GGML_CUDA_FA_ALL_QUANTS, which Ollama's build leaves off)
_CUDA_FA_KV = (
    KvCacheType.F32,
    KvCacheType.F16,
    KvCacheType.BF16,
    KvCacheType.Q8_0,
    KvCacheType.Q4_0,
)
# a quantization in a tag, as the library writes it (8b-instruct-q4_K_M, 8b-fp16)
_TAG_QUANT = re.compile(
    r"(?<![a-z0-9])(i?q\d_[a-z0-9_]+|fp16|f16|bf16|f32|mxfp4)(?![a-z0-9])", re.IGNORECASE
)
# what most library tags without a quantization download (ollama.com/library)
_LIBRARY_DEFAULT_QUANT = "Q4_K_M"


def _safe_tag(text: str) -> str:
    tag = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    tag = re.sub(r"-{2,}", "-", tag).strip("-._")
    return tag[:80] or "model"


def _tag_quant(tag: str) -> str | None:
    m = _TAG_QUANT.search(tag.rpartition(":")[2])
    if m is None:
        return None
    q = m.group(1).upper()
    return "F16" if q == "FP16" else q


def _model_name(spec: ModelSpec, quant: str) -> tuple[str | None, tuple[str, ...]]:
    """The name `ollama run` takes for this model at `quant`, and notes; None when only
    a file is known (then a Modelfile imports it)."""
    tag = spec.ollama_tag
    if tag:
        named = _tag_quant(tag)
        if named is not None and named != quant.upper():
            return tag, (f"{tag} is {named}, not this plan's {quant}: run the {quant} tag",)
        if named is None and spec.tensors is None and quant.upper() != _LIBRARY_DEFAULT_QUANT:
            library = tag.partition(":")[0]
            return tag, (
                f"{tag} downloads Ollama's default quantization ({_LIBRARY_DEFAULT_QUANT} "
                f"for most library models), not this plan's {quant}: run the {quant} tag "
                f"listed at ollama.com/library/{library}/tags, or plan with --quant "
                f"{_LIBRARY_DEFAULT_QUANT}",
            )
        return tag, ()
    hf = hf_gguf(spec, quant)
    if hf is not None and not hf.sharded:
        return f"hf.co/{hf.ref}", (
            f"Ollama pulls {hf.quant} from huggingface.co/{hf.repo} on the first run",
        )
    return None, ()


class _Recipe(NamedTuple):
    """What the recipe sets, beyond Ollama's own defaults, and what it tells the user."""

    env: list[tuple[str, str]]
    # None: Ollama's automatic context is this plan's
    num_ctx: int | None
    notes: tuple[str, ...]


def _recipe(spec: ModelSpec, s: PlanSettings, rig: Rig) -> _Recipe | str:
    """The settings where this plan differs from Ollama's defaults, or why Ollama
    cannot run it."""
    ctx = per_sequence_context(s)
    trained = spec.geometry.context_length
    total_vram = ollama_total_vram(rig.gpus)
    auto_ctx = ollama_context(total_vram, trained)
    flash, flash_why = ollama_flash_attn(rig.gpus)
    if s.kv_k.quantized and not flash:
        return f"a quantized KV cache needs flash attention, and {flash_why}"
    env: list[tuple[str, str]] = []
    notes = [
        f"for {OLLAMA_VERSIONS_LABEL}: Ollama starts llama-server, which places the "
        "layers itself; only settings that differ from Ollama's own are given"
    ]
    num_ctx: int | None = None
    if ctx != auto_ctx:
        num_ctx = ctx
        notes.append(
            f"Ollama's own context here would be {auto_ctx} tokens ({total_vram / GIB:.0f} "
            f"GiB of VRAM); this plan sets {ctx}, which Ollama keeps (it lowers only its "
            "own automatic context after running out of memory)"
        )
    else:
        fallback = ollama_context_fallback(auto_ctx)
        notes.append(
            f"this plan uses Ollama's own context, {auto_ctx} tokens"
            + (
                f" (if the load runs out of memory Ollama retries once at {fallback})"
                if fallback
                else ""
            )
        )
    if s.kv_k is not KvCacheType.F16:
        env.append(("OLLAMA_KV_CACHE_TYPE", s.kv_k.value))
    if s.kv_k not in _CUDA_FA_KV and any(g.vendor in (Vendor.NVIDIA, Vendor.AMD) for g in rig.gpus):
        notes.append(
            f"Ollama's llama.cpp build has CUDA/ROCm flash-attention kernels for f16, q8_0 "
            f"and q4_0 caches only (no GGML_CUDA_FA_ALL_QUANTS): with {s.kv_k.value} the "
            "attention runs on the CPU"
        )
    parallel = ollama_num_parallel(s.parallel, spec.geometry.architecture)
    if s.parallel != 1:
        env.append(("OLLAMA_NUM_PARALLEL", str(s.parallel)))
    if parallel != s.parallel:
        notes.append(
            f"Ollama serves {spec.geometry.architecture} models one request at a time: "
            f"it ignores OLLAMA_NUM_PARALLEL and loads a context of {ctx} tokens"
        )
    if flash != s.flash_attn:
        notes.append(
            f"this plan was sized with flash attention {'on' if s.flash_attn else 'off'}; "
            f"{flash_why}"
        )
    return _Recipe(env, num_ctx, tuple(notes))


def ollama_command(
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
    *,
    model_path: str | None = None,
) -> LaunchCommand:
    engine = Engine.OLLAMA
    if s.kv_k != s.kv_v:
        return refuse(
            engine,
            f"OLLAMA_KV_CACHE_TYPE applies one type to K and V (this plan uses K "
            f"{s.kv_k.value}, V {s.kv_v.value})",
        )
    if s.kv_k not in _OLLAMA_KV:
        return refuse(engine, f"llama-server under Ollama has no {s.kv_k.value} KV cache")
    recipe = _recipe(spec, s, rig)
    if isinstance(recipe, str):
        return refuse(engine, recipe)
    layout = simple_layout(engine, placement)
    if isinstance(layout, LaunchCommand):
        return layout
    # num_gpu only when the plan keeps layers off the GPU: otherwise --fit offloads all
    num_gpu = layout.ngl if rig.gpus and layout.ngl < spec.geometry.n_layer + 1 else None
    use_mmap = ollama_use_mmap(s)
    name, name_notes = (None, ()) if model_path else _model_name(spec, quant)
    notes = (
        *name_notes,
        *recipe.notes,
        "Ollama applies one KV type to K and V and cannot express -ot rules or a custom split",
        "if Ollama runs as a service (the desktop app, systemd), set these variables in its "
        "environment and restart it instead of running ollama serve",
        *split_note(engine, placement),
        *_one_gpu_note(placement),
        *_loading_notes(placement, spec, quant, s, rig),
    )
    if name is None:
        path = model_path or default_model_file(spec, quant)
        # a name a download would have, not a file RigSpark read
        placeholder = model_path is None and not (spec.imported and path == spec.source)
        return _modelfile_command(
            spec,
            quant,
            recipe,
            num_gpu,
            use_mmap,
            path=path,
            placeholder=placeholder,
            notes=notes,
        )
    if any(ord(c) < 32 for c in name):
        return refuse(engine, "the model name holds control characters")
    env = list(recipe.env)
    if recipe.num_ctx is not None:
        env.insert(0, ("OLLAMA_CONTEXT_LENGTH", str(recipe.num_ctx)))
        notes = (
            *notes,
            "OLLAMA_CONTEXT_LENGTH is the context of each request; an older Ollama ignores "
            f"it: type /set parameter num_ctx {recipe.num_ctx} in the chat",
        )
    argv = ("ollama", "run", name)
    lines = [
        _serve_comment(env),
        shell_line(env, ["ollama", "serve"]),
        "# then, in another terminal",
        shlex.join(argv),
    ]
    if num_gpu is not None:
        lines += [
            f"# in the chat: keep this placement's {num_gpu} layers on the GPU "
            "(Ollama lets llama.cpp's --fit choose otherwise)",
            f"/set parameter num_gpu {num_gpu}",
        ]
    if use_mmap is not None:
        lines += [
            "# in the chat: load the weights "
            + ("memory-mapped" if use_mmap else "into memory, not memory-mapped"),
            f"/set parameter use_mmap {str(use_mmap).lower()}",
        ]
    return LaunchCommand(
        engine=engine,
        supported=True,
        argv=argv,
        env=tuple(env),
        text="\n".join(lines),
        notes=notes,
    )


def _serve_comment(env: list[tuple[str, str]]) -> str:
    if not env:
        return "# the server, as Ollama sets itself up"
    return "# the server, with what this plan changes from Ollama's defaults"


def _loading_notes(
    placement: Placement, spec: ModelSpec, quant: str, s: PlanSettings, rig: Rig
) -> tuple[str, ...]:
    """What Ollama's own loading does to the weights the CPU repacks, where it matters."""
    if not cpu_repacks(placement, spec, quant, rig):
        return ()
    notes: list[str] = []
    if not s.repack:
        notes.append("Ollama has no setting against repacking: its CPU repacks as planned")
    gpus = placement_gpus(placement, rig)
    if (
        s.mmap is None
        and not reads_in(s, True, gpus)
        and any(g.vendor is Vendor.NVIDIA for g in gpus)
    ):
        notes.append(
            "planned with the file memory-mapped, as Ollama loads it on Linux; on Windows "
            "with CUDA it reads the weights in by itself and holds the repacked ones once, "
            "needing less system memory than planned"
        )
    return tuple(notes)


def _one_gpu_note(placement: Placement) -> tuple[str, ...]:
    if len(used_gpus(placement)) > 1:
        return (
            "Ollama loads onto one GPU when its own estimate (file size plus an f16 KV "
            "cache) fits in 80 % of that GPU's free memory; OLLAMA_SCHED_SPREAD=1 spreads "
            "the model over all of them",
        )
    return ()


def _modelfile_command(
    spec: ModelSpec,
    quant: str,
    recipe: _Recipe,
    num_gpu: int | None,
    use_mmap: bool | None,
    *,
    path: str,
    placeholder: bool,
    notes: tuple[str, ...],
) -> LaunchCommand:
    """A GGUF file imported into Ollama's store with a Modelfile, then run."""
    engine = Engine.OLLAMA
    if any(ord(c) < 32 for c in path):
        return refuse(engine, "the model path holds control characters")
    tag = _safe_tag(f"{spec.id.removeprefix('file:')}-{quant}")
    modelfile = [
        "# Modelfile" + (f" (FROM: the path of your {quant} GGUF file)" if placeholder else ""),
        f"FROM {path}",
    ]
    if num_gpu is not None:
        modelfile.append(f"PARAMETER num_gpu {num_gpu}")
    if recipe.num_ctx is not None:
        modelfile.append(f"PARAMETER num_ctx {recipe.num_ctx}")
    if use_mmap is not None:
        modelfile.append(f"PARAMETER use_mmap {str(use_mmap).lower()}")
    env = recipe.env
    argv = ("ollama", "create", tag, "-f", "Modelfile")
    text = "\n".join(
        [
            *modelfile,
            "",
            _serve_comment(env),
            shell_line(env, ["ollama", "serve"]),
            "# then, in another terminal: import the file and run it",
            shlex.join(argv),
            shlex.join(["ollama", "run", tag]),
        ]
    )
    return LaunchCommand(
        engine=engine, supported=True, argv=argv, env=tuple(env), text=text, notes=notes
    )
