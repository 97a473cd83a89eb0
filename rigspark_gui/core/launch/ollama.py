"""Ollama: a Modelfile (`num_gpu`, `num_ctx`) and the server environment for a placement
that needs no `-ot` rule, created and run with `ollama create` / `ollama run`."""

from __future__ import annotations

import re
import shlex

from rigspark_gui.core.launch.engine import (
    Engine,
    LaunchCommand,
    cuda_env,
    default_model_file,
    per_sequence_context,
    refuse,
    shell_line,
    split_note,
)
from rigspark_gui.core.launch.llama_layout import buffer_prefix, simple_layout
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.placement import Placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings

# Ollama's OLLAMA_KV_CACHE_TYPE knows these three only.
_OLLAMA_KV = (KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q4_0)


def _safe_tag(text: str) -> str:
    tag = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    tag = re.sub(r"-{2,}", "-", tag).strip("-._")
    return tag[:80] or "model"


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
    # a model already in Ollama's store is built from its tag, not from a file
    path = spec.ollama_tag or model_path or default_model_file(spec, quant)
    if any(ord(c) < 32 for c in path):
        return refuse(engine, "the model path holds control characters")
    tag = _safe_tag(f"{spec.id.removeprefix('file:')}-{quant}")
    modelfile = [
        f"FROM {path}",
        f"PARAMETER num_gpu {layout.ngl}",
        f"PARAMETER num_ctx {per_sequence_context(s)}",
    ]
    env: list[tuple[str, str]] = [
        ("OLLAMA_FLASH_ATTENTION", "1" if s.flash_attn else "0"),
        ("OLLAMA_KV_CACHE_TYPE", s.kv_k.value),
        ("OLLAMA_NUM_PARALLEL", str(s.parallel)),
    ]
    env += cuda_env(rig, buffer_prefix(rig))
    argv = ("ollama", "create", tag, "-f", "Modelfile")
    text = "\n".join(
        [
            "# Modelfile",
            *modelfile,
            "",
            "# server environment, then create and run",
            shell_line(env, ["ollama", "serve"]),
            shlex.join(argv),
            shlex.join(["ollama", "run", tag]),
        ]
    )
    notes = (
        "Ollama applies one KV type to K and V and cannot express -ot rules or a custom split",
        *split_note(engine, placement),
    )
    return LaunchCommand(
        engine=engine, supported=True, argv=argv, env=tuple(env), text=text, notes=notes
    )
