"""The KV tab's chart: KV cache memory against context for each cache type, with the
memory each path can give it."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from rigspark_gui.core.chart_spec import CURVE_COLOURS, KvChart
from rigspark_gui.core.units import tokens
from rigspark_gui.ui.charts import PlotWidget


class KvChartWidget(PlotWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("context (tokens)", parent)
        self.plot.setLogMode(x=True, y=False)
        self.plot.setLabel("left", "GiB")
        self.spec: KvChart | None = None

    def show_chart(self, spec: KvChart) -> None:
        self.spec = spec
        self.plot.clear()
        legend = []
        for curve, colour in zip(spec.curves, CURVE_COLOURS, strict=False):
            self.plot.plot(list(curve.contexts), list(curve.gib), pen=pg.mkPen(colour, width=2))
            legend.append((colour, f"KV {curve.label}", False))
        self.set_legend(legend)
        top = max((c.contexts[-1] for c in spec.curves), default=256)
        ticks, n = [], 256
        while n <= top:
            ticks.append((math.log10(n), tokens(n)))
            n *= 4
        self.plot.getAxis("bottom").setTicks([ticks, []])
        values = [v for c in spec.curves for v in c.gib] + [line.gib for line in spec.limits]
        if values:
            # room above the top limit line for its label
            lo, hi = min(values), max(values)
            self.plot.setYRange(lo - 0.04 * (hi - lo), hi + 0.1 * (hi - lo), padding=0)
        for line in spec.limits:
            inf = pg.InfiniteLine(
                pos=line.gib,
                angle=0,
                pen=pg.mkPen(self._fg, style=Qt.PenStyle.DashLine),
                label=f"{line.label} {line.gib:.0f} GiB",
                labelOpts={"position": 0.05, "color": self._fg, "anchors": [(0, 1), (0, 1)]},
            )
            self.plot.addItem(inf)
