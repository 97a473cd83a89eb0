"""pyqtgraph renderings of the pure chart specs (`core.chart_spec`).

Each widget contains a PlotWidget (never subclasses it) and redraws from a spec.
Colours carry one meaning everywhere; every bar also has a text label, so colour is
never the only signal.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable

os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QPainter, QPen, QResizeEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from rigspark_gui.core.chart_spec import COLOURS, SEGMENT_LABELS, FitChart, SpeedChart

__all__ = ["COLOURS", "FitChartWidget", "SpeedChartWidget"]
STATUS_TEXT = {"fits": "✓ fits", "tight": "⚠ tight", "over": "✗ does not fit"}
LABEL_SHARE = 0.6  # a bar's label breaks onto more lines past this share of the plot


def _is_dark(widget: QWidget) -> bool:
    return widget.palette().window().color().lightness() < 128


Rect = tuple[QRectF, QBrush, QPen]


class RectsItem(pg.GraphicsObject):
    """Many filled rectangles in data coordinates as one plot item. pyqtgraph's
    BarGraphItem re-measures its pixel padding on every bounding-rect query, which cost
    most of a frame with a bar per segment; this measures once per change."""

    def __init__(self, z: float = 0.0, tooltip: str = "") -> None:
        super().__init__()
        self._rects: list[Rect] = []
        self._bounds = QRectF()
        self.setZValue(z)
        if tooltip:
            self.setToolTip(tooltip)

    @property
    def rects(self) -> list[Rect]:
        return self._rects

    def set_rects(self, rects: list[Rect]) -> None:
        if rects == self._rects:
            return  # an unchanged item is not repainted
        self.prepareGeometryChange()
        self._rects = rects
        bounds = QRectF()
        for r, _brush, _pen in rects:
            bounds = bounds.united(r)
        # room for the pens' width, which is in pixels, not data units
        px, py = self.pixelWidth() or 0.0, self.pixelHeight() or 0.0
        self._bounds = bounds.adjusted(-3 * px, -3 * py, 3 * px, 3 * py)
        self.update()

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter: QPainter, *_args: object) -> None:
        for rect, brush, pen in self._rects:
            painter.setPen(pen)
            painter.setBrush(brush)
            painter.drawRect(rect)


class PlotWidget(QWidget):
    def __init__(self, x_label: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot = pg.PlotWidget()
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.setLabel("bottom", x_label)
        # vertical grid lines as one item, redrawn only when the x range changes: the
        # axis's own grid made every bar change repaint the whole axis
        self.grid = RectsItem(z=-10)
        self.plot.addItem(self.grid)
        # the key sits above the plot, never over a bar, curve or limit label
        self.legend_label = QLabel(self)
        self.legend_label.setTextFormat(Qt.TextFormat.RichText)
        self.legend_label.setWordWrap(True)
        self.legend_label.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.legend_label)
        layout.addWidget(self.plot)
        self._apply_palette()
        # the plot area settles after the widget (its axis widens for longer row
        # labels): labels are fitted again to the width it ends up with
        self._view_px = 0.0
        self.plot.getViewBox().sigResized.connect(self._on_view_resized)

    def set_legend(self, entries: list[tuple[str, str, bool]]) -> None:
        """(colour, label, dashed outline) per entry, as a line of swatches."""
        parts = []
        for colour, label, dashed in entries:
            swatch = "┅" if dashed else "■"
            parts.append(
                f'<span style="color:{colour}; font-size:large">{swatch}</span>&nbsp;'
                f"{html.escape(label)}"
            )
        self.legend_label.setText("&nbsp;&nbsp;&nbsp;".join(parts))
        self.legend_label.setVisible(bool(entries))

    def changeEvent(self, event: QEvent) -> None:
        # follow the system's light/dark switch while running
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_palette()
        super().changeEvent(event)

    def _apply_palette(self) -> None:
        dark = _is_dark(self)
        self.plot.setBackground("#1e1e1e" if dark else "w")
        self._fg = "#dddddd" if dark else "#222222"
        for axis in ("left", "bottom"):
            ax = self.plot.getAxis(axis)
            ax.setPen(pg.mkPen(self._fg))
            ax.setTextPen(pg.mkPen(self._fg))

    def _set_rows(self, labels: list[str]) -> None:
        if labels == getattr(self, "_labels", None):
            return  # re-laying out the axis is a good part of a frame
        self._labels = labels
        n = len(labels)
        ticks = [(n - 1 - i, label) for i, label in enumerate(labels)]
        self.plot.getAxis("left").setTicks([ticks])
        self.plot.setYRange(-0.6, n - 0.4, padding=0)
        if getattr(self, "_x_top", None):
            self._draw_grid(self._x_top)

    def _set_x(self, top: float) -> None:
        # rescale in steps, not on every small change, so the axis is not re-laid out
        current = getattr(self, "_x_top", None)
        if current is None or not (0.6 * current <= top <= current):
            # grow with room to spare, so labels that lengthen a little do not re-lay
            # out the axis on every change
            top = top * 1.25 if current is not None and top > current else top
            self._x_top = top
            self.plot.setXRange(0, top, padding=0)
            self._draw_grid(top)

    def _draw_grid(self, top: float) -> None:
        axis = self.plot.getAxis("bottom")
        width_px = max(self.plot.width(), 100)
        levels = axis.tickSpacing(0, top, width_px)
        if not levels:
            return
        # the finest level the axis draws whose lines stay at least 40 px apart
        roomy = [spacing for spacing, _ in levels if spacing / top * width_px >= 40]
        step = roomy[-1] if roomy else levels[0][0]
        n_rows = len(getattr(self, "_labels", None) or ()) or 1
        grey = QColor(self._fg)
        grey.setAlpha(40)
        pen, brush = QPen(grey, 0), QBrush(Qt.BrushStyle.NoBrush)
        lines: list[Rect] = []
        x = step
        while x < top:
            lines.append((QRectF(x, -0.6, 0.0, n_rows), brush, pen))
            x += step
        self.grid.set_rects(lines)

    def _on_view_resized(self, *_args: object) -> None:
        width = self.plot.getViewBox().width()
        spec = getattr(self, "spec", None)
        if spec is not None and width != self._view_px:
            self._view_px = width
            self._x_top = None
            self.show_chart(spec)  # type: ignore[attr-defined]

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        # labels keep their pixel size: a new width needs a new x range to hold them
        spec = getattr(self, "spec", None)
        if spec is not None:
            self._x_top = None
            self.show_chart(spec)  # type: ignore[attr-defined]

    def _room_for(self, labels: list[tuple[float, pg.TextItem]], minimum: float) -> float:
        """An x range wide enough that every label, drawn at a fixed pixel size from its
        data position, ends inside the plot: R = x / (1 - label px / plot px). A label
        wider than LABEL_SHARE of the plot breaks onto more lines first."""
        # the plot widget's own width less its y axis: the view box itself is laid out
        # lazily and can still hold the previous size here
        axis = self.plot.getPlotItem().getAxis("left")
        width_px = self.plot.width() - axis.width() - 12
        view_px = self.plot.getViewBox().width()
        if view_px > 0:  # whichever is narrower: one of them can be a step behind
            width_px = min(width_px, view_px)
        width_px = max(width_px, 120)
        top = minimum
        for x, item in labels:
            _wrap_label(item, LABEL_SHARE * width_px)
            share = (item.boundingRect().width() * 1.05 + 20) / width_px
            if share < 0.9:
                top = max(top, x / (1 - share))
        return top

    def _text(self, text: str, x: float, y: float, colour: str | None = None) -> None:
        item = pg.TextItem(text, color=colour or self._fg, anchor=(0, 0.5))
        font = QFont()
        font.setPointSize(9)
        item.setFont(font)
        item.setPos(x, y)
        self.plot.addItem(item)


class _ItemPool:
    """Reuses plot items between redraws: clearing and re-adding items costs more than
    a frame; updating their options does not."""

    def __init__(self, plot: pg.PlotWidget) -> None:
        self._plot = plot
        self._items: dict[object, pg.GraphicsObject] = {}
        self._used: set[object] = set()

    def begin(self) -> None:
        self._used.clear()

    def get(self, key: object, make: Callable[[], pg.GraphicsObject]) -> pg.GraphicsObject:
        item = self._items.get(key)
        if item is None:
            item = make()
            self._items[key] = item
            self._plot.addItem(item)
        item.setVisible(True)
        self._used.add(key)
        return item

    def end(self) -> None:
        for key, item in self._items.items():
            if key not in self._used:
                item.setVisible(False)


def _set_label(item: pg.TextItem, text: str, colour: str) -> None:
    if (getattr(item, "_full", None), getattr(item, "_colour", None)) != (text, colour):
        item.setText(text, color=colour)
        item._full = text  # type: ignore[attr-defined]
        item._colour = colour  # type: ignore[attr-defined]


def _wrap_label(item: pg.TextItem, max_px: float) -> None:
    """Break a label at its ' · ' and double-space seams so that each line fits in
    `max_px` (a label that fits stays on one line)."""
    full = getattr(item, "_full", None) or item.toPlainText()
    metrics = QFontMetricsF(item.textItem.font())
    pieces = [p for chunk in full.split("  ") for p in chunk.split(" · ")]
    lines: list[str] = []
    for piece in pieces:
        if lines and metrics.horizontalAdvance(f"{lines[-1]} · {piece}") <= max_px:
            lines[-1] = f"{lines[-1]} · {piece}"
        else:
            lines.append(piece)
    text = full if metrics.horizontalAdvance(full) <= max_px else "\n".join(lines)
    if item.toPlainText() != text:
        item.setText(text, color=getattr(item, "_colour", None))


def _label(fg: str) -> pg.TextItem:
    item = pg.TextItem("", color=fg, anchor=(0, 0.5))
    font = QFont()
    font.setPointSize(9)
    item.setFont(font)
    return item


class FitChartWidget(PlotWidget):
    """Stacked weights / KV / compute / reserve against each path's limit line."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("GiB", parent)
        self.spec: FitChart | None = None
        self._pool = _ItemPool(self.plot)
        roles = ("weights", "kv", "compute", "projector", "draft", "reserve", "shortfall")
        self.set_legend([(COLOURS[r], SEGMENT_LABELS[r], r == "shortfall") for r in roles])
        self._styles = {r: self._style(r) for r in roles}
        # the margin kept free, drawn so that a bar ending just short of the limit line
        # visibly does not fit
        self.margins = RectsItem(
            z=-1,
            tooltip="Kept free: 5 % of usable memory for allocator rounding and "
            "fragmentation. A bar must end before this zone to fit.",
        )
        self.bars = RectsItem()
        self.shortfalls = RectsItem(z=10)  # an outline past the limit, over the bar
        for item in (self.margins, self.bars, self.shortfalls):
            self.plot.addItem(item)
        self._margin_style = (QBrush(QColor(128, 128, 128, 45)), QPen(Qt.PenStyle.NoPen))

    @staticmethod
    def _style(role: str) -> tuple[QBrush, QPen]:
        colour = QColor(COLOURS[role])
        if role == "shortfall":
            fill = QColor(colour.red(), colour.green(), colour.blue(), 60)
            return QBrush(fill), pg.mkPen(colour, width=2, style=Qt.PenStyle.DashLine)
        return QBrush(colour), pg.mkPen(colour.darker(130))

    def show_chart(self, spec: FitChart) -> None:
        self.spec = spec
        pool = self._pool
        pool.begin()
        n = len(spec.rows)
        labels: list[tuple[float, pg.TextItem]] = []
        bars: list[Rect] = []
        shortfalls: list[Rect] = []
        margins: list[Rect] = []
        for i, row in enumerate(spec.rows):
            y = n - 1 - i
            for seg in row.segments:
                if seg.width_gib <= 0:
                    continue
                h = 0.7 if seg.role == "shortfall" else 0.55
                rect = QRectF(seg.start_gib, y - h / 2, seg.width_gib, h)
                into = shortfalls if seg.role == "shortfall" else bars
                into.append((rect, *self._styles[seg.role]))
            limit = pool.get(
                (i, "limit"),
                lambda: pg.PlotDataItem(
                    [0, 0], [0, 0], pen=pg.mkPen(self._fg, width=2, style=Qt.PenStyle.DashLine)
                ),
            )
            ends = [row.capacity_gib, row.capacity_gib]
            if getattr(limit, "_ends", None) != (ends, y):
                limit.setData(ends, [y - 0.38, y + 0.38])
                limit._ends = (ends, y)
            width = max(row.capacity_gib - row.margin_gib, 0.0)
            margins.append((QRectF(row.margin_gib, y - 0.38, width, 0.76), *self._margin_style))
            end = max((s.start_gib + s.width_gib for s in row.segments), default=0.0)
            badge = "  ★ recommended" if row.recommended else ""
            text = pool.get((i, "text"), lambda: _label(self._fg))
            colour = COLOURS["shortfall"] if row.status == "over" else self._fg
            _set_label(text, f"{STATUS_TEXT[row.status]} · {row.annotation}{badge}", colour)
            x_text = max(end, row.capacity_gib) + spec.x_max_gib * 0.01
            text.setPos(x_text, y)
            labels.append((x_text, text))
        pool.end()
        self._set_rows([r.label for r in spec.rows])
        self._set_x(self._room_for(labels, spec.x_max_gib))
        self.margins.set_rects(margins)
        self.bars.set_rects(bars)
        self.shortfalls.set_rects(shortfalls)


