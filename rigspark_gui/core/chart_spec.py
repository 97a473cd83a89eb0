"""Pure chart descriptions derived from a plan, drawn by the window and the reports.

Keeping them free of Qt lets tests check what a chart says (segments, limits, labels)
without rendering anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import pairwise

from rigspark_gui.core.memory import device_compute_bytes, kv_total_bytes, weights_layout
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.placement import HEADROOM
from rigspark_gui.core.plan import Plan, Verdict, kv_quant
from rigspark_gui.core.serving import FORMATS, checkpoint_bytes
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.units import GIB, gib, speed_text

SEGMENT_ROLES = ("weights", "kv", "compute", "projector", "draft", "reserve")
# One meaning per colour in the window and in reports (always beside text, never alone).
COLOURS = {
    "weights": "#4C78A8",
    "kv": "#F58518",
    "compute": "#54A24B",
    "projector": "#B279A2",
    "draft": "#EECA3B",
    "reserve": "#9D9D9D",
    "shortfall": "#E45756",
    "speed": "#72B7B2",
    "limit": "#222222",
}
CURVE_COLOURS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#72B7B2", "#FF9DA6")
SEGMENT_LABELS = {
    "weights": "Weights",
    "kv": "KV cache",
    "compute": "Compute buffer",
    "projector": "Projector (mmproj)",
    "draft": "Draft model",
    "reserve": "Reserve",
    "shortfall": "Shortfall",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class BarSegment:
    # weights, kv, compute, reserve or shortfall
    role: str
    start_gib: float
    width_gib: float
    n_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FitRow:
    label: str
    segments: tuple[BarSegment, ...]
    # the limit line: usable memory plus reserve
    capacity_gib: float
    # where the margin kept free starts: a bar must end before it to fit
    margin_gib: float
    # fits, tight or over
    status: str
    # text beside the bar
    annotation: str
    recommended: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FitChart:
    rows: tuple[FitRow, ...]
    x_max_gib: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedRow:
    label: str
    tok_s: float | None = None
    low_tok_s: float | None
    high_tok_s: float | None
    known: bool
    annotation: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedChart:
    rows: tuple[SpeedRow, ...]
    x_max_tok_s: float


def fit_chart(plan: Plan) -> FitChart:
    rows = []
    x_max = 1.0
    for p in plan.paths:
        b = p.breakdown
        parts = (
            ("weights", b.weights_bytes),
            ("kv", b.kv_bytes),
            ("compute", b.compute_bytes),
            ("projector", b.projector_bytes),
            ("draft", b.draft_bytes),
            ("reserve", b.reserve_bytes),
        )
        segs, x = [], 0.0
        for role, n in parts:
            w = n / GIB
            segs.append(BarSegment(role=role, start_gib=x, width_gib=w, n_bytes=n))
            x += w
        capacity = (p.usable_bytes + b.reserve_bytes) / GIB
        margin = capacity - HEADROOM * p.usable_bytes / GIB
        if p.fits:
            status = "tight" if p.verdict is Verdict.TIGHT else "fits"
            note = f"{p.quant}: {gib(p.required_bytes)} of {gib(p.usable_bytes)}"
        elif p.shortfall_bytes:
            status = "over"
            segs.append(
                BarSegment(
                    role="shortfall",
                    start_gib=capacity,
                    width_gib=p.shortfall_bytes / GIB,
                    n_bytes=p.shortfall_bytes,
                )
            )
            note = f"needs {gib(p.shortfall_bytes)} more"
            if x <= capacity:  # the bar ends inside the margin kept free
                note += f" ({HEADROOM:.0%} is kept free)"
        else:
            status = "over"
            note = f"limited by {p.reason.words if p.reason else 'unknown'}"
        end = max(x, capacity + (p.shortfall_bytes or 0) / GIB)
        x_max = max(x_max, end)
        rows.append(
            FitRow(
                label=p.path.value,
                segments=tuple(segs),
                capacity_gib=capacity,
                margin_gib=margin,
                status=status,
                annotation=note,
                recommended=plan.recommended is p.path,
            )
        )
    return FitChart(rows=tuple(rows), x_max_gib=x_max * 1.15)


def speed_chart(plan: Plan) -> SpeedChart:
    rows = []
    top = 1.0
    for p in plan.paths:
        t = p.throughput
        if t.known and t.high_tok_s is not None:
            top = max(top, t.high_tok_s)
            note = speed_text(t.tok_s, t.low_tok_s, t.high_tok_s)
        else:
            note = "unknown" if p.fits else "does not fit"
        rows.append(
            SpeedRow(
                label=p.path.value,
                tok_s=t.tok_s,
                low_tok_s=t.low_tok_s,
                high_tok_s=t.high_tok_s,
                known=t.known,
                annotation=note,
            )
        )
    return SpeedChart(rows=tuple(rows), x_max_tok_s=top * 1.25)


@dataclass(frozen=True, slots=True, kw_only=True)
class Curve:
    label: str
    contexts: tuple[int, ...]
    gib: tuple[float, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitLine:
    label: str
    gib: float


@dataclass(frozen=True, slots=True, kw_only=True)
class KvChart:
    curves: tuple[Curve, ...]
    limits: tuple[LimitLine, ...]
    # the weights' quantization every curve carries: the KV comparison's (the plan's
    # recommended one)
    quant: str | None = None
    # what the chart shows, quantization included
    title: str = ""


KV_CHART_TYPES = (KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q5_0, KvCacheType.Q4_0)
SERVING_KV_TYPES = (KvCacheType.F16, KvCacheType.FP8)


def kv_chart_types(s: PlanSettings) -> tuple[KvCacheType, ...]:
    """The cache types the memory-against-context chart draws: the engine's own."""
    if s.backend.serving:
        return SERVING_KV_TYPES
    return tuple(k for k in KV_CHART_TYPES if k in s.backend.kv_types)


