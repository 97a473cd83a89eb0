"""KV precision tab: the K/V pairs the engine runs side by side, and memory against
context.

The comparison (a largest-context search per pair and path, every path held to the
plan's recommended quantization) runs in the background; the table fills in when it is
ready. The common pairs show first; "Show all" adds the rest. Activating a row applies
that K/V choice.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.core.chart_spec import COLOURS, kv_chart_types, kv_memory_chart
from rigspark_gui.core.model import KvCacheType, ModelSpec, loss_words
from rigspark_gui.core.plan import (
    COMMON_KV_PAIRS,
    KvComparisonRow,
    Plan,
    kv_comparison,
    rig_beside,
)
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import Backend, PlanSettings
from rigspark_gui.core.units import gib, human_bytes, tokens
from rigspark_gui.ui.background import run_in_background
from rigspark_gui.ui.chart_slot import ChartSlot
from rigspark_gui.ui.content_fit import ColumnFit
from rigspark_gui.ui.session import PlannerSession

if TYPE_CHECKING:
    from rigspark_gui.ui.kv_chart import KvChartWidget

NOTICE_MS = 8000  # how long a refused choice's reason stays up
# the speed-note column's words for a pair whose flash attention is not the GPUs' own
# kernel (KvComparisonRow.fa_where)
FA_MARKS = {
    "gpu-f16": "⚠ slower decode (K/V copied to f16)",
    "cpu": "⚠ attention on the CPU",
    "fails": "⚠ llama.cpp aborts",
}


def _kv_chart() -> KvChartWidget:
    from rigspark_gui.ui.kv_chart import KvChartWidget

    return KvChartWidget()


def _comparison(
    plan: Plan, spec: ModelSpec, rig: Rig, s: PlanSettings
) -> tuple[tuple[KvComparisonRow, ...], str]:
    """Every pair the engine runs, with the measured quality costs and their basis."""
    from rigspark_gui.catalog.quality import load_quality

    quality = load_quality()
    rows = kv_comparison(
        spec,
        rig_beside(rig, plan.projector, plan.draft),  # set aside first, as the plan did
        s,
        plan.paths,
        all_pairs=True,
        recommended=plan.recommended,
        kv_kld=quality.kv_kld,
    )
    return rows, quality.kv_basis


class KvTab(QWidget):
    pair_chosen = Signal(object, object)  # KvCacheType K, V

    def __init__(self, session: PlannerSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._key: object = None
        self._generation = 0
        self._backend: Backend | None = None  # the engine the rows are for
        self._basis = ""
        self._more = False
        self.rows: tuple[KvComparisonRow, ...] = ()
        self.status = QLabel("KV comparison appears once a model and a rig are set.")
        self.status.setWordWrap(True)
        self.show_all = QCheckBox("Show all pairs")
        self.show_all.setToolTip(
            "The common pairs show first; this adds every other pair the engine accepts "
            "(f32 last: twice f16's memory for no measurable gain)"
        )
        self.show_all.toggled.connect(self._on_show_all_toggled)
        self.show_all.hide()
        self.notice = QLabel()
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet(f"color: {COLOURS['kv']};")
        self.notice.hide()
        self._notice_timer = QTimer(self)
        self._notice_timer.setSingleShot(True)
        self._notice_timer.setInterval(NOTICE_MS)
        self._notice_timer.timeout.connect(self.notice.hide)
        self.table = QTableWidget(0, 0)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSortingEnabled(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        # no sideways scrolling: the speed note wraps, whole in its tooltip
        self.columns = ColumnFit(self.table, keep=(0, 1))
        self.table.cellActivated.connect(self._on_activated)
        self.table.cellDoubleClicked.connect(self._on_activated)
        self.chart_slot = ChartSlot(_kv_chart)  # pyqtgraph is imported when first shown
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.chart_slot)
        split.setSizes([300, 300])
        top = QHBoxLayout()
        top.addWidget(self.status, 1)
        top.addWidget(self.show_all, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.notice)
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
            plan.recommended,
            tuple(p.quant for p in plan.paths if p.path is plan.recommended),
        )
        if key == self._key:
            self._select_current()
            return
        self._key = key
        self._generation += 1
        gen = self._generation
        if self._backend is not s.backend:
            # another engine's pairs are not offered while this one's are worked out
            self._show_rows((), s.backend)
        self.status.setText(f"Comparing the K/V pairs {s.backend.label} runs…")
        run_in_background(
            self,
            lambda: _comparison(plan, spec, rig, s),
            lambda result: self._on_rows(gen, s.backend, result),
            lambda err, _d: self.status.setText(f"KV comparison failed: {err}"),
        )

    def _on_rows(
        self, gen: int, backend: Backend, result: tuple[tuple[KvComparisonRow, ...], str]
    ) -> None:
        if gen != self._generation:
            return  # a newer request is on its way
        rows, self._basis = result
        self._show_rows(rows, backend)
        quant = next((lim.quant for r in rows for lim in r.limits if lim.quant), None)
        spec = self.session.spec
        name = spec.name if spec is not None else ""
        at = f" with the weights at {quant} (the recommended quantization)" if quant else ""
        mm = self.session.plan.projector if self.session.plan is not None else None
        room = (
            f", beside the projector ({gib(mm.device_bytes, 2)} on {mm.device}; Text only frees it)"
            if mm is not None
            else ""
        )
        state = rows[0].state_bytes if rows else 0
        # a hybrid model's recurrent state: the same under every pair (f32)
        beside = (
            f" Beside it, {gib(state, 2)} of recurrent state (f32, per sequence) that no "
            "cache type changes."
            if state
            else ""
        )
        self.status.setText(
            f"The K/V cache pairs {backend.label} runs, for {name} at "
            f"{tokens(self.session.settings.context)} context. Max context: the largest "
            f"each path holds{at}{room}.{beside}"
        )
        self._select_current()

    def _show_rows(self, rows: tuple[KvComparisonRow, ...], backend: Backend) -> None:
        self.rows = rows
        self._backend = backend
        paths = [lim.path.value for lim in rows[0].limits] if rows else []
        headers = [
            "K / V",
            "Quality",
            f"KV cache\nat {tokens(self.session.settings.context)}",
            *(f"Max context\n{p}" for p in paths),
            "Speed note",
        ]
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(rows))
        grey = QBrush(QColor("#808080"))
        for r, row in enumerate(rows):
            for c, (text, tip) in enumerate(self._cells(row)):
                item = QTableWidgetItem(text)
                if tip:
                    item.setToolTip(tip)
                if 2 <= c < len(headers) - 1:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                if c == 1 and row.kv_kld is None:
                    item.setForeground(grey)
                self.table.setItem(r, c, item)
        common = sum(1 for row in rows if (row.kv_k, row.kv_v) in COMMON_KV_PAIRS)
        self._more = 0 < common < len(rows)  # pairs beyond the common ones
        self.show_all.setVisible(self._more)
        self.show_all.setText(f"Show all {len(rows)} pairs")
        self._apply_filter()
        self.columns.refit()

    def _cells(self, row: KvComparisonRow) -> list[tuple[str, str]]:
        fa = "flash attention on" if row.flash_attn else "flash attention off"
        if row.kv_v.quantized:
            fa += " (a quantized V cache needs it)"
        if row.kv_kld is None:
            quality = ("not measured", "The quality cost of this pair is not measured.")
        else:
            basis = f"\n{self._basis}" if self._basis else ""
            quality = (
                loss_words(row.kv_kld),
                f"KL divergence against an f16 cache ≈ {row.kv_kld:.2g}{basis}",
            )
        pair = f"{row.kv_k.value} / {row.kv_v.value}"
        tip = f"K {row.kv_k.value}, V {row.kv_v.value}; {fa}"
        if not row.advised:
            pair = f"⚠ {pair}"
            tip += f"\nNot advised on this rig: {row.speed_note}"
        cells = [
            (pair, tip),
            quality,
            (
                gib(row.kv_bytes, 2),
                f"{human_bytes(row.bytes_per_token)} per token ({row.bytes_per_token:,} B); "
                f"{row.kv_bytes:,} B at the current context"
                + (
                    f"\nplus {row.state_bytes:,} B of recurrent state on the linear-attention / "
                    "Mamba / conv layers: f32, the same under every cache type"
                    if row.state_bytes
                    else ""
                ),
            ),
        ]
        for lim in row.limits:
            text = f"{lim.max_context:,}" if lim.max_context else "does not fit"
            at = f" with the weights at {lim.quant}" if lim.quant else ""
            cells.append(
                (text, f"the largest context (step 256) that fits on {lim.path.value}{at}")
            )
        note = row.speed_note
        cells.append((FA_MARKS.get(row.fa_where, note), note))
        return cells

    def _apply_filter(self) -> None:
        every = self.show_all.isChecked() or not self._more
        for r, row in enumerate(self.rows):
            common = (row.kv_k, row.kv_v) in COMMON_KV_PAIRS
            self.table.setRowHidden(r, not (every or common))

    def _on_show_all_toggled(self, _checked: bool) -> None:
        self._apply_filter()
        self.columns.refit()

    def _select_current(self) -> None:
        s = self.session.settings
        for r, row in enumerate(self.rows):
            if row.kv_k is s.kv_k and row.kv_v is s.kv_v:
                if self.table.isRowHidden(r):
                    self.table.setRowHidden(r, False)  # the pair in use always shows
                self.table.blockSignals(True)
                self.table.selectRow(r)
                self.table.blockSignals(False)
                return

    def _on_activated(self, r: int, _c: int) -> None:
        if not 0 <= r < len(self.rows):
            return
        row = self.rows[r]
        problem = self.session.settings.backend.kv_problem(row.kv_k, row.kv_v)
        if problem is not None:
            # said here, once, and gone: the plan and the other tabs stay as they are
            self.notice.setText(f"Not applied: {problem}.")
            self.notice.show()
            self._notice_timer.start()
            return
        self.notice.hide()
        self.pair_chosen.emit(row.kv_k, row.kv_v)
