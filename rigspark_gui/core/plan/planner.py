"""One plan: every path, the recommended placement with its per-device loads, and the
KV-precision comparison. The single entry point the GUI, the CLI and reports share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import product
from typing import Any

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.fit import FitOutcome
from rigspark_gui.core.flash_attn import FaSupport, FaWhere, rig_support
from rigspark_gui.core.launch import (
    ClusterLaunch,
    ollama_ps_processor,
    rpc_launch,
    serving_launch,
)
from rigspark_gui.core.memory import ProjectorLoad, compute_note, state_total_bytes
from rigspark_gui.core.model import Geometry, KvCacheType, ModelSpec, require_quant
from rigspark_gui.core.placement import DeviceLoad, FitContext, Placement
from rigspark_gui.core.plan.beside import claim, fit_beside, loads_beside
from rigspark_gui.core.plan.defaults import Resolved, resolve_defaults
from rigspark_gui.core.plan.draft import DraftLoad, plan_draft
from rigspark_gui.core.plan.engine_run import fit_sentence, settle
from rigspark_gui.core.plan.path_drafts import (
    draft_held as _draft_held,
)
from rigspark_gui.core.plan.path_drafts import (
    path_drafts,
    paths_with_drafts,
)
from rigspark_gui.core.plan.path_drafts import (
    quant_of as _quant_of,
)
from rigspark_gui.core.plan.path_fit import max_context
from rigspark_gui.core.plan.path_plans import choose_recommended, plan_path, recommended_placement
from rigspark_gui.core.plan.paths import (
    PLAN_SCHEMA_VERSION,
    PathName,
    PathPlan,
    candidate_paths,
    model_paths,
)
from rigspark_gui.core.plan.projector import (
    claimed_rig,
    path_projectors,
    placement_gpus,
    plan_projector,
    projector_settings,
    with_projector,
    with_projector_fit,
    with_projector_paths,
)
from rigspark_gui.core.plan.serving_paths import serving_loads, serving_paths
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.serving import ServingPlan, kv_bytes_per_token
from rigspark_gui.core.settings import Backend, PlanSettings
from rigspark_gui.core.speed import SpeedModel

LLAMA_KV_TYPES = tuple(k for k in KvCacheType if k.llama_cpp)
# The pairs worth comparing, most useful first: the default, the two quantized caches
# every engine offers (Ollama and koboldcpp have only these three, and a default CUDA
# build of llama.cpp has flash-attention kernels for them), K kept finer than V (K is
# the more sensitive to quantization), then the other same-type caches. f32 stores
# twice f16's bytes for no measurable gain: it comes last, among all pairs only.
COMMON_KV_PAIRS: tuple[tuple[KvCacheType, KvCacheType], ...] = (
    (KvCacheType.F16, KvCacheType.F16),
    (KvCacheType.Q8_0, KvCacheType.Q8_0),
    (KvCacheType.Q4_0, KvCacheType.Q4_0),
    (KvCacheType.F16, KvCacheType.Q8_0),
    (KvCacheType.Q8_0, KvCacheType.Q4_0),
    (KvCacheType.F16, KvCacheType.Q4_0),
    (KvCacheType.BF16, KvCacheType.BF16),
    (KvCacheType.Q5_1, KvCacheType.Q5_1),
    (KvCacheType.Q5_0, KvCacheType.Q5_0),
    (KvCacheType.Q4_1, KvCacheType.Q4_1),
    (KvCacheType.IQ4_NL, KvCacheType.IQ4_NL),
)
VLLM_KV_PAIRS = ((KvCacheType.F16, KvCacheType.F16), (KvCacheType.FP8, KvCacheType.FP8))


def kv_pair_order(
    pairs: tuple[tuple[KvCacheType, KvCacheType], ...],
) -> tuple[tuple[KvCacheType, KvCacheType], ...]:
    """`pairs` most useful first: the common pairs in their order, then the rest, f32
    last."""
    rank = {pair: i for i, pair in enumerate(COMMON_KV_PAIRS)}

    def key(pair: tuple[KvCacheType, KvCacheType]) -> tuple[int, int, int]:
        f32 = KvCacheType.F32 in pair
        return (f32, rank.get(pair, len(rank)), pairs.index(pair))

    return tuple(sorted(pairs, key=key))


@dataclass(frozen=True, slots=True, kw_only=True)
class KvPathLimit:
    path: PathName
    # the quantization the path is held to: one for every path of a comparison (the
    # plan's recommended one), so the paths compare like for like
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
    # KL divergence against an f16 cache, measured on a reference model (None: not
    # measured, or no measurements given)
    kv_kld: float | None = None
    # what is known of its speed on this rig and engine ('' when nothing is): why its
    # flash attention is not a kernel of the plan's GPUs' own, naming llama.cpp's rule
    speed_note: str = ""
    # where its flash attention runs on the plan's GPUs (flash_attn.FaWhere): "native",
    # "gpu-f16" (decode converts K and V to f16 first), "cpu" (the GPU refuses the op),
    # "fails"; '' where it does not apply (flash attention off, no GPU, not llama.cpp)
    fa_where: str = ""
    # False: a pair to avoid on this rig (its flash attention is not native there)
    advised: bool = True
    # a hybrid model's recurrent state beside kv_bytes: f32, the same for every pair
    state_bytes: int = 0


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
    # what each setting left to the engine became, and the defaults taken
    resolved: Resolved | None = None
    # llama.cpp's fit for the shown quantization (llama.cpp and Ollama plans), and how
    # it compares with this plan in one sentence
    fit: FitOutcome | None = None
    fit_summary: str = ""
    # the vision/audio projector loaded beside the model (None: none, or text only)
    projector: ProjectorLoad | None = None
    # a draft model loaded beside it for speculative decoding (-md)
    draft: DraftLoad | None = None


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
    kv_kld: Mapping[str, float] | None = None,
) -> Plan:
    """Plan every path. kv_pairs: "none", "common" or "all" for the KV comparison, with
    `kv_kld` (measured quality cost per 'k/v' cache pair) when given.
    `ladders`: list every quantization that fits on each path (two dozen trials a path);
    without, each path stops at its choice, several times faster."""
    s, resolved = resolve_defaults(spec, rig, s)
    if s.backend.serving:
        served = _serving_plan(spec, rig, s, speed, kv_pairs != "none", ladders, kv_kld)
        return replace(served, resolved=resolved)
    _validate(spec, s)
    # the projector's memory is set aside on its device before any layer is placed
    projector, own_rig, own_s = plan_projector(spec, rig, s), rig, s
    s, rig = projector_settings(s, projector), claimed_rig(rig, projector)
    # and so is a draft model's (-md): weights, KV and compute on its own devices
    draft = plan_draft(spec, own_rig, s)
    held = draft.on() if draft is not None else {}  # what the planning rig sets aside
    rig = claim(rig, held)

    last: list[tuple[PathName | None, str | None]] = [(None, None)]  # last choice
    path_loads = path_projectors(spec, own_rig, own_s)  # each path's own, fixed per plan

    def own_rigs() -> dict[PathName, Rig]:
        """Paths whose command shows llama-server other GPUs than the plan's projector
        is on (a CPU-only path shows none), or would load the draft elsewhere than the
        plan's own: planned with theirs set aside where they load."""
        out: dict[PathName, Rig] = {}
        drafts = path_drafts(spec, own_rig, s, *last[0])
        for name in {*path_loads, *drafts}:
            load = path_loads.get(name)
            if load is None or projector is None or load.device == projector.device:
                load = projector
            on = drafts.get(name, held)
            if load is not projector or on != held:
                out[name] = claim(claimed_rig(own_rig, load), on)
        return out

    def resolve(kv: str, lad: bool) -> Plan:
        p = _plan_resolved(spec, rig, s, speed, kv, lad, kv_kld, own_rigs())
        shown = next((x for x in p.paths if x.path is p.recommended), None)
        last[0] = (p.recommended, shown.quant if shown is not None else None)
        return p

    # the quantization and path first, without ladders or the KV comparison (they do
    # not change the choice); the full plan once the context is settled
    first = resolve("none", False)
    # llama-server puts the projector on the first GPU its command shows: where the
    # chosen path hides that one, plan again with it there (one truth for plan, loads,
    # command and lanes); twice at most, as moving it can change the path
    for _ in range(2):
        seen = placement_gpus(first.placement, own_rig, own_s)
        moved = plan_projector(spec, own_rig, own_s, seen)
        if moved is None or projector is None or moved.device == projector.device:
            break
        projector = moved
        s = projector_settings(own_s, projector)
        rig = claim(claimed_rig(own_rig, projector), held)
        first = resolve("none", False)

    guessed = True  # `held` is still the first guess

    def follow_draft(current: Plan, full: tuple[str, bool]) -> Plan:
        """The draft as the target's command loads it (its GPUs and split), and the
        target planned with that set aside (see `_draft_held`)."""
        nonlocal draft, held, rig, guessed
        if draft is None or current.placement is None:
            return current
        # the first time, `held` is a guess (every GPU at the default split): try the
        # command's own spread exactly before settling for room enough
        tried: list[dict[str, int]] = [] if guessed else [held]
        guessed = False
        for _ in range(3):
            draft = plan_draft(spec, own_rig, _quant_of(s, current), current.placement)
            assert draft is not None
            on = draft.on()
            if on == held or (tried and all(n <= held.get(d, 0) for d, n in on.items())):
                return current
            tried.append(on)
            held = _draft_held(tried)
            rig = claim(claimed_rig(own_rig, projector), held)
            current = resolve(*full)
        draft = plan_draft(spec, own_rig, _quant_of(s, current), current.placement)
        return current

    first = follow_draft(first, ("none", False))
    shown = next((p for p in first.paths if p.path is first.recommended), None) or first.paths[0]
    quant = shown.quant or spec.available_quants[-1]
    fit, bigger = settle(spec, rig, s, quant, shown.path, first.recommended is not None)
    if bigger is not None:
        # llama.cpp settles on a larger context for this quantization: plan at it
        s = replace(s, context=bigger)
        if draft is not None and first.placement is not None:
            # the draft runs at the target's context (-c): its KV grows with it
            draft = plan_draft(spec, own_rig, _quant_of(s, first), first.placement)
            held = _draft_held([held, draft.on() if draft is not None else {}])
            rig = claim(claimed_rig(own_rig, projector), held)
    full = kv_pairs != "none" or ladders
    final = resolve(kv_pairs, ladders) if full or s.context != first.settings.context else first
    final = follow_draft(final, (kv_pairs, ladders))
    draft_on = draft.on() if draft is not None else {}
    resolved = replace(resolved, context=s.context)
    summary = ""
    if fit is not None:
        shown = (
            next((p for p in final.paths if p.path is final.recommended), None) or final.paths[0]
        )
        gpu_slots = final.placement.gpu_slots if final.placement is not None else 0
        gpus = sum(1 for d in shown.devices if d != "cpu")
        experts = shown.n_cpu_moe or 0
        summary = fit_sentence(fit, spec.geometry.n_layer, s.context, gpu_slots, gpus, experts)
    if s.backend is Backend.OLLAMA and final.device_loads:
        summary = f"{summary}; `ollama ps` would show {ollama_processor(final)}".lstrip("; ")
    loads = with_projector(final.device_loads, projector, own_rig)
    paths = with_projector_paths(final.paths, projector, path_loads, final.recommended)
    fit = with_projector_fit(fit, projector)
    notes = final.notes
    if projector is not None and not projector.compute_known:
        notes += (
            f"the projector's compute buffer is unknown ({projector.projector_type or 'an'} "
            "encoder without image patches, e.g. audio, is not sized here): only its weights "
            "are counted",
        )
    if draft is not None:
        notes += (f"speculative decoding with {draft.model_name}: {draft.speed_basis}",)
    return replace(
        final,
        resolved=resolved,
        fit=fit_beside(fit, {d: b for d, b in draft_on.items() if d != "cpu"}, margin=False),
        fit_summary=summary,
        device_loads=loads_beside(loads, draft_on, own_rig, "draft_bytes"),
        paths=paths_with_drafts(
            paths,
            draft_on,
            path_drafts(spec, own_rig, s, *last[0], {x.path: x.quant for x in paths}),
            final.recommended,
        ),
        projector=projector,
        draft=draft,
        notes=notes,
    )


