"""The KV tab's chart: KV cache memory against context for each cache type, with the
memory each path can give it. Its title names the weights' quantization; each usable
line's label goes where `place_line_labels` finds room (no label on another or on a
curve), placed again whenever the plot changes size."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QWidget

from rigspark_gui.core.chart_spec import CURVE_COLOURS, KvChart, place_line_labels
from rigspark_gui.core.units import tokens
from rigspark_gui.ui.charts import PlotWidget


class KvChartWidget(PlotWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("context (tokens)", parent)
        self.plot.setLogMode(x=True, y=False)
        self.plot.setLabel("left", "GiB")
        self.spec: KvChart | None = None
        self.title = QLabel(self)
        self.title.setWordWrap(True)
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        layout = self.layout()
        assert layout is not None
        layout.insertWidget(0, self.title)  # type: ignore[attr-defined]
        self.limit_labels: list[pg.TextItem] = []
        self._placed_for: tuple[float, float] | None = None

    def show_chart(self, spec: KvChart) -> None:
        self.spec = spec
        self.title.setText(spec.title)
        self.title.setVisible(bool(spec.title))
        self.plot.clear()
        self.limit_labels = []
        legend = []
        for curve, colour in zip(spec.curves, CURVE_COLOURS, strict=False):
            self.plot.plot(list(curve.contexts), list(curve.gib), pen=pg.mkPen(colour, width=2))
            legend.append((colour, f"KV {curve.label}", False))
        self.set_legend(legend)
        lo_ctx = min((c.contexts[0] for c in spec.curves), default=256)
        top = max((c.contexts[-1] for c in spec.curves), default=256)
        ticks, n = [], 256
        while n <= top:
            ticks.append((math.log10(n), tokens(n)))
            n *= 4
        self.plot.getAxis("bottom").setTicks([ticks, []])
        self.plot.setXRange(math.log10(lo_ctx), math.log10(max(top, lo_ctx * 2)), padding=0.02)
        self._set_y(0.12)
        font = QFont()
        font.setPointSize(9)
        for line in spec.limits:
            self.plot.addItem(
                pg.InfiniteLine(
                    pos=line.gib, angle=0, pen=pg.mkPen(self._fg, style=Qt.PenStyle.DashLine)
                )
            )
            label = pg.TextItem(f"{line.label} {line.gib:.0f} GiB", color=self._fg)
            label.setFont(font)
            label.textItem.document().setDocumentMargin(1)  # tight: more fit between lines
            label.setZValue(20)
            self.plot.addItem(label)
            self.limit_labels.append(label)
        self._placed_for = None
        self._place_labels()

    def _set_y(self, label_share: float) -> None:
        """A y range with the curves and lines, and a label's height (`label_share` of
        the plot) free below the lowest line and above the highest, so each has a
        side to put its label on."""
        spec = self.spec
        if spec is None:
            return
        values = [v for c in spec.curves for v in c.gib] + [line.gib for line in spec.limits]
        if not values:
            return
        lines = [line.gib for line in spec.limits] or values
        lo, hi = min(values), max(values)
        y0, y1 = lo, hi
        for _ in range(3):  # the room is a share of the range it widens
            span = max(y1 - y0, 1.0)
            y0 = min(lo - 0.04 * span, min(lines) - label_share * span)
            y1 = max(hi + 0.04 * span, max(lines) + label_share * span)
        self.plot.setYRange(y0, y1, padding=0)

    def _on_view_resized(self, *_args: object) -> None:
        self._place_labels()  # the curves keep their data; only the labels move

    def _place_labels(self) -> None:
        """Put each usable line's label where it covers no other label and no curve."""
        spec = self.spec
        if spec is None or not self.limit_labels:
            return
        view = self.plot.getViewBox()
        rect = view.sceneBoundingRect()
        w_px, h_px = rect.width(), rect.height()
        if w_px < 20 or h_px < 20:
            return
        if self._placed_for == (w_px, h_px):
            return
        self._placed_for = (w_px, h_px)
        height_px = max(item.textItem.boundingRect().height() for item in self.limit_labels)
        self._set_y((height_px + 4) / h_px)
        (x0, x1), (y0, y1) = (tuple(map(float, r)) for r in view.viewRange())

        def fx(ctx: float) -> float:
            return (math.log10(ctx) - x0) / (x1 - x0)

        def fy(gib: float) -> float:
            return (gib - y0) / (y1 - y0)

        curves = tuple(
            tuple((fx(c), fy(g)) for c, g in zip(curve.contexts, curve.gib, strict=True))
            for curve in spec.curves
        )
        widths = tuple(
            (item.textItem.boundingRect().width() + 2) / w_px for item in self.limit_labels
        )
        height = height_px / h_px
        where = place_line_labels(
            tuple(fy(line.gib) for line in spec.limits), widths, height, curves
        )
        for item, line, (x, above) in zip(self.limit_labels, spec.limits, where, strict=True):
            item.setAnchor((0, 1) if above else (0, 0))
            item.setPos(x0 + x * (x1 - x0), line.gib)
