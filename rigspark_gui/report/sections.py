"""The report's content as neutral blocks (headings, tables, charts, code), so HTML,
Markdown and PDF show the same sections and figures, and each writer only decides how
to draw and escape them. Every string here is plain text, never markup.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rigspark_gui.core.placement import DeviceLoad, units_span
from rigspark_gui.core.serving import ServingPlan
from rigspark_gui.core.units import gib, human_bytes, seconds_text, speed_text, tokens
from rigspark_gui.report.model import PlanReport
from rigspark_gui.report.rig_words import DETECTED_NAME, rig_summary
from rigspark_gui.report.text import (
    SERVING_COLUMNS,
    auto_rule,
    path_label,
    serving_gpu_row,
    serving_summary,
    suggestion_line,
)


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    text: str
    strong: bool = False


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = field(default_factory=frozenset)
    name: str = ""  # a stable id, so tests and styles can find a table


@dataclass(frozen=True)
class Chart:
    key: str  # "fit" or "kv": the rendered PNG's name
    alt: str


@dataclass(frozen=True)
class Code:
    title: str
    text: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


Block = Heading | Para | Table | Chart | Code | Bullets


def kv_pair(k: str, v: str) -> str:
    return k if k == v else f"K {k} / V {v}"


def summary(report: PlanReport) -> str:
    rec = next((p for p in report.paths if p.path is report.recommended), None)
    if rec is None:
        return "No path fits this model at this context on this rig."
    t = rec.throughput
    speed = speed_text(t.tok_s, t.low_tok_s, t.high_tok_s)
    text = (
        f"Recommended: {path_label(rec)} at {rec.quant}"
        f"{f' ({rec.quality.words})' if rec.quality is not None else ''}, "
        f"using {gib(rec.required_bytes)} of "
        f"{gib(rec.usable_bytes)} usable; decode {speed} ({t.basis}). "
        f"Chosen by {auto_rule(report.settings)}."
    )
    if rec.choice:
        text += f" {rec.choice}."
    if rec.cpu_loading is not None and rec.cpu_loading.flag:
        text += f" {rec.cpu_loading.note}."
    return text


def _settings_rows(report: PlanReport) -> tuple[tuple[str, str], ...]:
    s = report.settings
    return (
        ("Context", f"{tokens(s.context)} tokens ({s.context:,})"),
        ("KV cache", kv_pair(s.kv_k.value, s.kv_v.value)),
        ("Flash attention", "on" if s.flash_attn else "off"),
        ("Parallel sequences", str(s.parallel)),
        ("Backend", s.backend.value),
        ("Quantization", s.quant or "auto (best that fits)"),
        ("Sliding-window cache", "full size" if s.swa_full else "windowed"),
        ("Prompt for prefill time", f"{s.prompt_tokens:,} tokens"),
        ("Micro-batch (n_ubatch)", str(s.n_ubatch)),
    )


def _model_rows(report: PlanReport) -> tuple[tuple[str, str], ...]:
    m, g = report.model, report.model.geometry
    moe = f"{g.n_expert_used} of {g.n_expert} experts per token" if g.n_expert else "dense"
    rows = [
        ("Name", m.name),
        ("Id", m.id),
        ("Family", m.family or "—"),
        ("Source", (m.source or "—") + (" (imported file)" if m.imported else "")),
        ("Quantization", m.quant),
        ("File size", f"{gib(m.file_bytes, 2)} ({m.file_bytes_basis})"),
        (
            "Parameters",
            f"{m.n_params / 1e9:.2f} B ({m.n_active_params / 1e9:.2f} B read per token)",
        ),
        ("Architecture", f"{g.architecture}, {moe}"),
        ("Layers / width", f"{g.n_layer} blocks, n_embd {g.n_embd}, FFN {g.n_ff}"),
        (
            "Attention",
            f"{g.n_head} heads, {g.n_head_kv} KV heads, "
            f"head dim K {g.head_dim_k} / V {g.head_dim_v}",
        ),
        ("Vocabulary", f"{g.n_vocab:,}" + (", tied embeddings" if g.tied_embeddings else "")),
        ("Trained context", f"{tokens(g.context_length)} ({g.context_length:,})"),
    ]
    if g.sliding_window:
        rows.append(("Sliding window", f"{g.sliding_window} (pattern {g.swa_pattern})"))
    if g.kv_lora_rank:
        rows.append(("MLA latent", str(g.kv_lora_rank)))
    return tuple(rows)


def _path_rows(report: PlanReport) -> tuple[tuple[str, ...], ...]:
    rows = []
    for p in report.paths:
        fit = f"{p.verdict.mark} {p.verdict.value}"
        star = "★ " if report.recommended is p.path else ""
        rows.append(
            (
                star + path_label(p),
                fit,
                p.quant or "—",
                p.quality.label.split(" · ", 1)[1] if p.quality else "—",
                gib(p.required_bytes),
                gib(p.usable_bytes),
                gib(p.shortfall_bytes) if p.shortfall_bytes else "—",
                p.reason.words if p.reason else "—",
                speed_text(p.throughput.tok_s, p.throughput.low_tok_s, p.throughput.high_tok_s),
                seconds_text(p.prefill.seconds, p.prefill.low_seconds, p.prefill.high_seconds),
                str(p.ngl) if p.ngl is not None else "—",
            )
        )
    return tuple(rows)


# a KV row's flash attention where it is not the GPUs' own kernel (KvComparisonRow.fa_where)
_FA_MARK = {"gpu-f16": " (f16 copy) ⚠", "cpu": " (on the CPU) ⚠", "fails": " (fails) ⚠"}
_FA_WORDS = {
    "gpu-f16": "decode converts K and V to f16 first",
    "cpu": "the GPUs refuse flash attention",
    "fails": "llama.cpp aborts",
}


def _kv_fa_notes(report: PlanReport) -> tuple[str, ...]:
    """One line per kind of flash attention that is not native: its pairs and the rule."""
    lines = []
    for where, words in _FA_WORDS.items():
        rows = [r for r in report.kv_comparison if r.fa_where == where]
        if rows:
            pairs = ", ".join(f"{r.kv_k.value}/{r.kv_v.value}" for r in rows)
            lines.append(f"⚠ {pairs}: {words}, not advised on this rig. {rows[0].speed_note}")
    return tuple(lines)


def _kv_table(report: PlanReport) -> Table:
    paths = [p.path.value for p in report.paths]
    rows = []
    for r in report.kv_comparison:
        limits = {lim.path.value: lim for lim in r.limits}
        rows.append(
            (
                r.kv_k.value,
                r.kv_v.value,
                ("on" if r.flash_attn else "off") + _FA_MARK.get(r.fa_where, ""),
                f"{r.bytes_per_token:,}",
                gib(r.kv_bytes, 2),
                *(
                    f"{limits[p].max_context:,}"
                    if p in limits and limits[p].max_context
                    else "none"
                    for p in paths
                ),
            )
        )
    headers: tuple[str, ...] = ("K", "V", "Flash attn", "Bytes / token", "KV at context")
    headers += tuple(f"Max ctx {p}" for p in paths)
    return Table(
        headers=headers,
        rows=tuple(rows),
        numeric=frozenset(range(3, len(headers))),
        name="kv",
    )


def _load_row(
    d: DeviceLoad, state: bool = False, projector: bool = False, draft: bool = False
) -> tuple[str, ...]:
    return (
        d.device,
        units_span(d.units),
        human_bytes(d.weights_bytes),
        human_bytes(d.kv_bytes),
        *((human_bytes(d.state_bytes),) if state else ()),
        human_bytes(d.compute_bytes),
        *((human_bytes(d.projector_bytes),) if projector else ()),
        *((human_bytes(d.draft_bytes),) if draft else ()),
        human_bytes(d.reserve_bytes),
        human_bytes(d.total_bytes),
        human_bytes(d.capacity_bytes),
        d.verdict.value,
    )


def _rig_blocks(report: PlanReport) -> tuple[Block, ...]:
    """One row per figure, the device named on its first row; each source is listed
    once below the table and cited by number."""
    sources: list[str] = []
    rows = []
    for d in report.devices:
        for i, f in enumerate(d.figures):
            basis = f.basis
            if f.source and f.basis != "unknown":
                if f.source not in sources:
                    sources.append(f.source)
                basis += f" [{sources.index(f.source) + 1}]"
            elif f.source:
                basis += f" ({f.source})"
            rows.append(
                (d.device if i == 0 else "", d.name if i == 0 else "", f.label, f.value, basis)
            )
    table = Table(
        ("Device", "Name", "Figure", "Value", "Basis"),
        tuple(rows),
        numeric=frozenset({3}),
        name="rig",
    )
    if not sources:
        return (table,)
    return table, Bullets(tuple(f"[{i + 1}] {s}" for i, s in enumerate(sources)))


def report_blocks(report: PlanReport) -> list[Block]:
    """The whole report, in reading order."""
    rig = report.rig
    name = rig.name or "an unnamed rig"
    if report.rig_edited:
        origin = f"A what-if rig ({rig_summary(rig)}), edited from {name}"
    else:
        how = "as detected" if name.casefold() == DETECTED_NAME else "as loaded from a rig file"
        origin = f"{name[:1].upper() + name[1:]} ({rig_summary(rig)}), {how}"
    blocks: list[Block] = [
        Para(summary(report), strong=True),
        Heading("Settings"),
        Table(("Setting", "Value"), _settings_rows(report), name="settings"),
        Heading("Rig"),
        Para(
            f"{origin}. Basis: measured (read from the device), spec (from the GPU database, "
            "with its source), user (given in the rig file or edited) or unknown."
        ),
        *_rig_blocks(report),
        Heading("Model"),
        Table(("Property", "Value"), _model_rows(report), name="model"),
        Heading("Paths"),
        Table(
            (
                "Path",
                "Fit",
                "Quant",
                "Quality cost",
                "Required",
                "Usable",
                "Shortfall",
                "Reason",
                "Decode",
                "Prefill",
                "ngl",
            ),
            _path_rows(report),
            numeric=frozenset({4, 5, 6, 8, 9, 10}),
            name="paths",
        ),
        Para(
            f"★ recommended. Decode: tokens per second at 1 sequence; prefill: seconds for a "
            f"{report.settings.prompt_tokens:,}-token prompt; ngl: llama.cpp -ngl of the "
            "path's placement; shortfall: extra usable memory needed before the smallest "
            "quantization fits."
        ),
        Chart("fit", "Memory per path: weights, KV cache, compute buffer and reserve"),
    ]
    rec = next((p for p in report.paths if p.path is report.recommended), None)
    if rec is not None and rec.quality is not None:
        blocks.append(Para(f"Quality cost of {rec.quant}: {rec.quality.basis}."))
    if report.suggestions:
        blocks.append(Heading("What would it take"))
        blocks.append(Bullets(tuple(suggestion_line(i) for i in report.suggestions)))
    if report.notes:
        blocks.append(Bullets(tuple(f"Note: {n}" for n in report.notes)))
    blocks.append(Heading("KV cache precision"))
    if report.kv_comparison:
        quants = {lim.quant for row in report.kv_comparison for lim in row.limits if lim.quant}
        at = "at each path's quantization"
        if len(quants) == 1:
            at = f"with the weights at {quants.pop()}"
        blocks.append(
            Para(
                "KV memory at this context and the largest context (a multiple of 256, up to "
                f"the trained context) that fits on each path {at}."
            )
        )
        blocks.append(_kv_table(report))
        fa_notes = _kv_fa_notes(report)
        if fa_notes:
            blocks.append(Bullets(fa_notes))
    blocks.append(Chart("kv", "Memory against context for each KV cache type"))
    label = "recommended" if report.recommended is not None else "nearest (nothing fits)"
    if report.placement_edited:
        label = "edited by hand in the Layers tab"
    blocks.append(Heading(f"Placement per device ({report.placement_path.value}, {label})"))
    # a hybrid model's recurrent state (f32, per sequence) apart from the attention KV
    state = any(d.state_bytes for d in report.device_loads)
    # the vision/audio projector (mmproj) beside the model, its own column
    mm = any(d.projector_bytes for d in report.device_loads)
    dr = any(d.draft_bytes for d in report.device_loads)  # a draft model (-md)
    blocks.append(
        Table(
            (
                "Device",
                "Layers",
                "Weights",
                "KV",
                *(("Recurrent state",) if state else ()),
                "Compute",
                *(("Projector",) if mm else ()),
                *(("Draft model",) if dr else ()),
                "Reserve",
                "Total",
                "Capacity",
                "Verdict",
            ),
            tuple(_load_row(d, state, mm, dr) for d in report.device_loads),
            numeric=frozenset(range(2, 8 + state + mm + dr)),
            name="placement",
        )
    )
    if report.serving is not None:
        blocks += _serving_blocks(report.serving)
    if report.launch is not None:
        blocks.append(Heading(f"Launch, in order ({report.launch.engine})"))
        if not report.launch.supported:
            blocks.append(Para(report.launch.explanation))
        for sc in report.launch.scripts:
            where = sc.host or "this machine"
            blocks.append(Code(f"{sc.order}. on {where} ({sc.address}): {sc.role}", sc.text, ()))
        if report.launch.notes:
            blocks.append(Bullets(report.launch.notes))
    if not report.launch_commands:
        blocks.append(Heading("Sources and assumptions"))
        blocks.append(Bullets(tuple(f"{a.topic}: {a.text}" for a in report.assumptions)))
        return blocks
    blocks.append(Heading("Launch commands"))
    for c in report.launch_commands:
        title = c.engine.value if c.supported else f"{c.engine.value} (not possible)"
        text = c.text if c.supported else c.explanation or c.text
        blocks.append(Code(title, text, c.notes))
    blocks.append(Heading("Sources and assumptions"))
    blocks.append(Bullets(tuple(f"{a.topic}: {a.text}" for a in report.assumptions)))
    return blocks


def _serving_blocks(sp: ServingPlan) -> list[Block]:
    """The engine's start-up figures, each GPU's budget and throughput by concurrency."""
    layout, pool, refusal = serving_summary(sp)
    engine = "vLLM" if sp.engine == "vllm" else "SGLang"
    out: list[Block] = [Heading(f"Serving ({engine})"), Para(f"{layout}. {pool}.")]
    if refusal:
        out.append(Para(refusal))
    out.append(
        Table(
            tuple(c for c, _ in SERVING_COLUMNS),
            tuple(serving_gpu_row(b) for b in sp.gpus),
            numeric=frozenset(range(2, len(SERVING_COLUMNS))),
            name="serving",
        )
    )
    if sp.concurrency:
        out.append(
            Table(
                ("Concurrent users", "Tokens/s per user", "Tokens/s total", "Bound by"),
                tuple(
                    (str(c.users), f"{c.per_user_tok_s:.1f}", f"{c.total_tok_s:.0f}", c.limit)
                    for c in sp.concurrency
                ),
                numeric=frozenset({0, 1, 2}),
                name="concurrency",
            )
        )
        out.append(Para(f"Speed basis: {sp.speed_basis}."))
    out += [Para(f"Note: {n}") for n in sp.notes]
    return out


def byline(report: PlanReport) -> str:
    return f"Made {report.created_at} with {report.app_name} {report.app_version}"
