"""Size one serving path: ranks laid out as pipeline stages of tensor-parallel GPUs, each
GPU's budget as the engine divides it, the KV pool, the verdict the engine would give,
and throughput against concurrent users."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.model import Geometry, KvCacheType
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.serving.budget import (
    BLOCK_SIZE,
    CUDA_CONTEXT_BYTES,
    GIB,
    Pool,
    activation_peak,
    cuda_graph_bytes,
    engine_defaults,
    kv_bytes_per_token,
    non_torch_bytes,
    sglang_pool,
    sliding_layers,
    vllm_hybrid_pool,
    vllm_pool,
)
from rigspark_gui.core.serving.checkpoint import (
    mxfp4_triton_saving,
    pp_partition,
    rank_weights,
    stage_weights,
    tied_embedding_bytes,
)
from rigspark_gui.core.serving.model import GpuBudget, ServingPlan
from rigspark_gui.core.serving.throughput import compute_at_least, concurrency_curve
from rigspark_gui.core.settings import Backend, PlanSettings
from rigspark_gui.core.speed import SpeedModel


def _gib(n: float) -> str:
    return f"{n / GIB:.2f} GiB"


def tp_fits_heads(g: Geometry, tp: int) -> bool:
    """Whether tensor parallelism of `tp` splits the heads evenly: attention heads divide
    by it, and KV heads divide by it or it by them (then each rank keeps whole heads,
    replicated: vLLM's QKVParallelLinear, SGLang's likewise)."""
    kv = g.n_head_kv
    return g.n_head % tp == 0 and (kv == 0 or g.is_mla or kv % tp == 0 or tp % kv == 0)


def parallel_problem(g: Geometry, tp: int, pp: int, engine: str) -> str | None:
    """The engine's own refusal of a TP/PP layout, or None."""
    if g.n_head % tp:
        return (
            f"Total number of attention heads ({g.n_head}) must be divisible by tensor "
            f"parallel size ({tp})."
        )
    if not tp_fits_heads(g, tp):
        return (
            f"The {g.n_head_kv} KV heads can be neither split nor replicated evenly over "
            f"tensor parallel size {tp}: {engine} stops loading the attention weights."
        )
    if pp > g.n_layer:
        return f"{engine} cannot split {g.n_layer} layers into {pp} pipeline stages."
    return None


