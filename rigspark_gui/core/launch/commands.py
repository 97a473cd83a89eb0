"""Launch commands for a placement: which engine's command to build, and the dispatch to
llama.cpp (`llama_cpp.py`), koboldcpp, Ollama (`ollama.py`), LM Studio (`lm_studio.py`)
and vLLM (`vllm.py`). A placement that spans hosts runs only on llama.cpp's RPC
(`cluster.py`).
"""

from __future__ import annotations

from dataclasses import replace

from rigspark_gui.core.launch.cluster import rpc_launch
from rigspark_gui.core.launch.engine import Engine, LaunchCommand, refuse
from rigspark_gui.core.launch.llama_cpp import koboldcpp_command, llama_server_command
from rigspark_gui.core.launch.lm_studio import lm_studio_command
from rigspark_gui.core.launch.ollama import ollama_command
from rigspark_gui.core.launch.vllm import vllm_command
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import CPU, Placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings


def launch_command(
    engine: Engine,
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
    *,
    model_path: str | None = None,
    gpu_fraction_needed: float | None = None,
) -> LaunchCommand:
    """The command for one engine, or an explanation of why it cannot run `placement`."""
    if _spans_hosts(placement, rig):
        if engine is not Engine.LLAMA_CPP:
            return refuse(
                engine, "this placement spans hosts: only llama.cpp's RPC runs layers elsewhere"
            )
        c = rpc_launch(placement, spec, quant, s, rig, model_path=model_path)
        if not c.supported:
            return refuse(engine, c.explanation)
        return LaunchCommand(engine=engine, supported=True, text=c.text, notes=c.notes)
    if engine is Engine.LLAMA_CPP:
        return llama_server_command(placement, spec, quant, s, rig, model_path=model_path)
    if engine is Engine.KOBOLDCPP:
        return koboldcpp_command(placement, spec, quant, s, rig, model_path=model_path)
    if engine is Engine.OLLAMA:
        return ollama_command(placement, spec, quant, s, rig, model_path=model_path)
    if engine is Engine.LM_STUDIO:
        return lm_studio_command(placement, spec, quant, s, rig)
    return vllm_command(
        placement, spec, s, rig, model_path=model_path, gpu_fraction_needed=gpu_fraction_needed
    )


def _spans_hosts(placement: Placement, rig: Rig) -> bool:
    devices = {u.device for u in placement.units} | {
        u.experts_device for u in placement.units if u.experts_device is not None
    }
    return any(
        d != CPU and (not d.startswith("gpu:") or rig.gpus[int(d.split(":")[1])].host)
        for d in devices
    )


def launch_commands(
    placement: Placement, spec: ModelSpec, quant: str, s: PlanSettings, rig: Rig
) -> tuple[LaunchCommand, ...]:
    return tuple(launch_command(e, placement, spec, quant, engine_view(s, e), rig) for e in Engine)


def engine_view(s: PlanSettings, engine: Engine) -> PlanSettings:
    """The plan's settings as another engine takes them: slots left to the engine are
    that engine's own (one sequence everywhere but llama-server)."""
    if engine is Engine.LLAMA_CPP or not s.is_auto("parallel") or s.parallel == 1:
        return s
    return replace(s, parallel=1, kv_unified=False)
