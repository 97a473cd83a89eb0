"""Paths tab: one row per path with fit, shortfall, speed and the recommended badge."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor, QPalette
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

from rigspark_gui.core.chart_spec import COLOURS, FitChart, SpeedChart, fit_chart, speed_chart
from rigspark_gui.core.plan import SAME_AS_FIT, PathPlan, Plan, Suggestion
from rigspark_gui.core.units import gib, seconds_text, speed_text

if TYPE_CHECKING:
    from rigspark_gui.ui.charts import FitChartWidget, SpeedChartWidget
from rigspark_gui.report.text import auto_rule, path_label
from rigspark_gui.ui.chart_slot import ChartSlot
from rigspark_gui.ui.content_fit import ColumnFit
from rigspark_gui.ui.steady_label import SteadyLabel

MIN_CHARTS_PX = 180  # the charts keep this much height when the table takes its rows
COLUMNS = ("Path", "Verdict", "Quant", "Memory", "Shortfall", "Decode speed", "Prefill", "Reason")


def verdict_text(p: PathPlan, recommended: bool) -> str:
    v = p.verdict
    text = f"{v.mark} {v.value}"
    return f"★ recommended · {text}" if recommended else text


def prefill_text(p: PathPlan) -> str:
    f = p.prefill
    if not f.known or f.seconds is None:
        return "unknown"
    return f"{seconds_text(f.seconds, f.low_seconds, f.high_seconds)} for {f.prompt_tokens} tokens"


def ladder_tip(p: PathPlan) -> str:
    """The path's quality/speed ladder for a tooltip: every quantization that fits."""
    if not p.ladder:
        return ""
    lines = [
        f"  {o.quant:<8} {speed_text(o.tok_s)}" + (f"  {o.quality.words}" if o.quality else "")
        for o in p.ladder
    ]
    return "\nFits on this path (best quality first):\n" + "\n".join(lines)


def ladder_chips(p: PathPlan, chip_colour: str) -> str:
    """The path's ladder as a line of chips at the normal font size (rich text): each
    quantization that fits with its decode speed, best quality first, the chosen one
    bold. Chips break between each other, never inside one."""
    chips = []
    for o in p.ladder:
        text = escape(f"{o.quant} {speed_text(o.tok_s)}").replace(" ", "&nbsp;")
        if o.quant == p.quant:
            text = f"<b>{text}</b>"
        chips.append(f"<span style='background-color:{chip_colour}'>&nbsp;{text}&nbsp;</span>")
    return "Fits on this path, best quality first: " + " &nbsp;".join(chips)


def _fit_widget() -> FitChartWidget:
    from rigspark_gui.ui.charts import FitChartWidget

    return FitChartWidget()


def _speed_widget() -> SpeedChartWidget:
    from rigspark_gui.ui.charts import SpeedChartWidget

    return SpeedChartWidget()


