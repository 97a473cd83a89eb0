"""The paths a serving engine (vLLM, SGLang) offers, as plans like every other path.

`gpu` is one GPU (TP 1); `multi-gpu` this machine's peers, tensor parallel where the
attention heads divide, else pipeline stages; `multi-host` every host's GPUs, tensor
parallel inside a host and one pipeline stage per host (vLLM's advice for multi-node).
An engine that keeps no layer on the CPU has no `cpu-offload` or `cpu` path;
`--cpu-offload-gb` is modelled on every path instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.memory import param_count
from rigspark_gui.core.model import Geometry, ModelSpec
from rigspark_gui.core.placement import DeviceLoad, Verdict
from rigspark_gui.core.plan.paths import (
    MemoryBreakdown,
    PathCandidate,
    PathName,
    PathPlan,
    QuantOption,
    Reason,
    candidate_paths,
    gpu_served,
)
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.serving import (
    AUTO_FORMATS,
    FORMATS,
    ServingPlan,
    checkpoint_bytes,
    parallel_problem,
    size_serving,
    tp_fits_heads,
)
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import Prefill, SpeedModel, Throughput, device_class

SERVING_PATHS = (PathName.GPU, PathName.MULTI_GPU, PathName.MULTI_HOST)


def serving_format(spec: ModelSpec, s: PlanSettings) -> tuple[str, ...]:
    """Checkpoint formats to try, best first: the one asked for, else Auto's list."""
    if s.quant is None:
        # a native checkpoint is what the engine loads; else the best that fits
        return (spec.checkpoint.format,) if spec.checkpoint is not None else AUTO_FORMATS
    q = s.quant.upper()
    if q in ("F16", "FP16", "BF16"):
        return ("BF16",)
    if q in FORMATS and FORMATS[q].experts_only and not spec.geometry.is_moe:
        raise InvalidSettingsError(f"{q} quantizes routed experts; {spec.name} has none")
    if q not in FORMATS:
        names = ", ".join(FORMATS)
        raise InvalidSettingsError(
            f"{s.backend.label} loads Hugging Face checkpoints, not GGUF {s.quant}: "
            f"choose a checkpoint format ({names})"
        )
    return (q,)


def _scale(spec: ModelSpec, fmt: str) -> float:
    """A read checkpoint's real bytes over the geometry's estimate for its format (the
    rotary table is not in the file)."""
    ck = spec.checkpoint
    if ck is None or ck.total_bytes is None or ck.format != fmt:
        return 1.0
    estimate = checkpoint_bytes(spec.geometry, fmt, with_rope=False)
    return ck.total_bytes / estimate if estimate else 1.0


def _best_tp(g: Geometry, k: int) -> int:
    """The widest tensor parallelism over `k` GPUs that splits the heads evenly."""
    return max(d for d in range(1, k + 1) if k % d == 0 and tp_fits_heads(g, d))


