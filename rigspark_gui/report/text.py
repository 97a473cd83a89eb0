"""The plain-text plan the CLI prints (and the clipboard gets)."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.placement import HEADROOM, DeviceLoad, Placement, Verdict
from rigspark_gui.core.plan import (
    QUALITY_FLOOR,
    PathName,
    PathPlan,
    Plan,
    RankedModel,
    RankVerdict,
    Suggestion,
)
from rigspark_gui.core.serving import GpuBudget, ServingPlan
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.units import gib, human_bytes, param_text, speed_text, tokens
from rigspark_gui.report.projector_words import draft_sentence, projector_sentence


def path_label(p: PathPlan) -> str:
    if p.path is PathName.GPU:
        return "gpu (1 GPU)"
    if p.path is PathName.MULTI_GPU:
        return f"multi-gpu ({p.gpu_count} GPUs)"
    if p.path is PathName.MULTI_HOST:
        cpus = sum(1 for d in p.devices if d.startswith("rpc-cpu:"))
        if cpus:
            # other hosts' CPUs served with rpc-server count as devices of their own
            gpus = f"{p.gpu_count} GPU{'s' if p.gpu_count != 1 else ''}"
            return f"multi-host ({gpus}, {cpus} host CPU{'s' if cpus != 1 else ''})"
        return f"multi-host ({p.gpu_count} GPUs)"
    return p.path.value


def path_summary(p: PathPlan) -> str:
    if p.fits:
        loss = f" ({p.quality.words})" if p.quality is not None else ""
        text = (
            f"{p.verdict.value} {p.quant}{loss} using {gib(p.required_bytes)} of "
            f"{gib(p.usable_bytes)}"
        )
        if p.path is PathName.CPU_OFFLOAD and p.ngl is not None:
            moe = f" --n-cpu-moe {p.n_cpu_moe}" if p.n_cpu_moe else ""
            text += f" (-ngl {p.ngl}{moe})"
    elif p.shortfall_bytes is not None:
        text = f"does not fit at {p.quant}; needs {gib(p.shortfall_bytes)} more usable memory"
    else:
        text = f"does not fit (limited by {p.reason.words if p.reason else 'unknown'})"
    if p.fits:
        t = p.throughput
        if t.known:
            text += f"; {speed_text(t.tok_s, t.low_tok_s, t.high_tok_s)} estimated"
        else:
            text += f"; speed {p.throughput.basis}"
        if p.reason is not None:
            text += f" ({p.reason.words}: the file is larger than the free disk)"
    return text


def settings_line(s: PlanSettings, unified_memory: bool = False, *, resolved: bool = False) -> str:
    """The settings in a few words. `resolved`: the settings of a plan, whose values left
    to the engine are what they became (else they say "auto")."""
    kv = s.kv_k.value if s.kv_k == s.kv_v else f"K {s.kv_k.value} / V {s.kv_v.value}"
    auto = (lambda name: False) if resolved else s.is_auto
    context = "auto" if auto("context") else tokens(s.context)
    flash = "auto" if auto("flash_attn") else ("on" if s.flash_attn else "off")
    seqs = "auto" if auto("parallel") else str(s.parallel)
    unified = " unified" if s.kv_unified and not auto("parallel") else ""
    return (
        f"{context} context, KV {kv}, flash attention {flash}, {seqs} seq{unified}, "
        f"{s.backend.value}{', unified memory' if unified_memory else ''}"
    )


def engine_lines(plan: Plan) -> list[str]:
    """The engine's own defaults this plan took, and what llama.cpp's fit would set."""
    lines: list[str] = []
    if plan.resolved is not None and plan.resolved.assumed:
        lines.append(f"Engine defaults ({plan.resolved.engine}):")
        lines.extend(f"  {a}" for a in plan.resolved.assumed)
    if plan.fit is not None:
        fit = plan.fit
        told = fit.command or f"gives up: {fit.reason}"
        lines.append(f"As llama.cpp's fit runs it ({fit.status.value}): {told}")
        if plan.fit_summary:
            lines.append(f"  {plan.fit_summary}")
    if lines:
        lines.append("")
    return lines


def auto_rule(s: PlanSettings) -> str:
    """Which rule chose the quantization, in words."""
    if s.quant is not None:
        return f"quantization fixed at {s.quant}"
    if s.min_tok_s > 0:
        return (
            f"Auto: best quality reaching {s.min_tok_s:g} tok/s, else the best trade-off "
            f"no worse than {QUALITY_FLOOR}"
        )
    return "Auto: best quality that fits"


def short_basis(basis: str) -> str:
    """A measurement's basis in one short clause for the screen: what was measured, without
    the sources and caveats (`--json`, the report and the tooltips keep the whole basis)."""
    cut = min((i for i in (basis.find(" ("), basis.find("; ")) if i >= 0), default=len(basis))
    short = basis[:cut].rstrip()
    return short if cut == len(basis) else f"{short}; source in --json"


def format_plan(plan: Plan) -> str:
    words = settings_line(plan.settings, plan.unified_memory, resolved=True)
    lines = [f"Plan for {plan.model_name} ({words})", ""]
    for note in plan.notes:
        lines.append(f"Note: {note}")
    if plan.notes:
        lines.append("")
    lines.extend(engine_lines(plan))
    for p in plan.paths:
        badge = "  <- recommended" if plan.recommended is p.path else ""
        lines.append(f"  {path_label(p):<22} {path_summary(p)}{badge}")
    lines.append("")
    if plan.recommended is not None:
        lines.append(f"Recommended path: {plan.recommended.value} ({auto_rule(plan.settings)})")
        rec = next(p for p in plan.paths if p.path is plan.recommended)
        if rec.choice:
            lines.append(f"  {rec.choice}")
        if rec.cpu_loading is not None:
            lines.append(f"  {rec.cpu_loading.note}")
        if rec.quality is not None:
            lines.append(f"  Quality: {rec.quality.label} ({short_basis(rec.quality.basis)})")
        if len(rec.ladder) > 1:
            rungs = ", ".join(f"{o.quant} {speed_text(o.tok_s)}" for o in rec.ladder)
            lines.append(f"  Fits on this path: {rungs}")
    else:
        lines.append("No path fits this model at this context.")
    if plan.serving is not None:
        lines += ["", format_serving(plan.serving)]
    if plan.device_loads:
        lines += ["", format_loads(plan.device_loads)]
    if plan.projector is not None:
        lines.append("  " + projector_sentence(plan.projector))
    if plan.draft is not None:
        lines.append("  " + draft_sentence(plan.draft))
    if plan.kv_comparison:
        lines += ["", "KV cache precision (memory at this context; largest context per path):"]
        for row in plan.kv_comparison:
            pair = row.kv_k.value if row.kv_k == row.kv_v else f"{row.kv_k.value}/{row.kv_v.value}"
            limits = ", ".join(f"{lim.path.value} {tokens(lim.max_context)}" for lim in row.limits)
            lines.append(f"  {pair:<14} {gib(row.kv_bytes, 2):>10}   {limits}")
        if plan.kv_comparison[0].state_bytes:
            st = human_bytes(plan.kv_comparison[0].state_bytes)
            lines.append(f"  plus {st} of recurrent state: f32 under every cache type")
    if plan.launch is not None:
        lines += ["", "Launch, in order:", plan.launch.text]
        lines += [f"  Note: {n}" for n in plan.launch.notes]
    return "\n".join(lines)


def serving_summary(sp: ServingPlan) -> tuple[str, str, str | None]:
    """(layout, pool, refusal) in words: the lines the engine prints at start-up, one
    wording for the CLI, the report and the Serving tab."""
    engine = "vLLM" if sp.engine == "vllm" else "SGLang"
    knob = "gpu_memory_utilization" if sp.engine == "vllm" else "mem_fraction_static"
    layout = (
        f"{engine}: {sp.format}, tensor parallel {sp.tensor_parallel} × pipeline parallel "
        f"{sp.pipeline_parallel}, {knob} {sp.memory_utilization:g}"
    )
    pool = (
        f"KV pool {sp.kv_cache_tokens:,} tokens ({human_bytes(sp.kv_cache_bytes)}); "
        f"max_model_len {sp.max_model_len:,}: {sp.max_concurrency:.2f}× concurrency; up to "
        f"{sp.max_num_seqs:,} requests batched"
    )
    refusal = None
    if sp.refusal:
        refusal = f"{engine} refuses: {sp.refusal}"
        if sp.refusal_kind == "pool":
            refusal += f" The longest max_model_len it accepts here: {sp.largest_max_model_len:,}."
    return layout, pool, refusal


# Each GPU as the engine divides it: the columns (with what each means) and a row, one
# table for the Serving tab and the report.
SERVING_COLUMNS: tuple[tuple[str, str], ...] = (
    ("GPU", "the GPU (its number in this rig) and its name"),
    ("Host", "the machine it is in"),
    ("Claim", "vLLM: gpu_memory_utilization × total; SGLang: mem_fraction_static × free"),
    ("Weights", "this GPU's shard of the checkpoint"),
    ("Activations", "vLLM's profiled peak (a forward pass and a dummy sampling step)"),
    ("Non-torch", "cuBLAS workspaces and, with several GPUs, NCCL's buffers"),
    ("CUDA graphs", "captured after the pool, outside vLLM's claim"),
    ("KV pool", "what is left of the claim: the paged KV cache"),
    ("Total", "the GPU's memory"),
)


def serving_gpu_row(b: GpuBudget) -> tuple[str, ...]:
    return (
        f"{b.device} {b.name}",
        b.host or "this machine",
        human_bytes(b.budget_bytes),
        human_bytes(b.weights_bytes),
        human_bytes(b.activation_bytes),
        human_bytes(b.non_torch_bytes),
        human_bytes(b.cuda_graph_bytes),
        human_bytes(b.kv_cache_bytes),
        human_bytes(b.total_bytes),
    )


def format_serving(sp: ServingPlan) -> str:
    """The engine's start-up lines and the concurrency table, as the CLI prints them."""
    layout, pool, refusal = serving_summary(sp)
    lines = [
        layout,
        f"  per GPU: weights {human_bytes(sp.weights_bytes)}, activation peak "
        f"{human_bytes(sp.activation_bytes)}, non-torch {human_bytes(sp.non_torch_bytes)}, "
        f"CUDA graphs {human_bytes(sp.cuda_graph_bytes)}",
        f"  {pool}",
    ]
    if refusal:
        lines.append(f"  {refusal}")
    if sp.concurrency:
        shown = ", ".join(
            f"{c.users}: {c.per_user_tok_s:.0f}/user, {c.total_tok_s:.0f} total"
            for c in sp.concurrency
        )
        lines.append(f"  Decode tok/s by concurrent users: {shown}")
    lines += [f"  Note: {n}" for n in sp.notes]
    return "\n".join(lines)