def ollama_processor(p: Plan) -> str:
    """The PROCESSOR column `ollama ps` shows for this plan's placement."""
    cpu = sum(d.total_bytes for d in p.device_loads if d.device == "cpu")
    gpu = sum(d.total_bytes for d in p.device_loads if d.device != "cpu")
    all_on = p.placement is not None and all(
        u.device != "cpu" for u in p.placement.units if u.unit != "input"
    )
    return ollama_ps_processor(cpu, gpu, all_layers_on_gpu=all_on)


def _plan_resolved(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    kv_pairs: str,
    ladders: bool,
    kv_kld: Mapping[str, float] | None,
    path_rigs: Mapping[PathName, Rig] | None = None,
) -> Plan:
    """plan() for settings whose engine defaults are resolved. `path_rigs`: paths planned
    on a rig of their own (what loads beside the model sits elsewhere on them)."""
    ctx = FitContext(spec.geometry, rig, s)
    cands = model_paths(spec, rig, s.backend)
    own = path_rigs or {}
    results = [
        plan_path(spec, rig, s, speed, c, ctx, full_ladder=ladders)
        if c.name not in own
        else plan_path(
            spec, own[c.name], s, speed, c, FitContext(spec.geometry, own[c.name], s),
            full_ladder=ladders,
        )
        for c in cands
    ]  # fmt: skip
    paths = tuple(r[0] for r in results)
    recommended = choose_recommended(paths, spec, s.min_tok_s)
    shown = recommended or paths[0]
    cand = next(c for c in cands if c.name is shown.path)
    placement, loads = recommended_placement(spec, own.get(shown.path, rig), s, shown, cand)
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
    unmodelled = compute_note(g.architecture)
    if unmodelled is not None:
        notes.append(unmodelled)
    comparison: tuple[KvComparisonRow, ...] = ()
    if kv_pairs != "none":
        comparison = kv_comparison(
            spec,
            rig,
            s,
            paths,
            all_pairs=kv_pairs == "all",
            recommended=recommended.path if recommended else None,
            kv_kld=kv_kld,
        )
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
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel,
    compare_kv: bool,
    ladders: bool,
    kv_kld: Mapping[str, float] | None,
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
        kv_comparison=_serving_kv_rows(
            spec,
            rig,
            s,
            paths,
            kv_quant(spec, s, paths, recommended.path if recommended else None),
            kv_kld,
        )
        if compare_kv
        else (),
        notes=rig.notes,  # the engine's own notes are in `serving`
        serving=shown.serving,
        launch=serving_launch(
            shown.serving, spec, s, rig, [int(d.split(":")[1]) for d in shown.devices]
        )
        if shown.serving is not None
        else None,
    )