class SpeedChartWidget(PlotWidget):
    """Low–high decode tok/s range per path, or 'unknown' with why."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("decode tok/s", parent)
        self.spec: SpeedChart | None = None
        self._pool = _ItemPool(self.plot)
        # also keeps its rows level with the fit chart's, which has a key line too
        self.set_legend([(COLOURS["speed"], "estimate (dark tick) and its calibrated band", False)])
        speed = QColor(COLOURS["speed"])
        self._band_style = (QBrush(speed), pg.mkPen(speed.darker(140)))
        self._tick_style = (QBrush(speed.darker(170)), QPen(Qt.PenStyle.NoPen))
        self.bands = RectsItem()
        self.ticks = RectsItem(z=1)
        self.plot.addItem(self.bands)
        self.plot.addItem(self.ticks)

    def show_chart(self, spec: SpeedChart) -> None:
        self.spec = spec
        pool = self._pool
        pool.begin()
        n = len(spec.rows)
        labels: list[tuple[float, pg.TextItem]] = []
        bands: list[Rect] = []
        ticks: list[Rect] = []
        for i, row in enumerate(spec.rows):
            y = n - 1 - i
            x_text = 0.0
            if row.known and row.low_tok_s is not None and row.high_tok_s is not None:
                width = max(row.high_tok_s - row.low_tok_s, 0.01)
                bands.append((QRectF(row.low_tok_s, y - 0.2, width, 0.4), *self._band_style))
                x_text = row.high_tok_s
                if row.tok_s is not None:
                    w = spec.x_max_tok_s * 0.006
                    tick = QRectF(row.tok_s - w / 2, y - 0.31, w, 0.62)
                    ticks.append((tick, *self._tick_style))
            text = pool.get((i, "text"), lambda: _label(self._fg))
            _set_label(text, row.annotation, self._fg)
            text.setPos(x_text + spec.x_max_tok_s * 0.01, y)
            labels.append((x_text + spec.x_max_tok_s * 0.01, text))
        pool.end()
        self._set_rows([r.label for r in spec.rows])
        self._set_x(self._room_for(labels, spec.x_max_tok_s))
        self.bands.set_rects(bands)
        self.ticks.set_rects(ticks)