def format_loads(loads: tuple[DeviceLoad, ...]) -> str:
    # wider only for a long name (another host's CPU, `rpc-cpu:HOST`)
    width = max([8, *(len(d.device) for d in loads)])
    pad = " " * (width - 8)
    mm = any(d.projector_bytes for d in loads)
    st = any(d.state_bytes for d in loads)  # a hybrid model's recurrent state, f32
    head = f"Per device:{pad}      weights        KV" + ("     state" if st else "")
    dr = any(d.draft_bytes for d in loads)  # a draft model (-md)
    head += "   compute" + (" projector" if mm else "") + ("     draft" if dr else "")
    rows = [f"{head}   reserve     total  capacity"]
    for d in loads:
        rows.append(
            f"  {d.device:<{width}} {human_bytes(d.weights_bytes):>10} {human_bytes(d.kv_bytes):>9}"
            + (f" {human_bytes(d.state_bytes):>9}" if st else "")
            + f" {human_bytes(d.compute_bytes):>9}"
            + (f" {human_bytes(d.projector_bytes):>9}" if mm else "")
            + (f" {human_bytes(d.draft_bytes):>9}" if dr else "")
            + f" {human_bytes(d.reserve_bytes):>9}"
            f" {human_bytes(d.total_bytes):>9} {human_bytes(d.capacity_bytes):>9}"
            f"  {d.verdict.value}"
        )
    if any(d.verdict is Verdict.OVER and d.total_bytes <= d.capacity_bytes for d in loads):
        rows.append(
            f"  (over: past {1 - HEADROOM:.0%} of capacity less reserve; "
            f"{HEADROOM:.0%} is kept free)"
        )
    return "\n".join(rows)


