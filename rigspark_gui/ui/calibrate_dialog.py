"""View ▸ Calibrate speed…: time llama.cpp on this machine, with progress and cancel,
then show predicted against measured. Presentation only: the run is
`rigspark_gui.calibrate.run_calibration`, off the GUI thread."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.calibrate import (
    CalibrationCancelled,
    LocalCalibration,
    find_runner,
    run_calibration,
    save_calibration,
)
from rigspark_gui.calibrate.runners import Runner
from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.core.units import speed_text
from rigspark_gui.ui.background import run_in_background

COLUMNS = ("Device", "Quant", "Measured", "Predicted before", "Measured / predicted")


class _Progress(QObject):
    """Carries progress from the worker thread to the dialog (queued connection)."""

    stepped = Signal(int, int, str)


class CalibrateDialog(QDialog):
    calibrated = Signal(object)  # LocalCalibration, saved

    def __init__(self, rig: Rig, prior: SpeedModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Calibrate speed on this machine")
        self.setMinimumWidth(640)
        self.rig, self.prior = rig, prior
        self.runner: Runner | None = None
        self.llama_python: Path | None = None
        self.cancel_event = threading.Event()
        self.result: LocalCalibration | None = None

        intro = QLabel(
            "Times llama.cpp itself on a small synthetic model (Q4_K_M, Q8_0, Q4_0) on the "
            "CPU and on each GPU — under a minute on most machines — and uses the measured "
            "speeds for this machine's devices from then on. RigSpark installs nothing: it "
            "uses llama-bench from your PATH or a Python that has llama-cpp-python."
        )
        intro.setWordWrap(True)
        self.found = QLabel()
        self.found.setWordWrap(True)
        self.found.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.choose = QPushButton("Choose llama.cpp…")
        self.choose.setToolTip("llama-bench, or a Python interpreter with llama-cpp-python")
        self.choose.clicked.connect(self._on_choose)
        found_row = QHBoxLayout()
        found_row.addWidget(self.found, 1)
        found_row.addWidget(self.choose)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.step = QLabel("")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.hide()
        self.buttons = QDialogButtonBox()
        self.start = self.buttons.addButton("&Start", QDialogButtonBox.ButtonRole.AcceptRole)
        self.cancel = self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.close_button = self.buttons.addButton(QDialogButtonBox.StandardButton.Close)
        self.close_button.hide()
        self.start.clicked.connect(self.start_run)
        self.cancel.clicked.connect(self._on_cancel)
        self.close_button.clicked.connect(self.accept)

        box = QVBoxLayout(self)
        box.addWidget(intro)
        box.addLayout(found_row)
        box.addWidget(self.progress)
        box.addWidget(self.step)
        box.addWidget(self.table, 1)
        box.addWidget(self.buttons)
        self._relay = _Progress(self)
        self._relay.stepped.connect(self._on_step)
        self._find()

    def _find(self, bench: Path | None = None) -> None:
        try:
            self.runner = find_runner(bench, self.llama_python)
        except RigSparkError as err:
            self.runner = None
            self.found.setText(str(err))
        else:
            self.found.setText(f"Will use {self.runner.name}.")
        self.start.setEnabled(self.runner is not None)

    @Slot()
    def _on_choose(self) -> None:
        name, _ = QFileDialog.getOpenFileName(self, "llama-bench or a Python with llama-cpp-python")
        if not name:
            return
        path = Path(name)
        if "python" in path.name.lower():
            self.llama_python = path
            self._find()
        else:
            self.llama_python = None
            self._find(bench=path)

    @Slot()
    def start_run(self) -> None:
        runner = self.runner
        if runner is None:
            return
        self.start.setEnabled(False)
        self.choose.setEnabled(False)
        self.cancel_event.clear()
        self.step.setText("Starting…")
        relay, rig, prior, cancel = self._relay, self.rig, self.prior, self.cancel_event

        def op() -> LocalCalibration:
            cal = run_calibration(
                rig,
                runner,
                prior,
                progress=lambda i, n, what: relay.stepped.emit(i, n, what),
                cancel=cancel,
            )
            save_calibration(cal)
            return cal

        run_in_background(self, op, self._on_done, self._on_failed)

    @Slot(int, int, str)
    def _on_step(self, step: int, steps: int, what: str) -> None:
        self.progress.setRange(0, steps)
        self.progress.setValue(step)
        self.step.setText(f"{what}…")

    @Slot()
    def _on_cancel(self) -> None:
        if self.start.isEnabled() or self.runner is None:
            self.reject()  # nothing running: the button closes
            return
        self.cancel_event.set()
        self.step.setText("Cancelling…")

    def _on_done(self, cal: LocalCalibration) -> None:
        self.result = cal
        self.step.setText(f"Done with {cal.llama_cpp}: plans on this machine now use these speeds.")
        self.progress.setValue(self.progress.maximum())
        self.table.setRowCount(len(cal.runs))
        for r, run in enumerate(cal.runs):
            ratio = f"{run.decode_ratio:.2f}" if run.decode_ratio else "–"
            cells = (run.device_name, run.quant, speed_text(run.measured_tok_s),
                     speed_text(run.predicted_tok_s), ratio)  # fmt: skip
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.show()
        self.cancel.hide()
        self.close_button.show()
        self.calibrated.emit(cal)

    def _on_failed(self, err: Exception, _details: str) -> None:
        self.start.setEnabled(self.runner is not None)
        self.choose.setEnabled(True)
        self.progress.setValue(0)
        if isinstance(err, CalibrationCancelled):
            self.step.setText("Cancelled: nothing was kept.")
        else:
            self.step.setText(f"Calibration failed: {err}")
