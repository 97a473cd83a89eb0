"""The report's charts as PNG, drawn from the pure chart specs with QPainter on a QImage.

QPainter on a QImage rather than pyqtgraph's ImageExporter: a report is written on a
worker thread (the window's export runs in the background) and from the CLI, and a
QImage may be painted on any thread, while pyqtgraph's plot items are graphics widgets
that belong to the GUI thread. Only a QGuiApplication is needed (for fonts); the CLI
gets an offscreen one.
"""

from __future__ import annotations

import math
import threading

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPointF, QRectF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QGuiApplication,
    QImage,
    QPainter,
    QPainterPath,
    QPen,
)

from rigspark_gui.core.chart_spec import (
    COLOURS,
    CURVE_COLOURS,
    SEGMENT_LABELS,
    SEGMENT_ROLES,
    FitChart,
    KvChart,
)
from rigspark_gui.core.units import tokens
from rigspark_gui.report.model import PlanReport, ReportError

STATUS_TEXT = {"fits": "✓ fits", "tight": "⚠ tight", "over": "✗ does not fit"}
FG = QColor("#222222")
GRID = QColor("#E3E3E3")
FIT_SIZE = (1000, 380)
KV_SIZE = (1000, 480)

_app_lock = threading.Lock()
_app: QGuiApplication | None = None


def ensure_gui_app() -> None:
    """Fonts need a QGuiApplication; reuse the window's, or start an offscreen one."""
    global _app
    with _app_lock:
        if QGuiApplication.instance() is None:
            _app = QGuiApplication(["rigspark-report", "-platform", "offscreen"])


def _font(px: int, bold: bool = False) -> QFont:
    f = QFont()
    f.setPixelSize(px)
    f.setBold(bold)
    return f


def _nice_step(span: float, target: int = 8) -> float:
    raw = max(span, 1e-9) / target
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def _png(image: QImage) -> bytes:
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buf, "PNG"):  # type: ignore[call-overload]  # stubs say bytes; runtime wants str
        raise ReportError("could not encode a chart as PNG")
    buf.close()
    return bytes(data.data())


def _canvas(width: int, height: int) -> tuple[QImage, QPainter]:
    if width < 200 or height < 120:
        raise ReportError(f"a chart needs at least 200 x 120 pixels, not {width} x {height}")
    ensure_gui_app()
    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    return image, painter


def _legend(painter: QPainter, items: list[tuple[str, QColor, str]], x: float, y: float) -> None:
    """A row of swatches: `box`, a solid `line` or a `dash`ed line."""
    painter.setFont(_font(15))
    fm = QFontMetrics(painter.font())
    for label, colour, kind in items:
        if kind != "box":
            style = Qt.PenStyle.DashLine if kind == "dash" else Qt.PenStyle.SolidLine
            painter.setPen(QPen(colour, 2 if kind == "dash" else 3, style))
            painter.drawLine(QPointF(x, y + 7), QPointF(x + 18, y + 7))
        else:
            painter.setPen(QPen(colour.darker(130), 1))
            painter.setBrush(colour)
            painter.drawRect(QRectF(x, y, 16, 14))
        painter.setPen(FG)
        painter.drawText(QPointF(x + 22, y + 12), label)
        x += 22 + fm.horizontalAdvance(label) + 18


