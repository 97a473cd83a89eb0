"""Serving tab (vLLM, SGLang): the engine's knobs, its own start-up figures, each GPU as
the engine divides it, throughput against concurrent users, and the launch scripts."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.core.plan import Plan
from rigspark_gui.core.serving import ServingPlan
from rigspark_gui.core.settings import Backend, PlanSettings
from rigspark_gui.report.text import SERVING_COLUMNS, serving_gpu_row, serving_summary
from rigspark_gui.ui.chart_slot import ChartSlot
from rigspark_gui.ui.session import PlannerSession

if TYPE_CHECKING:
    from rigspark_gui.ui.serving_chart import ServingChartWidget


def _serving_chart() -> ServingChartWidget:
    from rigspark_gui.ui.serving_chart import ServingChartWidget

    return ServingChartWidget()


def _spin(special: str, top: int, tip: str) -> QSpinBox:
    box = QSpinBox()
    box.setRange(0, top)
    box.setSpecialValueText(special)
    box.setKeyboardTracking(False)  # plan when the number is finished, not per key
    box.setToolTip(tip)
    return box


def engine_lines(sp: ServingPlan) -> str:
    """What the engine prints at start-up (one wording with the CLI and the report)."""
    layout, pool, refusal = serving_summary(sp)
    lines = [f"<b>{escape(layout)}</b>", escape(pool)]
    if refusal:
        lines.append(f'<span style="color:#B03030"><b>{escape(refusal)}</b></span>')
    lines += [escape(f"Note: {n}") for n in sp.notes]
    return "<br>".join(lines)


NOT_SERVING = "Choose vLLM or SGLang as the Backend to plan a server."
NO_START = "No throughput to chart: the engine would not start with these settings."


class ServingTab(QWidget):
    def __init__(self, session: PlannerSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._syncing = False
        self.plan: ServingPlan | None = None

        self.utilization = QDoubleSpinBox()
        self.utilization.setRange(0.0, 1.0)
        self.utilization.setSingleStep(0.01)
        self.utilization.setDecimals(2)
        self.utilization.setSpecialValueText("engine default")
        self.utilization.setKeyboardTracking(False)
        self.utilization.setToolTip(
            "vLLM --gpu-memory-utilization (default 0.9 of total memory) or SGLang "
            "--mem-fraction-static (default from the GPU's memory)"
        )
        self.tp = _spin("auto", 1024, "--tensor-parallel-size: GPUs sharing every layer")
        self.pp = _spin("auto", 1024, "--pipeline-parallel-size: stages of layers, one per host")
        self.seqs = _spin("default", 65536, "vLLM --max-num-seqs / SGLang --max-running-requests")
        self.offload = QDoubleSpinBox()
        self.offload.setRange(0.0, 4096.0)
        self.offload.setSpecialValueText("none")
        self.offload.setSuffix(" GB")
        self.offload.setKeyboardTracking(False)
        self.offload.setToolTip("vLLM --cpu-offload-gb: weights each GPU keeps in RAM")
        knobs = QGridLayout()
        for i, (label, box) in enumerate(
            (
                ("&Memory utilization", self.utilization),
                ("&Tensor parallel", self.tp),
                ("Pipeline &parallel", self.pp),
                ("Max &sequences", self.seqs),
                ("CPU &offload", self.offload),
            )
        ):
            lab = QLabel(label)
            lab.setBuddy(box)
            knobs.addWidget(lab, i // 3, 2 * (i % 3))
            knobs.addWidget(box, i // 3, 2 * (i % 3) + 1)
        knobs.setColumnStretch(6, 1)
        self.utilization.valueChanged.connect(
            lambda v: self._update(memory_utilization=round(v, 2) or None)
        )
        self.tp.valueChanged.connect(lambda v: self._update(tensor_parallel=v or None))
        self.pp.valueChanged.connect(lambda v: self._update(pipeline_parallel=v or None))
        self.seqs.valueChanged.connect(lambda v: self._update(max_num_seqs=v or None))
        self.offload.valueChanged.connect(lambda v: self._update(cpu_offload_gb=v))

        self.summary = QLabel(NOT_SERVING)
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.chart_slot = ChartSlot(_serving_chart)
        self.table = QTableWidget(0, len(SERVING_COLUMNS))
        self.table.setHorizontalHeaderLabels([c for c, _ in SERVING_COLUMNS])
        for i, (_c, tip) in enumerate(SERVING_COLUMNS):
            item = self.table.horizontalHeaderItem(i)
            if item is not None:
                item.setToolTip(tip)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

        self.launch = QPlainTextEdit()
        self.launch.setReadOnly(True)
        self.launch.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.launch.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.copy = QPushButton("&Copy launch scripts")
        self.copy.clicked.connect(self._copy)
        launch_box = QWidget()
        lb = QVBoxLayout(launch_box)
        lb.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        head.addWidget(QLabel("Launch, in order (a script per host):"))
        head.addStretch(1)
        head.addWidget(self.copy)
        lb.addLayout(head)
        lb.addWidget(self.launch)

        # what stands in the chart's place with no serving plan or an engine that would not
        # start: a sentence, never an empty chart (its axes would run from -500 to 500)
        self.no_chart = QLabel(NOT_SERVING)
        self.no_chart.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.no_chart.setEnabled(False)
        self.chart_slot.hide()  # built when there is a server to chart
        chart_box = QWidget()
        cb = QVBoxLayout(chart_box)
        cb.setContentsMargins(0, 0, 0, 0)
        cb.addWidget(self.chart_slot)
        cb.addWidget(self.no_chart)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(chart_box)
        split.addWidget(self.table)
        split.addWidget(launch_box)
        split.setSizes([300, 160, 160])
        layout = QVBoxLayout(self)
        layout.addLayout(knobs)
        layout.addWidget(self.summary)
        layout.addWidget(split, 1)

    @property
    def chart(self) -> ServingChartWidget:
        return self.chart_slot.chart()

    def _update(self, **changes: object) -> None:
        if not self._syncing:
            self.session.update_settings(**changes)

    def show_settings(self, s: PlanSettings) -> None:
        self._syncing = True
        try:
            self.utilization.setValue(s.memory_utilization or 0.0)
            self.tp.setValue(s.tensor_parallel or 0)
            self.pp.setValue(s.pipeline_parallel or 0)
            self.seqs.setValue(s.max_num_seqs or 0)
            self.offload.setValue(s.cpu_offload_gb)
            self.offload.setEnabled(s.backend is Backend.VLLM)
        finally:
            self._syncing = False

    def show_plan(self, plan: Plan) -> None:
        self.show_settings(plan.settings)
        sp = plan.serving
        self.plan = sp
        if sp is None:
            self.summary.setText(NOT_SERVING)
            self.table.setRowCount(0)
            self.launch.setPlainText("")
            if self.chart_slot.ready:
                self.chart.clear_plan()
            self.chart_slot.hide()
            self.no_chart.setText(NOT_SERVING)
            self.no_chart.show()
            return
        self.summary.setText(engine_lines(sp))
        self.chart.show_plan(sp)
        self.chart_slot.setVisible(bool(sp.concurrency))
        self.no_chart.setText(NO_START)
        self.no_chart.setVisible(not sp.concurrency)
        self.table.setRowCount(len(sp.gpus))
        for r, b in enumerate(sp.gpus):
            cells = serving_gpu_row(b)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c >= 2:  # the byte figures
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.table.setItem(r, c, item)
        launch = plan.launch
        text = launch.text if launch is not None else ""
        if launch is not None and launch.notes:
            text += "\n\n" + "\n".join(f"# {n}" for n in launch.notes)
        self.launch.setPlainText(text)

    def _copy(self) -> None:
        QGuiApplication.clipboard().setText(self.launch.toPlainText())
