"""One plan: every path, the recommended placement with its per-device loads, and the
KV-precision comparison. The single entry point the GUI, the CLI and reports share."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product
from typing import Any

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.launch import ClusterLaunch, rpc_launch, serving_launch
from rigspark_gui.core.memory import repack_for, weights_layout
from rigspark_gui.core.model import KvCacheType, ModelSpec, require_quant
from rigspark_gui.core.placement import DeviceLoad, FitContext, FitEvaluator, Placement
from rigspark_gui.core.plan.path_fit import measure_path, path_slots
from rigspark_gui.core.plan.path_plans import choose_recommended, plan_path, recommended_placement
from rigspark_gui.core.plan.paths import (
    PLAN_SCHEMA_VERSION,
    PathCandidate,
    PathName,
    PathPlan,
    candidate_paths,
    engine_paths,
)
from rigspark_gui.core.plan.serving_paths import serving_loads, serving_paths
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.serving import ServingPlan, kv_bytes_per_token
from rigspark_gui.core.settings import KV_PAD, PlanSettings
from rigspark_gui.core.speed import SpeedModel

LLAMA_KV_TYPES = tuple(k for k in KvCacheType if k.llama_cpp)
COMMON_KV_PAIRS: tuple[tuple[KvCacheType, KvCacheType], ...] = (
    *((k, k) for k in LLAMA_KV_TYPES),
    (KvCacheType.F16, KvCacheType.Q8_0),
    (KvCacheType.Q8_0, KvCacheType.Q4_0),
    (KvCacheType.F16, KvCacheType.Q4_0),
)
VLLM_KV_PAIRS = ((KvCacheType.F16, KvCacheType.F16), (KvCacheType.FP8, KvCacheType.FP8))


@dataclass(frozen=True, slots=True, kw_only=True)
class KvPathLimit:
    path: PathName
    quant: str | None
    # largest context that fits (0: none), step 256
    max_context: int


@dataclass(frozen=True, slots=True, kw_only=True)
class KvComparisonRow:
    kv_k: KvCacheType
    kv_v: KvCacheType
    # flash attention this pair needs or uses
    flash_attn: bool
    bytes_per_token: int
    # KV cache at the plan's context
    kv_bytes: int
    limits: tuple[KvPathLimit, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    schema_version: int = PLAN_SCHEMA_VERSION
    model_id: str
    model_name: str
    rig_name: str
    unified_memory: bool
    settings: PlanSettings
    paths: tuple[PathPlan, ...]
    recommended: PathName | None
    # the recommended (or nearest) path's
    placement: Placement | None
    device_loads: tuple[DeviceLoad, ...]
    kv_comparison: tuple[KvComparisonRow, ...] = ()
    notes: tuple[str, ...] = ()
    # vLLM/SGLang: the recommended (or shown) path's figures
    serving: ServingPlan | None = None
    # a script per host in start order: serving engines and multi-host paths
    launch: ClusterLaunch | None = None


def _validate(spec: ModelSpec, s: PlanSettings) -> None:
    if s.quant is not None:
        require_quant(spec, s.quant)
    if s.kv_v.quantized and not s.flash_attn and s.backend.ggml_based:
        raise InvalidSettingsError(
            f"a quantized V cache ({s.kv_v.value}) needs flash attention: turn it on"
        )


def plan(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    *,
    kv_pairs: str = "none",
    ladders: bool = True,
) -> Plan:
    """Plan every path. kv_pairs: "none", "common" or "all" for the KV comparison.
    `ladders`: list every quantization that fits on each path (two dozen trials a path);
    without, each path stops at its choice, several times faster."""
    if s.backend.serving:
        return _serving_plan(spec, rig, s, speed, kv_pairs != "none", ladders)
    _validate(spec, s)
    cpu_only = bool(spec.cpu_only_quants) and set(spec.available_quants) <= set(
        spec.cpu_only_quants
    )
    ctx = FitContext(spec.geometry, rig, s)
    cands = engine_paths(candidate_paths(rig, cpu_only), rig, s.backend)
    results = [plan_path(spec, rig, s, speed, c, ctx, full_ladder=ladders) for c in cands]
    paths = tuple(r[0] for r in results)
    recommended = choose_recommended(paths, spec, s.min_tok_s)
    shown = recommended or paths[0]
    placement, loads = recommended_placement(spec, rig, s, shown)
    notes: list[str] = list(rig.notes)
    g = spec.geometry
    if s.context > g.context_length:
        notes.append(f"context {s.context} exceeds the model's trained context {g.context_length}")
    if s.prompt_tokens > s.context:
        notes.append(
            f"the prompt ({s.prompt_tokens} tokens) is longer than the context ({s.context}): "
            "llama.cpp would cut it; prefill and decode are estimated at the context's end"
        )
    if not rig.gpus:
        notes.append("no GPU in this rig: only the CPU path is planned")
    comparison: tuple[KvComparisonRow, ...] = ()
    if kv_pairs != "none":
        comparison = kv_comparison(spec, rig, s, paths, all_pairs=kv_pairs == "all")
    launch = None
    if shown.path is PathName.MULTI_HOST:
        notes.append(
            f"over {rig.link.label} each run of layers on another host adds a network round "
            "trip per token (llama.cpp with RPC graph reuse, #15405); older builds sent the "
            "whole graph every token, 8 ms per token on 1 GbE in llama.cpp #6829"
        )
        launch = rpc_launch(
            placement, spec, shown.quant or spec.available_quants[-1], s, rig, loads
        )
    return _record(
        spec, rig, s, paths, recommended,
        placement=placement, device_loads=loads, kv_comparison=comparison,
        notes=tuple(notes), launch=launch,
    )  # fmt: skip


def _record(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    paths: tuple[PathPlan, ...],
    recommended: PathPlan | None,
    **rest: Any,
) -> Plan:
    """A Plan with the fields every engine's plan shares filled in."""
    return Plan(
        model_id=spec.id,
        model_name=spec.name,
        rig_name=rig.name,
        unified_memory=rig.unified_memory,
        settings=s,
        paths=paths,
        recommended=recommended.path if recommended else None,
        **rest,
    )