def format_placement(placement: Placement) -> str:
    """Runs of units on one device, experts kept apart said on the run they leave."""
    runs: list[tuple[str, str | None, str, str]] = []
    for u in placement.units:
        away = u.experts_device if u.experts_device not in (None, u.device) else None
        if runs and runs[-1][:2] == (u.device, away):
            runs[-1] = (u.device, away, runs[-1][2], u.unit)
        else:
            runs.append((u.device, away, u.unit, u.unit))
    lines = ["Placement:"]
    for dev, away, first, last in runs:
        span = first if first == last else f"{first} .. {last}"
        experts = f" (experts -> {away})" if away else ""
        lines.append(f"  {span:<24} -> {dev}{experts}")
    return "\n".join(lines)


VERDICT_WORDS = {RankVerdict.FITS: "fits", RankVerdict.SLOW: "slow", RankVerdict.NO: "no"}


def format_ranking(rows: list[RankedModel], rig_name: str, s: PlanSettings) -> str:
    """The catalog ranked for one rig: what runs, best first, then what does not."""
    lines = [f"Catalog on {rig_name or 'this rig'} ({settings_line(s)})", ""]
    lines.append(
        f"  {'':<5} {'model':<40} {'params':>7}  {'path':<11} {'quant':<7} "
        f"{'memory':>9}  {'decode':<15} note"
    )
    for r in rows:
        params = param_text(r.params)
        speed = speed_text(r.tok_s) if r.verdict is not RankVerdict.NO else "-"
        memory = gib(r.required_bytes) if r.required_bytes else "-"
        lines.append(
            f"  {VERDICT_WORDS[r.verdict]:<5} {r.model_id:<40} {params:>7}  "
            f"{(r.path.value if r.path else '-'):<11} {(r.quant or '-'):<7} {memory:>9}  "
            f"{speed:<15} {r.note}".rstrip()
        )
    fits = sum(1 for r in rows if r.verdict is RankVerdict.FITS)
    slow = sum(1 for r in rows if r.verdict is RankVerdict.SLOW)
    lines += ["", f"{fits} of {len(rows)} models fit; {slow} more fit but run slowly."]
    return "\n".join(lines)


def suggestion_line(i: Suggestion) -> str:
    """'K/V cache at q8_0 → IQ4_NL · small loss on multi-gpu, 20 tok/s (cost: ...)'."""
    q = i.quality.label if i.quality is not None else i.quant
    speed = f", {speed_text(i.tok_s)}" if i.tok_s is not None else ""
    return f"{i.change} → {q} on {i.path}{speed} (cost: {i.cost})"


def format_smaller(ideas: Sequence[Suggestion], min_tok_s: float) -> str:
    lines = ["", f"Smaller models that reach {min_tok_s:g} tok/s here:"]
    lines += [f"  - {suggestion_line(i)}" for i in ideas]
    return "\n".join(lines)


def format_suggestions(ideas: Sequence[Suggestion]) -> str:
    lines = ["", "What would it take (smallest changes first):"]
    lines += [f"  - {suggestion_line(i)}" for i in ideas]
    return "\n".join(lines)