def render_fit_chart(chart: FitChart, width: int = FIT_SIZE[0], height: int = FIT_SIZE[1]) -> bytes:
    """Stacked weights / KV / compute / reserve per path against its limit, as PNG."""
    image, p = _canvas(width, height)
    try:
        label_w, note_w, top, bottom = 175.0, 330.0, 44.0, 44.0
        x0, x1 = label_w, width - note_w
        roles = (*SEGMENT_ROLES, "shortfall")
        legend = [(SEGMENT_LABELS[r], QColor(COLOURS[r]), "box") for r in roles]
        legend.append(("limit: usable + reserve", FG, "dash"))
        _legend(p, legend, label_w, 12)
        n = max(len(chart.rows), 1)
        row_h = (height - top - bottom) / n
        x_max = max(chart.x_max_gib, 1e-6)

        def sx(gib: float) -> float:
            return x0 + (x1 - x0) * min(gib, x_max) / x_max

        step = _nice_step(x_max)
        p.setFont(_font(14))
        tick = 0.0
        while tick <= x_max + 1e-9:
            x = sx(tick)
            p.setPen(QPen(GRID, 1))
            p.drawLine(QPointF(x, top), QPointF(x, height - bottom))
            p.setPen(FG)
            p.drawText(
                QRectF(x - 40, height - bottom + 4, 80, 16),
                Qt.AlignmentFlag.AlignHCenter,
                f"{tick:g}",
            )
            tick += step
        p.drawText(
            QRectF(x0, height - 18, x1 - x0, 16), Qt.AlignmentFlag.AlignHCenter, "GiB of memory"
        )
        for i, row in enumerate(chart.rows):
            cy = top + row_h * (i + 0.5)
            bar_h = min(row_h * 0.55, 34.0)
            p.setFont(_font(16, bold=row.recommended))
            p.setPen(FG)
            p.drawText(
                QRectF(8, cy - row_h / 2, label_w - 16, row_h),
                Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight,
                row.label + ("\n(recommended)" if row.recommended else ""),
            )
            for seg in row.segments:
                if seg.width_gib <= 0:
                    continue
                colour = QColor(COLOURS[seg.role])
                rect = QRectF(
                    sx(seg.start_gib),
                    cy - bar_h / 2,
                    sx(seg.start_gib + seg.width_gib) - sx(seg.start_gib),
                    bar_h,
                )
                if seg.role == "shortfall":
                    # what is missing, past the limit: an outline, not a filled bar
                    fill = QColor(colour)
                    fill.setAlpha(60)
                    p.setBrush(fill)
                    p.setPen(QPen(colour, 2, Qt.PenStyle.DashLine))
                    p.drawRect(rect.adjusted(0, -4, 0, 4))
                else:
                    p.setBrush(colour)
                    p.setPen(QPen(colour.darker(130), 1))
                    p.drawRect(rect)
            lx = sx(row.capacity_gib)
            p.setPen(QPen(FG, 2, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(lx, cy - bar_h / 2 - 7), QPointF(lx, cy + bar_h / 2 + 7))
            p.setFont(_font(15))
            p.setPen(QColor(COLOURS["shortfall"]).darker(120) if row.status == "over" else FG)
            p.drawText(
                QRectF(x1 + 12, cy - row_h / 2, note_w - 16, row_h),
                Qt.AlignmentFlag.AlignVCenter | Qt.TextFlag.TextWordWrap,
                f"{STATUS_TEXT.get(row.status, row.status)} · {row.annotation}",
            )
        p.setPen(QPen(FG, 1))
        p.drawLine(QPointF(x0, height - bottom), QPointF(x1, height - bottom))
        p.drawLine(QPointF(x0, top), QPointF(x0, height - bottom))
    finally:
        p.end()
    return _png(image)


def _log_ticks(lo: int, hi: int) -> list[int]:
    ticks, t = [], 256
    while t <= hi:
        if t >= lo:
            ticks.append(t)
        t *= 4
    if ticks and hi / ticks[-1] >= 1.6:
        ticks.append(hi)
    return ticks


def render_kv_chart(
    chart: KvChart,
    width: int = KV_SIZE[0],
    height: int = KV_SIZE[1],
    *,
    context: int | None = None,
) -> bytes:
    """Memory against context (log scale) per KV type, with each path's usable line and
    (if given) the plan's context as a vertical line."""
    image, p = _canvas(width, height)
    try:
        left, right, top, bottom = 64.0, 250.0, 44.0, 52.0
        x0, x1, y0, y1 = left, width - right, height - bottom, top
        ctxs = [c for curve in chart.curves for c in curve.contexts]
        lo, hi = (min(ctxs), max(ctxs)) if ctxs else (256, 131072)
        hi = max(hi, lo * 2)
        values = [v for curve in chart.curves for v in curve.gib]
        y_max = max([*values, *(lim.gib for lim in chart.limits), 1.0]) * 1.08

        def sx(ctx: float) -> float:
            return x0 + (x1 - x0) * math.log(ctx / lo) / math.log(hi / lo)

        def sy(gib: float) -> float:
            return y0 - (y0 - y1) * min(gib, y_max) / y_max

        p.setFont(_font(14))
        step = _nice_step(y_max, 6)
        tick = 0.0
        while tick <= y_max + 1e-9:
            y = sy(tick)
            p.setPen(QPen(GRID, 1))
            p.drawLine(QPointF(x0, y), QPointF(x1, y))
            p.setPen(FG)
            p.drawText(
                QRectF(0, y - 8, left - 8, 16),
                Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                f"{tick:g}",
            )
            tick += step
        for t in _log_ticks(lo, hi):
            x = sx(t)
            p.setPen(QPen(GRID, 1))
            p.drawLine(QPointF(x, y0), QPointF(x, y1))
            p.setPen(FG)
            p.drawText(QRectF(x - 40, y0 + 4, 80, 16), Qt.AlignmentFlag.AlignHCenter, tokens(t))
        p.drawText(
            QRectF(x0, height - 20, x1 - x0, 16),
            Qt.AlignmentFlag.AlignHCenter,
            "context (tokens, log scale)",
        )
        p.save()
        p.translate(16, (y0 + y1) / 2)
        p.rotate(-90)
        p.drawText(QRectF(-120, -10, 240, 20), Qt.AlignmentFlag.AlignCenter, "GiB")
        p.restore()
        # usable lines, labels nudged apart so close limits stay readable
        placed: list[float] = []
        p.setFont(_font(14))
        for lim in sorted(chart.limits, key=lambda limit: -limit.gib):
            y = sy(lim.gib)
            p.setPen(QPen(QColor("#555555"), 1.5, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(x0, y), QPointF(x1, y))
            ty = y
            for other in placed:
                if abs(ty - other) < 15:
                    ty = other + 15
            placed.append(ty)
            p.setPen(FG)
            p.drawText(
                QRectF(x1 + 6, ty - 8, right - 8, 16),
                Qt.AlignmentFlag.AlignVCenter,
                f"{lim.label} {lim.gib:.1f} GiB",
            )
        if context is not None and lo <= context <= hi:
            x = sx(context)
            p.setPen(QPen(QColor("#B03030"), 2, Qt.PenStyle.DashLine))
            p.drawLine(QPointF(x, y0), QPointF(x, y1))
        for i, curve in enumerate(chart.curves):
            colour = QColor(CURVE_COLOURS[i % len(CURVE_COLOURS)])
            path = QPainterPath()
            for j, (c, v) in enumerate(zip(curve.contexts, curve.gib, strict=True)):
                pt = QPointF(sx(c), sy(v))
                if j == 0:
                    path.moveTo(pt)
                else:
                    path.lineTo(pt)
            p.setPen(QPen(colour, 3))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawPath(path)
        p.setPen(QPen(FG, 1))
        p.drawLine(QPointF(x0, y0), QPointF(x1, y0))
        p.drawLine(QPointF(x0, y0), QPointF(x0, y1))
        legend = [
            (f"K=V {c.label}", QColor(CURVE_COLOURS[i % len(CURVE_COLOURS)]), "line")
            for i, c in enumerate(chart.curves)
        ]
        legend.append(("usable memory per path", QColor("#555555"), "dash"))
        if context is not None:
            legend.append(("this plan's context", QColor("#B03030"), "dash"))
        _legend(p, legend, x0, 12)
    finally:
        p.end()
    return _png(image)


def render_charts(report: PlanReport) -> dict[str, bytes]:
    """Both charts of a report by key: {"fit": png, "kv": png}."""
    return {
        "fit": render_fit_chart(report.fit_chart),
        "kv": render_kv_chart(report.kv_chart, context=report.settings.context),
    }