def _serving_plan(
    spec: ModelSpec, rig: Rig, s: PlanSettings, speed: SpeedModel, compare_kv: bool, ladders: bool
) -> Plan:
    """vLLM and SGLang: every weight on the GPUs, the engine's claim and its KV pool. No
    layer placement to edit (tensor parallelism shards every layer)."""
    paths = serving_paths(spec, rig, s, speed, ladders=ladders)
    recommended = choose_recommended(paths, spec, s.min_tok_s)
    shown = recommended or paths[0]
    return _record(
        spec,
        rig,
        s,
        paths,
        recommended,
        placement=None,
        device_loads=serving_loads(shown),
        kv_comparison=_serving_kv_rows(spec, rig, s, paths) if compare_kv else (),
        notes=rig.notes,  # the engine's own notes are in `serving`
        serving=shown.serving,
        launch=serving_launch(
            shown.serving, spec, s, rig, [int(d.split(":")[1]) for d in shown.devices]
        )
        if shown.serving is not None
        else None,
    )


def max_context(spec: ModelSpec, rig: Rig, s: PlanSettings, cand: PathCandidate, quant: str) -> int:
    """Largest context (a multiple of 256, up to the trained context) that fits."""
    g = spec.geometry
    layout = weights_layout(spec, quant)
    repack = repack_for(spec, quant, rig.cpu.features)

    def fits(units: int) -> bool:
        ev = FitEvaluator(g, layout, rig, replace(s, context=units * KV_PAD), repack)
        return measure_path(path_slots(ev, cand)[3], cand).fits

    top = g.context_length // KV_PAD
    if top == 0:
        return 0
    if fits(top):
        return top * KV_PAD
    lo, hi = 0, top - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo * KV_PAD


def kv_comparison(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    paths: tuple[PathPlan, ...],
    *,
    all_pairs: bool = False,
) -> tuple[KvComparisonRow, ...]:
    if s.backend.serving:
        return _serving_kv_rows(spec, rig, s, paths)
    if all_pairs:
        pairs: tuple[tuple[KvCacheType, KvCacheType], ...] = tuple(
            product(LLAMA_KV_TYPES, LLAMA_KV_TYPES)
        )
    else:
        pairs = COMMON_KV_PAIRS
    cpu_only = not any(p.path is not PathName.CPU for p in paths)
    cands = {c.name: c for c in candidate_paths(rig, cpu_only)}
    rows = []
    g = spec.geometry
    for k, v in pairs:
        fa = s.flash_attn or (v.quantized and s.backend.ggml_based)
        s2 = replace(s, kv_k=k, kv_v=v, flash_attn=fa)
        try:
            ctx = FitContext(g, rig, s2)
        except InvalidSettingsError:
            continue  # rows not a multiple of the block (rare head sizes)
        limits = []
        for p in paths:
            quant = p.quant or spec.available_quants[-1]
            limits.append(
                KvPathLimit(
                    path=p.path,
                    quant=quant,
                    max_context=max_context(spec, rig, s2, cands[p.path], quant),
                )
            )
        rows.append(
            KvComparisonRow(
                kv_k=k,
                kv_v=v,
                flash_attn=fa,
                bytes_per_token=ctx.tables.full_rows[-1] + ctx.tables.swa_rows[-1],
                kv_bytes=ctx.kv_total,
                limits=tuple(limits),
            )
        )
    return tuple(rows)


def _serving_kv_rows(
    spec: ModelSpec, rig: Rig, s: PlanSettings, paths: tuple[PathPlan, ...]
) -> tuple[KvComparisonRow, ...]:
    """vLLM and SGLang: the model's own dtype ("auto") against fp8, each path's longest
    max_model_len from the engine's pool."""
    g = spec.geometry
    rows = []
    for k, v in VLLM_KV_PAIRS:
        s2 = replace(s, kv_k=k, kv_v=v)
        per_path = {p.path: p for p in serving_paths(spec, rig, s2, None, ladders=False)}
        per_token = kv_bytes_per_token(g, range(g.n_layer), 1, 1 if k is KvCacheType.FP8 else 2)
        limits = tuple(
            KvPathLimit(
                path=p.path,
                quant=per_path[p.path].quant,
                max_context=per_path[p.path].serving.largest_max_model_len  # type: ignore[union-attr]
                if p.path in per_path and per_path[p.path].serving is not None
                else 0,
            )
            for p in paths
        )
        rows.append(
            KvComparisonRow(
                kv_k=k,
                kv_v=v,
                flash_attn=s.flash_attn,
                bytes_per_token=per_token,
                kv_bytes=per_token * s.context,
                limits=limits,
            )
        )
    return tuple(rows)
