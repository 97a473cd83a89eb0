"""The Serving tab's chart: decode tokens/s per user and in total against concurrent
users, with the KV pool's limit for full-length requests drawn over it."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from rigspark_gui.core.serving import ServingPlan
from rigspark_gui.ui.charts import PlotWidget

PER_USER = "#1f77b4"
TOTAL = "#2ca02c"


class ServingChartWidget(PlotWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("concurrent users", parent)
        self.plot.setLogMode(x=True, y=False)
        self.plot.setLabel("left", "tokens/s")
        self.right = pg.ViewBox()
        self.plot.showAxis("right")
        self.plot.scene().addItem(self.right)
        self.plot.getAxis("right").linkToView(self.right)
        self.right.setXLink(self.plot)
        self.plot.getAxis("right").setLabel("total tokens/s")
        self.plot.getViewBox().sigResized.connect(self._sync_views)
        self.plan: ServingPlan | None = None

    def _sync_views(self) -> None:
        self.right.setGeometry(self.plot.getViewBox().sceneBoundingRect())

    def clear_plan(self) -> None:
        self.plan = None
        self.plot.clear()
        self.right.clear()
        self.set_legend([])

    def show_plan(self, sp: ServingPlan) -> None:
        self.plan = sp
        self.plot.clear()
        self.right.clear()
        pts = sp.concurrency
        if not pts:
            self.set_legend([])
            return
        xs = [p.users for p in pts]
        self.plot.plot(
            xs, [p.per_user_tok_s for p in pts], pen=pg.mkPen(PER_USER, width=2), symbol="o",
            symbolSize=5, symbolBrush=PER_USER,
        )  # fmt: skip
        total = pg.PlotDataItem(
            [math.log10(x) for x in xs], [p.total_tok_s for p in pts],
            pen=pg.mkPen(TOTAL, width=2), symbol="s", symbolSize=5, symbolBrush=TOTAL,
        )  # fmt: skip
        self.right.addItem(total)
        self.right.setYRange(0, max(p.total_tok_s for p in pts) * 1.08, padding=0)
        self.plot.setYRange(0, max(p.per_user_tok_s for p in pts) * 1.08, padding=0)
        # the last point is the pool's own limit: a round tick just below it would overlap
        shown = [x for x in xs[:-1] if x * 1.3 < xs[-1]] + [xs[-1]]
        ticks = [(math.log10(x), str(x)) for x in shown]
        self.plot.getAxis("bottom").setTicks([ticks, []])
        legend = [(PER_USER, "per user (left)", False), (TOTAL, "total (right)", False)]
        if sp.max_concurrency >= 1:
            limit = pg.InfiniteLine(
                pos=math.log10(sp.max_concurrency),
                angle=90,
                pen=pg.mkPen(self._fg, style=Qt.PenStyle.DashLine),
                label=f"KV pool: {sp.max_concurrency:.1f} full-length requests",
                labelOpts={"position": 0.92, "color": self._fg, "anchors": [(0, 1), (0, 1)]},
            )
            self.plot.addItem(limit)
            legend.append((self._fg, "KV pool limit at max_model_len", True))
        self.set_legend(legend)
        self._sync_views()