def size_serving(
    g: Geometry,
    rig: Rig,
    s: PlanSettings,
    gpu_ids: Sequence[int],
    tp: int,
    pp: int,
    fmt: str,
    speed: SpeedModel | None,
    weights_scale: float = 1.0,
    users_at: Sequence[int] | None = None,
) -> ServingPlan:
    """Every GPU's budget for `fmt` on `gpu_ids` (pp stages of tp GPUs, in order).
    `weights_scale`: a read checkpoint's bytes over the geometry's estimate."""
    assert len(gpu_ids) == tp * pp, "a serving layout needs tp × pp GPUs"
    engine = s.backend
    name = engine.label
    gpus = [rig.gpus[i] for i in gpu_ids]
    smallest = min(gpus, key=lambda x: x.memory_total_bytes or 0)
    d = engine_defaults(engine, smallest, tp, pp)
    util = s.memory_utilization if s.memory_utilization is not None else d.memory_utilization
    sglang = engine is Backend.SGLANG
    # SGLang's defaults carry cuda_graph_max_bs; its request limit follows from the pool
    seqs = s.max_num_seqs or d.max_num_seqs
    batched = s.max_num_batched_tokens or d.max_num_batched_tokens
    kv_b = 1 if s.kv_k is KvCacheType.FP8 else 2
    stages = pp_partition(g.n_layer, pp)
    w = rank_weights(g, fmt, tp)
    if weights_scale != 1.0:
        w = w._replace(
            embedding=round(w.embedding * weights_scale),
            head=round(w.head * weights_scale),
            layers=tuple(round(b * weights_scale) for b in w.layers),
        )
    per_stage = stage_weights(w, stages, round(tied_embedding_bytes(g, tp) * weights_scale))
    offload = int(s.cpu_offload_gb * GIB) if engine is Backend.VLLM else 0
    nvswitch = all(x.nvlink and compute_at_least(x, 9, 0) for x in gpus)
    nt = non_torch_bytes(tp, pp, nvswitch)
    graph = cuda_graph_bytes(g, tp, d.max_num_seqs if sglang else min(seqs * 2, 512))
    ctx_len = s.context
    refusal = parallel_problem(g, tp, pp, name)
    kind = "layout" if refusal else None
    if refusal is None and ctx_len > g.context_length:
        kind = "context"
        refusal = (
            f"User-specified max_model_len ({ctx_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={g.context_length})."
        )
    budgets: list[GpuBudget] = []
    pools: list[tuple[Pool, int]] = []  # each rank's pool and the KV bytes it had
    hybrid = sliding_layers(g, s) if engine is Backend.VLLM else ()
    start = 0
    for stage, n_layers in enumerate(stages):
        layers = range(start, start + n_layers)
        start += n_layers
        per_token = kv_bytes_per_token(g, layers, tp, kv_b)
        last = stage == pp - 1
        act = activation_peak(g, tp, batched, seqs if last else 0)
        weights = max(per_stage[stage] - offload, 0)
        for gpu_index in gpu_ids[stage * tp : (stage + 1) * tp]:
            gpu = rig.gpus[gpu_index]
            total = gpu.memory_total_bytes or 0
            free = (gpu.memory_free_bytes if gpu.memory_free_bytes is not None else total) - (
                CUDA_CONTEXT_BYTES
            )
            if engine is Backend.SGLANG:
                # rest = free after loading - free before loading x (1 - fraction); what
                # loading takes is the weights and the process's workspaces
                claim = int(free * util)
                kv = claim - weights - nt
            else:
                claim = int(total * util)
                kv = claim - weights - act - nt
                if refusal is None and free < claim:
                    kind = "memory"
                    refusal = (
                        f"Free memory on device ({free / GIB:.2f}/{total / GIB:.2f} GiB) on "
                        f"startup is less than desired GPU memory utilization ({util}, "
                        f"{claim / GIB:.2f} GiB). Decrease GPU memory utilization or reduce "
                        "GPU memory used by other processes."
                    )
            if sglang:
                pool = sglang_pool(kv, per_token, ctx_len)
            elif hybrid and g.sliding_window:
                n_sliding = sum(1 for il in layers if il in hybrid)
                attn = sum(1 for il in layers if g.kv_heads(il) or g.is_mla)
                pool = vllm_hybrid_pool(
                    kv, per_token // max(attn, 1), attn - n_sliding, n_sliding,
                    g.sliding_window, batched, ctx_len, g.context_length,
                )  # fmt: skip
            else:
                pool = vllm_pool(kv, per_token, ctx_len)
            pools.append((pool, kv))
            budgets.append(
                GpuBudget(
                    device=f"gpu:{gpu_index}",
                    name=gpu.name,
                    host=gpu.host,
                    total_bytes=total,
                    budget_bytes=claim,
                    weights_bytes=weights,
                    activation_bytes=act,
                    cuda_graph_bytes=graph,
                    non_torch_bytes=nt,
                    kv_cache_bytes=max(kv, 0),
                    kv_needed_bytes=pool.needed_bytes,
                    layers=n_layers,
                )
            )
    worst, worst_kv = min(pools, key=lambda x: x[0].blocks)
    n_blocks = worst.blocks
    tokens = worst.tokens
    largest = min(worst.largest_max_model_len, g.context_length)
    if refusal is None and offload and offload * len(gpus) > rig.ram_usable_bytes:
        kind = "ram"
        refusal = (
            f"--cpu-offload-gb {s.cpu_offload_gb:g} keeps {_gib(offload * len(gpus))} of "
            f"weights in RAM; {_gib(rig.ram_usable_bytes)} is usable"
        )
    if refusal is None and n_blocks <= 0:
        kind = "memory"
        refusal = (
            "No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine."
            if engine is Backend.VLLM
            else "Not enough memory. Please try to increase --mem-fraction-static."
        )
    starts = refusal is None
    if refusal is None and worst.needed_bytes > max(worst_kv, 0):
        kind = "pool"
        if engine is Backend.VLLM:
            starts = False
            refusal = (
                f"To serve at least one request with the models's max seq len ({ctx_len}), "
                f"({_gib(worst.needed_bytes)} KV cache is needed, which is larger than the "
                f"available KV cache memory ({_gib(max(worst_kv, 0))}). Based on the "
                f"available memory, the estimated maximum model length is {largest}. Try "
                "increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                "initializing the engine."
            )
        else:
            # SGLang starts, then rejects each request longer than the pool
            refusal = (
                f"Input length ({ctx_len} tokens) exceeds the maximum allowed length "
                f"({max(tokens - 6, 0)} tokens). Use a shorter input or enable "
                "--allow-auto-truncate. (SGLang starts with a pool of "
                f"{tokens} tokens and rejects every request this long.)"
            )
    concurrency = worst.max_concurrency
    if sglang and s.max_num_seqs is None:
        # max_running_requests = min(pool // 2, request slots), the slots
        # min(max(pool / context_len x 512, 2048), 4096) (managers/tp_worker.py)
        slots = min(max(int(tokens / max(ctx_len, 1) * 512), 2048), 4096)
        seqs = max(min(tokens // 2, slots), 1)
    fits = refusal is None
    notes: list[str] = []
    if engine is Backend.VLLM and fits:
        spare = min(
            (b.total_bytes - b.budget_bytes - CUDA_CONTEXT_BYTES - b.cuda_graph_bytes)
            for b in budgets
        )
        if spare < 0:
            notes.append(
                f"CUDA-graph capture needs {_gib(graph)} outside the {util:.2f} claim and "
                "may run out of memory: lower --gpu-memory-utilization or add --enforce-eager"
            )
        # vLLM 0.21 and later count their CUDA-graph estimate inside the claim
        # (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, on by default since then)
        fewer = graph * tokens // max(worst_kv, 1)
        if fewer:
            notes.append(
                f"these are vLLM 0.9–0.11's figures; 0.21 and later also keep their CUDA-graph "
                f"estimate (~{_gib(graph)} a GPU) inside the claim: about {fewer:,} tokens "
                "less pool"
            )
    hopper = all(compute_at_least(x, 9, 0) and not compute_at_least(x, 10, 0) for x in gpus)
    if engine is Backend.VLLM and fmt == "MXFP4" and hopper:
        saved = mxfp4_triton_saving(g, tp) // pp
        notes.append(
            f"MXFP4 experts are planned in Marlin's padded layout; vLLM with triton_kernels "
            f"(its Docker images) takes the Triton backend on Hopper and loads ~{_gib(saved)} "
            "less a GPU, which goes to the KV pool"
        )
    if offload:
        notes.append(
            f"--cpu-offload-gb {s.cpu_offload_gb:g}: {_gib(offload)} of each GPU's weights "
            "stay in RAM and cross PCIe on every step"
        )
    # the curve runs to the batch the engine takes or the pool holds at the decode depth;
    # the pool's limit for full-length requests (max_concurrency) is drawn over it
    depth = max(min(s.prompt_tokens, ctx_len), 1)
    top_users = max(min(seqs, tokens // depth), 1)
    curve, basis = (
        concurrency_curve(
            g, rig, s, gpus, tp, pp, stages, w, fmt, top_users, speed, offload, users_at
        )
        if starts and tokens > 0  # SGLang serves shorter requests when long ones are refused
        else ((), "unknown: the engine does not start")
    )
    return ServingPlan(
        engine=engine.value,
        format=fmt,
        tensor_parallel=tp,
        pipeline_parallel=pp,
        memory_utilization=util,
        max_num_seqs=seqs,
        max_num_batched_tokens=batched,
        block_size=1 if sglang else BLOCK_SIZE,
        weights_bytes=max(b.weights_bytes for b in budgets),
        activation_bytes=max(b.activation_bytes for b in budgets),
        cuda_graph_bytes=graph,
        non_torch_bytes=nt,
        kv_cache_bytes=sum(max(b.kv_cache_bytes, 0) for b in budgets),
        kv_cache_tokens=tokens,
        max_model_len=ctx_len,
        max_concurrency=round(concurrency, 2),
        largest_max_model_len=largest,
        fits=fits,
        starts=starts,
        refusal=refusal,
        refusal_kind=kind,
        cpu_offload_bytes=offload * len(gpus),
        gpus=tuple(budgets),
        concurrency=curve,
        speed_basis=basis,
        notes=tuple(notes),
    )
