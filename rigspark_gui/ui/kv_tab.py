"""KV precision tab: every K/V pair side by side, and memory against context.

The comparison (a largest-context search per pair and path) runs in the background;
the table fills in when it is ready. Activating a row applies that K/V choice.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.core.chart_spec import kv_chart_types, kv_memory_chart
from rigspark_gui.core.model import KvCacheType
from rigspark_gui.core.plan import KvComparisonRow, Plan, kv_comparison
from rigspark_gui.core.units import gib, human_bytes, tokens
from rigspark_gui.ui.background import run_in_background
from rigspark_gui.ui.chart_slot import ChartSlot
from rigspark_gui.ui.session import PlannerSession

if TYPE_CHECKING:
    from rigspark_gui.ui.kv_chart import KvChartWidget

CURVE_TYPES = (KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q5_0, KvCacheType.Q4_0)


def _kv_chart() -> KvChartWidget:
    from rigspark_gui.ui.kv_chart import KvChartWidget

    return KvChartWidget()


class KvTab(QWidget):
    pair_chosen = Signal(object, object)  # KvCacheType K, V

    def __init__(self, session: PlannerSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._key: object = None
        self._generation = 0
        self.rows: tuple[KvComparisonRow, ...] = ()
        self.status = QLabel("KV comparison appears once a model and a rig are set.")
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, 0)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSortingEnabled(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.cellActivated.connect(self._on_activated)
        self.table.cellDoubleClicked.connect(self._on_activated)
        self.chart_slot = ChartSlot(_kv_chart)  # pyqtgraph is imported when first shown
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.chart_slot)
        split.setSizes([320, 260])
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(split, 1)
        hint = QLabel("Double-click or press Enter on a row to use that K/V pair.")
        hint.setEnabled(False)
        layout.addWidget(hint)

    @property
    def chart(self) -> KvChartWidget:
        return self.chart_slot.chart()

    def show_plan(self, plan: Plan) -> None:
        spec, rig = self.session.spec, self.session.rig
        if spec is None or rig is None:
            return
        s = plan.settings
        self.chart.show_chart(kv_memory_chart(spec, plan, kv_chart_types(s)))
        key = (
            spec.id,
            rig,
            replace(s, kv_k=KvCacheType.F16, kv_v=KvCacheType.F16),
        )
        if key == self._key:
            self._select_current()
            return
        self._key = key
        self._generation += 1
        gen = self._generation
        paths = plan.paths
        self.status.setText("Comparing every K/V pair…")
        run_in_background(
            self,
            lambda: kv_comparison(spec, rig, s, paths, all_pairs=True),
            lambda rows: self._on_rows(gen, rows),
            lambda err, _d: self.status.setText(f"KV comparison failed: {err}"),
        )

    def _on_rows(self, gen: int, rows: tuple[KvComparisonRow, ...]) -> None:
        if gen != self._generation:
            return  # a newer request is on its way
        self.rows = rows
        paths = [lim.path.value for lim in rows[0].limits] if rows else []
        headers = [
            "K",
            "V",
            "Flash attn",
            "Per token",
            "At this context",
            *(f"Max context: {p}" for p in paths),
        ]
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = [
                (row.kv_k.value, ""),
                (row.kv_v.value, ""),
                (
                    "on" if row.flash_attn else "off",
                    "a quantized V cache needs flash attention" if row.kv_v.quantized else "",
                ),
                (human_bytes(row.bytes_per_token), f"{row.bytes_per_token:,} B per token"),
                (gib(row.kv_bytes, 2), f"{row.kv_bytes:,} B at the current context"),
            ]
            for lim in row.limits:
                text = f"{lim.max_context:,}" if lim.max_context else "does not fit"
                cells.append(
                    (
                        text,
                        f"largest context (step 256) that fits on {lim.path.value} at {lim.quant}",
                    )
                )
            for c, (text, tip) in enumerate(cells):
                item = QTableWidgetItem(text)
                if tip:
                    item.setToolTip(tip)
                if c >= 3:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.table.setItem(r, c, item)
        self.status.setText(
            f"{len(rows)} K/V pairs for {self.session.spec.name if self.session.spec else ''} "
            f"at {tokens(self.session.settings.context)} context."
        )
        self._select_current()

    def _select_current(self) -> None:
        s = self.session.settings
        for r, row in enumerate(self.rows):
            if row.kv_k is s.kv_k and row.kv_v is s.kv_v:
                self.table.blockSignals(True)
                self.table.selectRow(r)
                self.table.blockSignals(False)
                return

    def _on_activated(self, r: int, _c: int) -> None:
        if 0 <= r < len(self.rows):
            row = self.rows[r]
            self.pair_chosen.emit(row.kv_k, row.kv_v)