def kv_memory_chart(
    spec: ModelSpec, plan: Plan, kv_types: tuple[KvCacheType, ...], points: int = 24
) -> KvChart:
    """Total memory (weights + KV + compute, all on one device) against context, one
    curve per KV type (K = V), with each path's usable memory as a line. The weights are
    at the KV comparison's quantization (`kv_quant`: the recommended path's)."""
    s = plan.settings
    quant = kv_quant(spec, s, plan.paths, plan.recommended) or spec.available_quants[-1]
    g = spec.geometry
    if s.backend.serving and quant in FORMATS:
        weights = checkpoint_bytes(g, quant)  # a serving engine's checkpoint
    else:
        weights = weights_layout(spec, quant).total_bytes
    top = g.context_length
    lo = 256
    ctxs = sorted(
        {
            min(top, max(lo, round(lo * (top / lo) ** (i / (points - 1)) / 256) * 256))
            for i in range(points)
        }
    )
    curves = []
    for k in kv_types:
        fa = s.flash_attn or (k.quantized and s.backend.ggml_based)
        values = []
        for c in ctxs:
            sc = replace(s, context=c, kv_k=k, kv_v=k, flash_attn=fa)
            compute = device_compute_bytes(g, sc, list(range(g.n_layer)), True)
            values.append((weights + kv_total_bytes(g, sc) + compute) / GIB)
        curves.append(Curve(label=k.value, contexts=tuple(ctxs), gib=tuple(values)))
    # a vision projector's or a draft's memory is not the model's: the lines stop short of it
    limits = tuple(
        LimitLine(
            label=f"{p.path.value} usable",
            gib=(p.usable_bytes - p.breakdown.projector_bytes - p.breakdown.draft_bytes) / GIB,
        )
        for p in plan.paths
    )
    title = f"Weights at {quant} + KV cache + compute buffer, against each path's usable memory"
    return KvChart(curves=tuple(curves), limits=limits, quant=quant, title=title)


# ---------------------------------------------------------------- label placement

Box = tuple[float, float, float, float]  # left, bottom, right, top in plot fractions
LABEL_ON_LABEL = 100  # the cost of one label over another, in curve crossings


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _crosses(box: Box, a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether segment a-b passes through box (Liang-Barsky clipping)."""
    x0, y0, x1, y1 = box
    dx, dy = b[0] - a[0], b[1] - a[1]
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, a[0] - x0), (dx, x1 - a[0]), (-dy, a[1] - y0), (dy, y1 - a[1])):
        if p == 0:
            if q < 0:
                return False  # parallel to this edge and outside it
            continue
        t = q / p
        if p < 0:
            lo = max(lo, t)
        else:
            hi = min(hi, t)
        if lo > hi:
            return False
    return True


def place_line_labels(
    lines_y: tuple[float, ...],
    widths: tuple[float, ...],
    height: float,
    curves: tuple[tuple[tuple[float, float], ...], ...] = (),
    gap: float = 0.01,
) -> tuple[tuple[float, bool], ...]:
    """Where to put the label of each horizontal line so that no two labels overlap and
    none sits on a curve: (left x, above the line) per line. Everything is in fractions
    of the plot (0..1 across and up): `lines_y` each line's height, `widths` each
    label's width, `height` a label's height, `curves` the polylines to keep clear of.
    Tries the left end first, above then below the line, then steps right; a label
    that finds no free place goes where it overlaps least."""
    placed: list[Box] = []
    out: list[tuple[float, bool]] = [(0.0, True)] * len(lines_y)
    steps = [gap + i * 0.02 for i in range(50)]
    for i in sorted(range(len(lines_y)), key=lambda j: -lines_y[j]):
        y, w = lines_y[i], widths[i]
        best: tuple[int, float, bool, Box] | None = None
        for x in steps:
            if x + w > 1.0 - gap / 2:
                break
            for above in (True, False):
                box = (x, y, x + w, y + height) if above else (x, y - height, x + w, y)
                if box[1] < 0.0 or box[3] > 1.0:
                    continue
                # a label on another is worse than one a curve passes through
                hits = LABEL_ON_LABEL * sum(1 for other in placed if _overlap(box, other))
                hits += sum(1 for c in curves for a, b in pairwise(c) if _crosses(box, a, b))
                if best is None or hits < best[0]:
                    best = (hits, x, above, box)
                if hits == 0:
                    break
            if best is not None and best[0] == 0:
                break
        if best is None:
            box = (gap, y, gap + w, y + height)
            best = (0, gap, True, box)
        out[i] = (best[1], best[2])
        placed.append(best[3])
    return tuple(out)
