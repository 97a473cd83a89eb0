"""Ollama, as its users run it: `ollama run NAME` with the context, KV cache and flash
attention given to the server the way Ollama takes them (`OLLAMA_CONTEXT_LENGTH`,
`OLLAMA_KV_CACHE_TYPE`, `OLLAMA_FLASH_ATTENTION`), for a placement that needs no `-ot`
rule. NAME is the model's tag (one in Ollama's store, or the library tag the user
typed) or `hf.co/REPO:QUANT` when a Hugging Face repository holds the file; only a
file on disk (or one no name is known for) gets a Modelfile and `ollama create`."""

from __future__ import annotations

import re
import shlex

from rigspark_gui.core.launch.engine import (
    Engine,
    LaunchCommand,
    cuda_env,
    default_model_file,
    hf_gguf,
    per_sequence_context,
    refuse,
    shell_line,
    split_note,
)
from rigspark_gui.core.launch.llama_layout import LlamaLayout, buffer_prefix, simple_layout
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.placement import Placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings

# Ollama's OLLAMA_KV_CACHE_TYPE knows these three only.
_OLLAMA_KV = (KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q4_0)
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


def _server_env(s: PlanSettings, rig: Rig, with_context: bool) -> list[tuple[str, str]]:
    env: list[tuple[str, str]] = []
    if with_context:
        env.append(("OLLAMA_CONTEXT_LENGTH", str(per_sequence_context(s))))
    env += [
        ("OLLAMA_FLASH_ATTENTION", "1" if s.flash_attn else "0"),
        ("OLLAMA_KV_CACHE_TYPE", s.kv_k.value),
        ("OLLAMA_NUM_PARALLEL", str(s.parallel)),
    ]
    return env + list(cuda_env(rig, buffer_prefix(rig)))


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
        return refuse(engine, f"OLLAMA_KV_CACHE_TYPE knows f16, q8_0 and q4_0, not {s.kv_k.value}")
    if s.kv_k.quantized and not s.flash_attn:
        return refuse(engine, "a quantized KV cache needs OLLAMA_FLASH_ATTENTION=1")
    layout = simple_layout(engine, placement)
    if isinstance(layout, LaunchCommand):
        return layout
    name, name_notes = (None, ()) if model_path else _model_name(spec, quant)
    notes = (
        *name_notes,
        "Ollama applies one KV type to K and V and cannot express -ot rules or a custom split",
        "if Ollama runs as a service (the desktop app, systemd), set these variables in its "
        "environment and restart it instead of running ollama serve",
        *split_note(engine, placement),
    )
    if name is None:
        path = model_path or default_model_file(spec, quant)
        # a name a download would have, not a file RigSpark read
        placeholder = model_path is None and not (spec.imported and path == spec.source)
        return _modelfile_command(layout, spec, quant, s, rig, path, placeholder, notes)
    if any(ord(c) < 32 for c in name):
        return refuse(engine, "the model name holds control characters")
    env = _server_env(s, rig, with_context=True)
    argv = ("ollama", "run", name)
    lines = [
        "# the server, with this plan's context, KV cache and flash attention",
        shell_line(env, ["ollama", "serve"]),
        "# then, in another terminal",
        shlex.join(argv),
    ]
    n_slots = spec.geometry.n_layer + 1
    if rig.gpus and layout.ngl < n_slots:
        lines += [
            f"# in the chat: keep this placement's {layout.ngl} layers on the GPU "
            "(Ollama picks its own count otherwise)",
            f"/set parameter num_gpu {layout.ngl}",
        ]
    notes = (
        *notes,
        "OLLAMA_CONTEXT_LENGTH is the context of each request; an older Ollama ignores it: "
        f"type /set parameter num_ctx {per_sequence_context(s)} in the chat",
    )
    return LaunchCommand(
        engine=engine,
        supported=True,
        argv=argv,
        env=tuple(env),
        text="\n".join(lines),
        notes=notes,
    )


def _modelfile_command(
    layout: LlamaLayout,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
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
        f"PARAMETER num_gpu {layout.ngl}",
        f"PARAMETER num_ctx {per_sequence_context(s)}",
    ]
    env = _server_env(s, rig, with_context=False)
    argv = ("ollama", "create", tag, "-f", "Modelfile")
    text = "\n".join(
        [
            *modelfile,
            "",
            "# the server, with this plan's KV cache and flash attention",
            shell_line(env, ["ollama", "serve"]),
            "# then, in another terminal: import the file and run it",
            shlex.join(argv),
            shlex.join(["ollama", "run", tag]),
        ]
    )
    return LaunchCommand(
        engine=engine, supported=True, argv=argv, env=tuple(env), text=text, notes=notes
    )