class PathsTab(QWidget):
    suggestion_chosen = Signal(object)  # Suggestion
    undo_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = SteadyLabel()
        # every quantization that fits on the recommended path, as chips
        self.ladder = SteadyLabel()
        self.ladder.hide()
        # what would it take: a few changes that buy a better quantization, one click each
        self.suggestions = QLabel()
        self.suggestions.setWordWrap(True)
        self.suggestions.setTextFormat(Qt.TextFormat.RichText)
        self.suggestions.setTextInteractionFlags(
            Qt.TextInteractionFlag.LinksAccessibleByMouse
            | Qt.TextInteractionFlag.LinksAccessibleByKeyboard
        )
        self.suggestions.linkActivated.connect(self._on_suggestion_link)
        self.suggestions.hide()
        self.ideas: tuple[Suggestion, ...] = ()
        # smaller models that reach the minimum speed where this one does not
        self.smaller: tuple[Suggestion, ...] = ()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        # columns fit their text once per plan (resizeColumnsToContents below): measuring
        # every row again on each changed cell, as ResizeToContents does, cost a frame
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        # no sideways scrolling: long cells wrap at spaces, with the full text as tooltip
        self.columns = ColumnFit(self.table)
        self.columns.fitted.connect(self._fit_table_height)
        # the charts are built once the window is on screen (see ChartSlot)
        self._fit_spec: FitChart | None = None
        self._state_bytes = 0  # the shown plan's recurrent state (hybrid models)
        self._speed_spec: SpeedChart | None = None
        self.fit_slot = ChartSlot(_fit_widget, self._fit_ready)
        self.speed_slot = ChartSlot(_speed_widget, self._speed_ready)
        charts = QSplitter(Qt.Orientation.Horizontal)
        charts.addWidget(self.fit_slot)
        charts.addWidget(self.speed_slot)
        charts.setSizes([640, 360])
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(charts)
        split.addWidget(self.table)
        split.setSizes([300, 200])
        # the table is as tall as its rows until the user moves the divider
        self.split = split
        self._split_by_hand = False
        split.splitterMoved.connect(self._on_split_splitter_moved)
        split.installEventFilter(self)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.ladder)
        layout.addWidget(self.suggestions)
        layout.addWidget(split, 1)

    @property
    def fit_chart(self) -> FitChartWidget:
        return self.fit_slot.chart()

    @property
    def speed_chart(self) -> SpeedChartWidget:
        return self.speed_slot.chart()

    def _fit_ready(self, chart: FitChartWidget) -> None:
        if self._fit_spec is not None:
            chart.show_chart(self._fit_spec)

    def _speed_ready(self, chart: SpeedChartWidget) -> None:
        if self._speed_spec is not None:
            chart.show_chart(self._speed_spec)

    def show_suggestions(
        self, ideas: Sequence[Suggestion], undo_text: str = "", smaller: Sequence[Suggestion] = ()
    ) -> None:
        """Under the verdict: each change with what it buys and costs, a link to apply it;
        then the smaller models that reach the minimum speed, a link to plan each."""
        self.ideas = tuple(ideas)
        self.smaller = tuple(smaller)

        def link(i: int, idea: Suggestion) -> str:
            q = idea.quality.words if idea.quality is not None else ""
            buys = f"{idea.quant}" + (f" — {q}" if q else "") + f" on {idea.path}"
            if idea.tok_s is not None:
                buys += f", {speed_text(idea.tok_s)}"
            return (
                f"<a href='apply:{i}'>{escape(idea.change)}</a> → {escape(buys)} "
                f"<span style='color:gray'>({escape(idea.cost)})</span>"
            )

        parts = [link(i, idea) for i, idea in enumerate(self.ideas)]
        models = [link(len(self.ideas) + i, idea) for i, idea in enumerate(self.smaller)]
        html = ""
        if parts:
            html = "<b>What would it take:</b> " + " &nbsp;·&nbsp; ".join(parts)
        if models:
            html += ("<br>" if html else "") + "<b>Smaller models fast enough:</b> "
            html += " &nbsp;·&nbsp; ".join(models)
        if undo_text:
            html += ("<br>" if html else "") + (f"{escape(undo_text)} <a href='undo'>Undo</a>")
        self.suggestions.setText(html)
        self.suggestions.setVisible(bool(html))

    def _on_suggestion_link(self, link: str) -> None:
        if link == "undo":
            self.undo_requested.emit()
        elif link.startswith("apply:"):
            i = int(link.removeprefix("apply:"))
            every = self.ideas + self.smaller
            if 0 <= i < len(every):
                self.suggestion_chosen.emit(every[i])

    def show_plan(self, plan: Plan, warnings: Sequence[str] = ()) -> None:
        rec = plan.recommended
        if rec is not None:
            p = next(x for x in plan.paths if x.path is rec)
            t = p.throughput
            speed = speed_text(t.tok_s, t.low_tok_s, t.high_tok_s) if t.known else "speed unknown"
            loss = f" ({p.quality.words})" if p.quality is not None else ""
            # Rich text: the model name comes from a file anyone may have written.
            text = (
                f"<b>{escape(plan.model_name)}</b> runs on the <b>{escape(path_label(p))}</b> "
                f"path at <b>{escape(p.quant or '')}</b>{escape(loss)} — "
                f"{gib(p.required_bytes)} of {gib(p.usable_bytes)}, {escape(speed)}."
            )
            if p.choice:
                text += f"<br>{escape(p.choice)}."
            if p.cpu_loading is not None and p.cpu_loading.flag:
                text += f"<br>{escape(p.cpu_loading.note)}."
            self._show_ladder(p)
            self.summary.setToolTip(auto_rule(plan.settings))
        else:
            self._show_ladder(None)
            text = (
                f"<b>{escape(plan.model_name)}</b> does not fit this rig at this context "
                "on any path."
            )
        if plan.fit_summary and plan.fit is not None:
            # as the engine runs it (llama.cpp's fit), beside RigSpark's own plan: a line
            # of its own where the two differ, else in the tooltip
            tip = f"{auto_rule(plan.settings)}\n{plan.fit_summary}"
            self.summary.setToolTip(tip)
            if not plan.fit_summary.startswith(SAME_AS_FIT):
                text += f"<br><span style='color:gray'>{escape(plan.fit_summary)}</span>"
        if warnings:
            lines = "".join(f"<br>⚠ {escape(w)}" for w in warnings)
            text += f"<span style='color:{COLOURS['kv']}'>{lines}</span>"
        self.summary.setText(text)
        self._fit_spec, self._speed_spec = fit_chart(plan), speed_chart(plan)
        if self.fit_slot.ready:
            self.fit_chart.show_chart(self._fit_spec)
        if self.speed_slot.ready:
            self.speed_chart.show_chart(self._speed_spec)
        # a hybrid model's recurrent state: the same on every path (f32, per sequence)
        self._state_bytes = sum(d.state_bytes for d in plan.device_loads)
        changed = self.table.rowCount() != len(plan.paths)
        self.table.setRowCount(len(plan.paths))
        for r, p in enumerate(plan.paths):
            changed |= self._fill_row(r, p, rec is p.path)
        if changed:
            self.columns.refit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.split and event.type() == QEvent.Type.Resize:
            QTimer.singleShot(0, self, self._fit_table_height)  # once the splitter is sized
        return super().eventFilter(watched, event)

    def _on_split_splitter_moved(self, _pos: int, _index: int) -> None:
        self._split_by_hand = True

    def _fit_table_height(self) -> None:
        """Every path's row in view, the charts above taking the rest (at least
        MIN_CHARTS_PX): the table neither scrolls nor stands half empty."""
        total = sum(self.split.sizes())
        if self._split_by_hand or total <= 0:
            return
        rows = self.table.verticalHeader()
        needed = sum(rows.sectionSize(r) for r in range(self.table.rowCount()))
        needed += 2 * self.table.frameWidth() + self.table.horizontalHeader().height() + 2
        table = max(min(needed, total - MIN_CHARTS_PX), min(needed, total // 3))
        if self.split.sizes()[1] != table:
            self.split.setSizes([total - table, table])

    def _show_ladder(self, p: PathPlan | None) -> None:
        """The recommended path's ladder as chips. The line stays while a path is
        recommended (the quick plan knows its choice only; the full ladder follows), so
        a change of context does not move the layout."""
        if p is None or not p.ladder:
            self.ladder.setVisible(False)
            return
        chip = self.palette().color(QPalette.ColorRole.AlternateBase)
        if chip == self.palette().color(QPalette.ColorRole.Base):
            chip = self.palette().color(QPalette.ColorRole.Midlight)
        self.ladder.setText(ladder_chips(p, chip.name()))
        self.ladder.setToolTip(ladder_tip(p).strip())
        self.ladder.setVisible(True)

    def _fill_row(self, r: int, p: PathPlan, recommended: bool) -> bool:
        """Fill one row; True when a cell's text changed (the columns may need to grow)."""
        b = p.breakdown
        state = self._state_bytes if p.serving is None else 0  # llama.cpp paths only
        kv = f"KV cache {b.kv_bytes:,} B\n"
        if state:
            kv = (
                f"KV cache {b.kv_bytes - state:,} B\nrecurrent state {state:,} B (f32 per "
                "sequence, whatever the KV cache type)\n"
            )
        exact = (
            f"weights {b.weights_bytes:,} B\n{kv}"
            f"compute buffer {b.compute_bytes:,} B (estimate)\nreserve {b.reserve_bytes:,} B\n"
            f"required {p.required_bytes:,} B of usable {p.usable_bytes:,} B"
        )
        if p.cpu_loading is not None:
            # both figures: as planned, and as llama.cpp holds it with the file mapped
            load = p.cpu_loading
            exact += (
                f"\n\n{load.note}.\nas planned{' (' + load.flag + ')' if load.flag else ''}: "
                f"{load.required_bytes:,} B\nwith the file mapped (llama.cpp's default): "
                f"{load.mapped_required_bytes:,} B"
            )
        t = p.throughput
        speed = speed_text(t.tok_s, t.low_tok_s, t.high_tok_s) if t.known else "unknown"
        cells = [
            (
                path_label(p),
                f"devices: {', '.join(p.devices)}"
                + (f"\n-ngl {p.ngl}" if p.ngl is not None else ""),
            ),
            (
                verdict_text(p, recommended),
                "fits · tight (under 10 % of usable memory to spare) · does not fit; "
                "5 % of usable memory is always kept free",
            ),
            (
                f"{p.quant} · {p.quality.words}" if p.quant and p.quality else p.quant or "–",
                (f"{p.quality.label}\n{p.quality.basis}\n\n" if p.quality else "")
                + (p.choice or "the best quality that fits at the minimum speed")
                + ladder_tip(p),
            ),
            (f"{gib(p.required_bytes)} / {gib(p.usable_bytes)}", exact),
            (
                f"needs {gib(p.shortfall_bytes)} more" if p.shortfall_bytes else "–",
                f"{p.shortfall_bytes:,} B more usable memory before {p.quant} fits"
                if p.shortfall_bytes
                else "",
            ),
            (speed, t.basis + ladder_tip(p)),
            (prefill_text(p), p.prefill.basis),
            (
                p.reason.words if p.reason else "",
                f"{p.reason.words}: what limits this path ({p.reason.value})" if p.reason else "",
            ),
        ]
        changed = False
        for c, (text, tip) in enumerate(cells):
            item = self.table.item(r, c)
            if item is None:
                item = QTableWidgetItem()
                self.table.setItem(r, c, item)
            if item.text() != text:  # an unchanged cell is not measured and repainted
                item.setText(text)
                changed = True
            if item.toolTip() != tip:
                item.setToolTip(tip)
            if c == 1:
                colour = QColor(COLOURS["compute"] if p.fits else COLOURS["shortfall"])
                if item.foreground().color() != colour:
                    item.setForeground(QBrush(colour))
        return changed
