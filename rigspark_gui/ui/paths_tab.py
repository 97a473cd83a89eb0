"""Paths tab: one row per path with fit, shortfall, speed and the recommended badge."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
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
from rigspark_gui.core.plan import PathPlan, Plan, Suggestion
from rigspark_gui.core.units import gib, seconds_text, speed_text

if TYPE_CHECKING:
    from rigspark_gui.ui.charts import FitChartWidget, SpeedChartWidget
from rigspark_gui.report.text import auto_rule, path_label
from rigspark_gui.ui.chart_slot import ChartSlot
from rigspark_gui.ui.steady_label import SteadyLabel

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
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        # columns fit their text once per plan (resizeColumnsToContents below): measuring
        # every row again on each changed cell, as ResizeToContents does, cost a frame
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        # the charts are built once the window is on screen (see ChartSlot)
        self._fit_spec: FitChart | None = None
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
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
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

    def show_suggestions(self, ideas: Sequence[Suggestion], undo_text: str = "") -> None:
        """Under the verdict: each change with what it buys and costs, a link to apply it."""
        self.ideas = tuple(ideas)
        parts = []
        for i, idea in enumerate(self.ideas):
            q = idea.quality.words if idea.quality is not None else ""
            buys = f"{idea.quant}" + (f" — {q}" if q else "") + f" on {idea.path}"
            if idea.tok_s is not None:
                buys += f", {speed_text(idea.tok_s)}"
            parts.append(
                f"<a href='apply:{i}'>{escape(idea.change)}</a> → {escape(buys)} "
                f"<span style='color:gray'>({escape(idea.cost)})</span>"
            )
        html = ""
        if parts:
            html = "<b>What would it take:</b> " + " &nbsp;·&nbsp; ".join(parts)
        if undo_text:
            html += ("<br>" if html else "") + (f"{escape(undo_text)} <a href='undo'>Undo</a>")
        self.suggestions.setText(html)
        self.suggestions.setVisible(bool(html))

    def _on_suggestion_link(self, link: str) -> None:
        if link == "undo":
            self.undo_requested.emit()
        elif link.startswith("apply:"):
            i = int(link.removeprefix("apply:"))
            if 0 <= i < len(self.ideas):
                self.suggestion_chosen.emit(self.ideas[i])

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
            if len(p.ladder) > 1:
                rungs = " · ".join(f"{o.quant} {speed_text(o.tok_s)}" for o in p.ladder)
                text += f"<br><small>Fits on this path: {escape(rungs)}</small>"
            self.summary.setToolTip(auto_rule(plan.settings))
        else:
            text = (
                f"<b>{escape(plan.model_name)}</b> does not fit this rig at this context "
                "on any path."
            )
        if warnings:
            lines = "".join(f"<br>⚠ {escape(w)}" for w in warnings)
            text += f"<span style='color:{COLOURS['kv']}'>{lines}</span>"
        self.summary.setText(text)
        self._fit_spec, self._speed_spec = fit_chart(plan), speed_chart(plan)
        if self.fit_slot.ready:
            self.fit_chart.show_chart(self._fit_spec)
        if self.speed_slot.ready:
            self.speed_chart.show_chart(self._speed_spec)
        changed = self.table.rowCount() != len(plan.paths)
        self.table.setRowCount(len(plan.paths))
        for r, p in enumerate(plan.paths):
            changed |= self._fill_row(r, p, rec is p.path)
        if changed:
            self.table.resizeColumnsToContents()

    def _fill_row(self, r: int, p: PathPlan, recommended: bool) -> bool:
        """Fill one row; True when a cell's text changed (the columns may need to grow)."""
        b = p.breakdown
        exact = (
            f"weights {b.weights_bytes:,} B\nKV cache {b.kv_bytes:,} B\n"
            f"compute buffer {b.compute_bytes:,} B (estimate)\nreserve {b.reserve_bytes:,} B\n"
            f"required {p.required_bytes:,} B of usable {p.usable_bytes:,} B"
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
                f"what limits this path ({p.reason.value})" if p.reason else "",
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
