"""vLLM on one host: `vllm serve` with tensor or pipeline parallelism matching a placement
that keeps every layer on the GPUs in contiguous runs. vLLM across hosts, SGLang and
llama.cpp RPC are in `cluster.py`."""

from __future__ import annotations

import math

from rigspark_gui.core.errors import InvalidPlacementError
from rigspark_gui.core.launch.engine import (
    Engine,
    LaunchCommand,
    accept,
    cuda_env,
    hf_repo,
    per_sequence_context,
    refuse,
    used_gpus,
)
from rigspark_gui.core.launch.llama_layout import buffer_prefix, llama_layout
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.placement import CPU, INPUT, Placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings

# vLLM's default; the command raises it only when the placement needs more.
VLLM_DEFAULT_GPU_UTIL = 0.90
VLLM_MAX_GPU_UTIL = 0.98


def vllm_command(
    placement: Placement,
    spec: ModelSpec,
    s: PlanSettings,
    rig: Rig,
    *,
    model_path: str | None = None,
    gpu_fraction_needed: float | None = None,
) -> LaunchCommand:
    engine = Engine.VLLM
    if s.kv_k != s.kv_v or s.kv_k not in (KvCacheType.F16, KvCacheType.BF16, KvCacheType.FP8):
        return refuse(
            engine,
            f"--kv-cache-dtype is auto (the model's f16/bf16) or fp8 for K and V together; "
            f"this plan uses K {s.kv_k.value}, V {s.kv_v.value}",
        )
    on_cpu = [u.unit for u in placement.units if u.unit != INPUT and u.device == CPU]
    experts_cpu = [u.unit for u in placement.units if u.experts_device == CPU]
    if on_cpu or experts_cpu:
        what = on_cpu or experts_cpu
        return refuse(
            engine,
            f"vLLM cannot offload single layers or experts to the CPU ({what[0]} is there); "
            "its --cpu-offload-gb streams weights over PCIe every step instead",
        )
    try:
        layout = llama_layout(placement)
    except InvalidPlacementError as err:
        return refuse(engine, str(err))
    if layout.overrides:
        return refuse(
            engine, "vLLM splits layers contiguously across GPUs in order; this placement is not"
        )
    g = spec.geometry
    counts = [c for c in (layout.tensor_split or (g.n_layer + 1,)) if c > 0]
    k = len(counts)
    env: list[tuple[str, str]] = []
    even = max(counts) - min(counts) <= 1
    if k > 1 and even and g.n_head % k == 0 and g.n_head_kv % k == 0:
        tp, pp = k, 1
    else:
        tp, pp = 1, k
        if k > 1 and not even:
            # counts are slots; vLLM partitions the blocks and puts the head on the last rank
            blocks = [*counts[:-1], counts[-1] - 1]
            env.append(("VLLM_PP_LAYER_PARTITION", ",".join(str(b) for b in blocks)))
    util = VLLM_DEFAULT_GPU_UTIL
    if gpu_fraction_needed is not None:
        util = max(util, min(VLLM_MAX_GPU_UTIL, math.ceil(gpu_fraction_needed * 100) / 100))
    argv = ["vllm", "serve", model_path or hf_repo(spec)]
    argv += ["--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp)]
    argv += ["--kv-cache-dtype", "fp8" if s.kv_k is KvCacheType.FP8 else "auto"]
    argv += ["--max-model-len", str(per_sequence_context(s))]
    argv += ["--gpu-memory-utilization", f"{util:.2f}", "--max-num-seqs", str(s.parallel)]
    prefix = buffer_prefix(rig)
    used = [d.split(":")[1] for d in used_gpus(placement)]
    if prefix == "CUDA" and len(used) < len(rig.gpus):
        env.append(("CUDA_VISIBLE_DEVICES", ",".join(used)))
    env += cuda_env(rig, prefix)
    notes = ["vLLM loads the Hugging Face weights (safetensors), not the GGUF file"]
    if tp > 1:
        notes.append("tensor parallel: every GPU holds 1/k of each layer, memory per GPU as even")
    return accept(engine, argv, env, notes)