def _layout(
    spec: ModelSpec, rig: Rig, s: PlanSettings, cand: PathCandidate
) -> tuple[list[int], int, int]:
    """GPUs in rank order and (tp, pp) of a path. Unset, TP is the widest that splits the
    heads (per host on `multi-host`, one pipeline stage per host: vLLM's advice); a size
    the user gives is kept and the other follows from the GPUs there are."""
    g = spec.geometry
    ids = list(cand.gpu_ids)
    if cand.name is PathName.GPU:
        return ids, 1, 1
    if cand.name is PathName.MULTI_HOST:
        by_host: dict[str, list[int]] = {}
        for i in ids:
            by_host.setdefault(rig.gpus[i].host, []).append(i)
        # this machine first: it runs the Ray head (or SGLang's node 0) and stage 0
        hosts = [h for h in rig.host_names if h in by_host]
        if s.tensor_parallel is None and s.pipeline_parallel is None:
            per_host = min(len(v) for v in by_host.values())
            tp = _best_tp(g, per_host)
            return [i for h in hosts for i in by_host[h][:tp]], tp, len(hosts)
        ids = [i for h in hosts for i in by_host[h]]
    k = len(ids)
    if s.tensor_parallel or s.pipeline_parallel:
        tp = s.tensor_parallel or max(k // (s.pipeline_parallel or 1), 1)
        pp = s.pipeline_parallel or max(k // tp, 1)
        return ids[: tp * pp], tp, pp
    tp = _best_tp(g, k)
    return ids, tp, k // tp


def _candidates(rig: Rig, s: PlanSettings) -> list[PathCandidate]:
    cands = [
        c for c in candidate_paths(rig, False) if c.name in SERVING_PATHS and gpu_served(rig, c)
    ]
    if not cands:
        raise InvalidSettingsError(
            f"{s.backend.label} runs on GPUs and this rig has none it can use: choose "
            "llama.cpp to plan the CPU"
        )
    if s.tensor_parallel == 1 and s.pipeline_parallel in (None, 1):
        return [c for c in cands if c.name is PathName.GPU] or cands[:1]
    if s.tensor_parallel is not None or s.pipeline_parallel is not None:
        # an explicit layout: the paths of more than one GPU
        cands = [c for c in cands if c.name is not PathName.GPU]
        wanted = (s.tensor_parallel or 1) * (s.pipeline_parallel or 1)
        if not any(len(c.gpu_ids) >= wanted for c in cands):
            raise InvalidSettingsError(
                f"--tensor-parallel × --pipeline-parallel asks for {wanted} GPUs; this rig "
                f"has {len(rig.discrete_gpus)}"
            )
    return cands


def _throughput(sp: ServingPlan, speed: SpeedModel | None, ids: Sequence[int]) -> Throughput:
    if not sp.fits or not sp.concurrency:
        return Throughput(basis="unknown: does not fit")
    one = sp.concurrency[0].per_user_tok_s
    band = speed.decode.band if speed is not None and speed.decode is not None else None
    low = one * band.low if band is not None else None
    high = one * band.high if band is not None else None
    return Throughput(
        tok_s=one,
        low_tok_s=low,
        high_tok_s=high,
        known=True,
        basis=sp.speed_basis,
        limiting_device=f"gpu:{ids[0]}",
        depth=None,
    )


def _prefill(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    ids: Sequence[int],
    tp: int,
    speed: SpeedModel | None,
) -> Prefill:
    prompt = min(s.prompt_tokens, s.context)
    if speed is None or speed.prefill is None:
        return Prefill(prompt_tokens=prompt, basis="unknown: no speed calibration loaded")
    flops = 0.0
    for i in ids[:tp]:  # one stage's GPUs: pipeline stages take a prompt in turn
        gpu = rig.gpus[i]
        eff = speed.prefill.efficiency.get(device_class(gpu))
        if gpu.fp16_tflops is None or eff is None:
            return Prefill(prompt_tokens=prompt, basis=f"unknown: {gpu.name}'s FLOPS")
        flops += gpu.fp16_tflops * 1e12 * eff
    active = param_count(spec).active
    seconds = 2 * active * prompt / flops
    band = speed.prefill.band
    return Prefill(
        prompt_tokens=prompt,
        seconds=seconds,
        low_seconds=seconds / band.high,
        high_seconds=seconds / band.low,
        known=True,
        basis="estimate: FP16 FLOPS × llama.cpp's calibrated share, over one stage's GPUs",
    )


def plan_serving_path(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel | None,
    cand: PathCandidate,
    layout: tuple[list[int], int, int],
    *,
    full_ladder: bool = True,
) -> PathPlan:
    """One path at the best format that fits (`layout`: its GPUs, TP and PP).
    `full_ladder` keeps sizing the other formats to list every one that fits."""
    g = spec.geometry
    ids, tp, pp = layout
    formats = serving_format(spec, s)
    tried: list[ServingPlan] = []
    chosen: ServingPlan | None = None
    for fmt in formats:
        sp = size_serving(g, rig, s, ids, tp, pp, fmt, speed, _scale(spec, fmt))
        tried.append(sp)
        if sp.fits and chosen is None:
            chosen = sp
            if not full_ladder:
                break
    fitting = [sp for sp in tried if sp.fits]
    shown = chosen or tried[-1]
    weights = sum(b.weights_bytes for b in shown.gpus)
    kv_need = sum(b.kv_needed_bytes for b in shown.gpus)
    act = sum(b.activation_bytes for b in shown.gpus)
    nt = sum(b.non_torch_bytes for b in shown.gpus)
    usable = sum(b.budget_bytes for b in shown.gpus)
    # vLLM's claim holds the activation peak too; SGLang's fraction the weights, its
    # workspaces and the pool (activations live in the rest)
    required = weights + kv_need + nt + (act if shown.engine == "vllm" else 0)
    reason: Reason | None = None
    shortfall: int | None = None
    kind = shown.refusal_kind
    if kind == "context" or s.context > g.context_length:
        reason = Reason.CONTEXT
    elif kind == "layout":
        reason = Reason.LAYOUT
    elif kind == "ram":
        reason = Reason.RAM
    elif chosen is None:
        reason = Reason.VRAM
        shortfall = max(required - usable, 0) or None
    ladder = tuple(
        QuantOption(
            quant=sp.format,
            required_bytes=sum(
                b.weights_bytes + b.activation_bytes + b.non_torch_bytes for b in sp.gpus
            ),
            tok_s=sp.concurrency[0].per_user_tok_s if sp.concurrency else None,
            quality=None,
        )
        for sp in fitting
    )
    choice = ""
    if chosen is not None and chosen.format != formats[0]:
        choice = f"{formats[0]} does not leave room for one {s.context}-token request"
    return PathPlan(
        path=cand.name,
        fits=chosen is not None,
        quant=shown.format,
        required_bytes=required,
        usable_bytes=usable,
        shortfall_bytes=shortfall,
        reason=reason,
        gpu_count=len(ids),
        devices=tuple(f"gpu:{i}" for i in ids),
        ngl=None,
        breakdown=MemoryBreakdown(
            weights_bytes=weights, kv_bytes=kv_need, compute_bytes=act, reserve_bytes=nt
        ),
        throughput=_throughput(shown, speed, ids),
        prefill=_prefill(spec, rig, s, ids, shown.tensor_parallel, speed)
        if chosen is not None
        else Prefill(prompt_tokens=min(s.prompt_tokens, s.context), basis="unknown: does not fit"),
        file_bytes=(
            spec.checkpoint.total_bytes
            if spec.checkpoint is not None
            and spec.checkpoint.total_bytes
            and spec.checkpoint.format == shown.format
            else checkpoint_bytes(g, shown.format, with_rope=False)
        ),
        ladder=ladder,
        choice=choice,
        serving=shown,
    )


def serving_paths(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel | None,
    *,
    ladders: bool = True,
) -> tuple[PathPlan, ...]:
    """Every path the engine runs here. `ladders`: list every format that fits on each
    (without, each path stops at its choice, as llama.cpp's paths do)."""
    g = spec.geometry
    out = []
    for cand in _candidates(rig, s):
        ids, tp, pp = _layout(spec, rig, s, cand)
        if len(ids) < tp * pp:
            continue  # an explicit layout larger than this path
        problem = parallel_problem(g, tp, pp, s.backend.label)
        if s.tensor_parallel is not None and problem is not None:
            raise InvalidSettingsError(problem)
        out.append(plan_serving_path(spec, rig, s, speed, cand, (ids, tp, pp), full_ladder=ladders))
    if not out:
        raise InvalidSettingsError("no path of this rig has the GPUs this layout asks for")
    return tuple(out)


def serving_loads(path: PathPlan) -> tuple[DeviceLoad, ...]:
    """Each GPU as the engine divides it, in the bars every surface draws."""
    sp = path.serving
    if sp is None:
        return ()
    out = []
    for b in sp.gpus:
        compute = b.activation_bytes + b.cuda_graph_bytes
        total = b.weights_bytes + b.kv_cache_bytes + compute + b.non_torch_bytes
        reserve = b.non_torch_bytes
        verdict = Verdict.FITS if sp.fits else Verdict.OVER
        out.append(
            DeviceLoad(
                device=b.device,
                name=b.name if not b.host else f"{b.name} ({b.host})",
                units=(),
                weights_bytes=b.weights_bytes,
                kv_bytes=b.kv_cache_bytes,
                compute_bytes=compute,
                reserve_bytes=reserve,
                total_bytes=total,
                capacity_bytes=b.total_bytes,
                verdict=verdict,
            )
        )
    return tuple(out)