def kv_quant(
    spec: ModelSpec, s: PlanSettings, paths: tuple[PathPlan, ...], recommended: PathName | None
) -> str | None:
    """The one quantization a KV comparison holds every path to: the recommended path's,
    else the one asked for, else the smallest the model has (what could fit at all; a
    serving engine: the checkpoint format its first path tried)."""
    rec = next((p.quant for p in paths if p.path is recommended and p.quant), None)
    if s.backend.serving:
        return rec or s.quant or (paths[0].quant if paths else None)
    return rec or s.quant or spec.available_quants[-1]


def kv_flash_attn(
    k: KvCacheType, v: KvCacheType, rig: Rig, s: PlanSettings, g: Geometry
) -> FaSupport | None:
    """Where K/V pair k, v's flash attention runs on the rig's GPUs (the worst GPU's
    answer), for settings `s` that carry the pair's flash attention; None where that
    does not apply (an engine not built on llama.cpp, flash attention off, no GPU)."""
    if not (s.backend.ggml_based and s.flash_attn and rig.gpus):
        return None
    return rig_support(rig, k, v, g, s.gpu_backend)


def _kld(kv_kld: Mapping[str, float] | None, k: KvCacheType, v: KvCacheType) -> float | None:
    """The measured cost of K/V types k and v; 16/32-bit caches cost nothing."""
    if kv_kld is None:
        return None
    if k in (KvCacheType.F32, KvCacheType.F16) and v in (KvCacheType.F32, KvCacheType.F16):
        return 0.0
    return kv_kld.get(f"{k.value}/{v.value}")


def kv_comparison(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    paths: tuple[PathPlan, ...],
    *,
    all_pairs: bool = False,
    recommended: PathName | None = None,
    kv_kld: Mapping[str, float] | None = None,
) -> tuple[KvComparisonRow, ...]:
    """Each K/V pair the engine runs, most useful first (`all_pairs`: every one, else
    the common ones), with the largest context each path reaches at one quantization
    (`kv_quant`: the recommended path's). `kv_kld`: measured quality cost per 'k/v'."""
    quant = kv_quant(spec, s, paths, recommended)
    if s.backend.serving:
        return _serving_kv_rows(spec, rig, s, paths, quant, kv_kld)
    every = tuple(product(LLAMA_KV_TYPES, LLAMA_KV_TYPES)) if all_pairs else COMMON_KV_PAIRS
    pairs = kv_pair_order(tuple(p for p in every if s.backend.kv_problem(*p) is None))
    cpu_only = not any(p.path is not PathName.CPU for p in paths)
    cands = {c.name: c for c in candidate_paths(rig, cpu_only)}
    rows = []
    g = spec.geometry
    state = state_total_bytes(g, s)  # f32 whatever the cache type
    for k, v in pairs:
        fa = s.flash_attn or (v.quantized and s.backend.ggml_based)
        try:
            s2 = replace(s, kv_k=k, kv_v=v, flash_attn=fa, quant=quant)
            ctx = FitContext(g, rig, s2)
        except InvalidSettingsError:
            continue  # rows not a multiple of the block (rare head sizes)
        limits = tuple(
            KvPathLimit(
                path=p.path,
                quant=quant,
                max_context=max_context(spec, rig, s2, cands[p.path], quant or ""),
            )
            for p in paths
        )
        support = kv_flash_attn(k, v, rig, s2, g)
        rows.append(
            KvComparisonRow(
                kv_k=k,
                kv_v=v,
                flash_attn=fa,
                bytes_per_token=ctx.tables.full_rows[-1] + ctx.tables.swa_rows[-1],
                kv_bytes=ctx.kv_total - state,
                state_bytes=state,
                limits=limits,
                kv_kld=_kld(kv_kld, k, v),
                speed_note=support.reason if support else "",
                fa_where=support.where.value if support else "",
                advised=support is None or support.where is FaWhere.NATIVE,
            )
        )
    return tuple(rows)


def _serving_kv_rows(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    paths: tuple[PathPlan, ...],
    quant: str | None,
    kv_kld: Mapping[str, float] | None,
) -> tuple[KvComparisonRow, ...]:
    """vLLM and SGLang: the model's own dtype ("auto") against fp8, each path's longest
    max_model_len from the engine's pool, every path at checkpoint format `quant`."""
    g = spec.geometry
    rows = []
    for k, v in VLLM_KV_PAIRS:
        s2 = replace(s, kv_k=k, kv_v=v, quant=quant)
        per_path = {p.path: p for p in serving_paths(spec, rig, s2, None, ladders=False)}
        per_token = kv_bytes_per_token(g, range(g.n_layer), 1, 1 if k is KvCacheType.FP8 else 2)
        limits = tuple(
            KvPathLimit(
                path=p.path,
                quant=per_path[p.path].quant if p.path in per_path else quant,
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
                kv_kld=_kld(kv_kld, k, v),
            )
        )
    return tuple(rows)
