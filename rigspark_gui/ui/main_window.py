"""The main window: controls on top, the rig on the left, answers in tabs.

It wires widgets to the PlannerSession and persists what the user chose. Slow work
(hardware detection, model import, catalog ranking, the KV comparison) runs in the
background; planning one model is fast enough to run on every change.

This module holds the window itself: its layout, hardware detection and the RAM
bandwidth measurement, the plan and its suggestions on the tabs, and the window's
state between runs. Its menus are built in window_menus.py, its File flows live in
model_imports.py (`ModelImports`) and plan_reports.py (`PlanReports`), and the plan
choices it remembers in plan_choices.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QCloseEvent, QPaintEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QLabel,
    QMainWindow,
    QProgressBar,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.calibrate import with_local_calibration
from rigspark_gui.catalog.gpu_database import GpuDatabase, load_gpu_database
from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.catalog.projectors import with_catalog_projectors
from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.plan import Plan
from rigspark_gui.core.rig import Cpu, Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.identity import APP_NAME
from rigspark_gui.resources import data_file
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.background import run_in_background
from rigspark_gui.ui.catalog_tab import CatalogTab
from rigspark_gui.ui.controls_bar import ControlsBar
from rigspark_gui.ui.kv_tab import KvTab
from rigspark_gui.ui.model_imports import ModelImports
from rigspark_gui.ui.paths_tab import PathsTab
from rigspark_gui.ui.plan_choices import save_choices, saved_model, saved_settings
from rigspark_gui.ui.plan_reports import PlanReports
from rigspark_gui.ui.rig_rows import plain_note
from rigspark_gui.ui.session import PlannerSession
from rigspark_gui.ui.what_if import WhatIfSuggestions
from rigspark_gui.ui.window_menus import build_menus, follow_tabs
from rigspark_gui.ui.window_shortcuts import WindowShortcuts

if TYPE_CHECKING:
    from PySide6.QtWidgets import (
        QDialog,
        QMessageBox,
        QPlainTextEdit,
        QProgressDialog,
        QPushButton,
        QTextBrowser,
    )

RETRY_BANDWIDTH_MS = 120_000  # a busy machine measures again after two minutes


class MainWindow(QMainWindow):
    # Set by build_menus (window_menus.py):
    import_action: QAction
    open_remote_action: QAction
    reconcile_action: QAction
    add_folder_action: QAction
    open_plan_action: QAction
    export_action: QAction
    open_rig_action: QAction
    save_rig_action: QAction
    bandwidth_action: QAction
    calibrate_action: QAction
    undo_action: QAction
    redo_action: QAction
    view_actions: list[QAction]  # one per tab, in tab order
    window_actions: list[QAction]  # File, View and Help: they work from any focus
    numbers_action: QAction
    shortcuts_action: QAction
    # The dialogs last opened, set where they open (window_menus, model_imports, plan_reports):
    help_box: QMessageBox
    remote_progress: QProgressDialog
    report_dialog: QDialog
    report_browser: QTextBrowser
    restore_plan_button: QPushButton
    text_dialog: QDialog
    text_view: QPlainTextEdit

    def __init__(
        self,
        *,
        rig: Rig | None = None,
        detect_on_start: bool = True,
        settings: QSettings | None = None,
    ) -> None:
        super().__init__()
        # a detected machine measures its RAM bandwidth by itself when none is known yet
        self.auto_bandwidth = detect_on_start
        self.setWindowTitle(APP_NAME)
        from rigspark_gui.ui.window_geometry import fit_to_screen

        fit_to_screen(self)  # 1400×860, or the screen's available area if smaller
        self.qsettings = settings or QSettings()
        self.database = self._load_database()
        catalog_specs, perf = self._load_catalog()
        self.session = PlannerSession(catalog_specs, perf)

        self.controls = ControlsBar(self.session)
        self.controls.model_picker.not_found.connect(
            lambda why: self.statusBar().showMessage(why, 15000)
        )
        self.paths_tab = PathsTab()
        self.kv_tab = KvTab(self.session)
        self.catalog_tab = CatalogTab(self.session)
        from rigspark_gui.ui.layers_tab import LayersTab

        self.layers_tab = LayersTab()
        from rigspark_gui.ui.serving_tab import ServingTab

        self.serving_tab = ServingTab(self.session)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.paths_tab, "&Paths")
        self.tabs.addTab(self.kv_tab, "&KV precision")
        self.tabs.addTab(self.layers_tab, "&Layers")
        self.tabs.addTab(self.catalog_tab, "C&atalog")
        # last, so the other tabs keep their places (and Ctrl+1..4); shown for vLLM/SGLang
        self.tabs.addTab(self.serving_tab, "&Serving")
        self.tabs.setTabVisible(self.tabs.indexOf(self.serving_tab), False)
        self.tabs.currentChanged.connect(self._on_tab_changed)
        self.tabs.setCornerWidget(self.controls.beside, Qt.Corner.TopRightCorner)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #B03030; font-weight: bold;")
        self.problem.hide()

        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.controls)
        layout.addWidget(self.problem)
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        from rigspark_gui.ui.rig_panel import RigPanel

        self.rig_panel = RigPanel(self.database, settings=self.qsettings)
        dock = QDockWidget("Rig", self)
        dock.setObjectName("rig-dock")
        dock.setWidget(self.rig_panel)
        dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        # the window fits from 1024 px: the dock starts wide enough for memory and
        # bandwidth with their basis, and the user can narrow or widen it
        dock.setMinimumWidth(260)
        self.rig_dock = dock

        self.detect_progress = QProgressBar()
        self.detect_progress.setRange(0, 0)
        self.detect_progress.setMaximumWidth(140)
        self.detect_progress.hide()
        self.statusBar().addPermanentWidget(self.detect_progress)

        self.models = ModelImports(self)
        self.reports = PlanReports(self)
        build_menus(self)  # after the rig panel: Edit ▸ Undo acts on its rig's history
        self.session.plan_changed.connect(self._on_plan_changed)
        self.session.plan_failed.connect(self._on_plan_failed)
        self.session.model_changed.connect(lambda _s: self._save_choices())
        self.session.settings_changed.connect(lambda _s: self._save_choices())
        self.session.settings_changed.connect(self._follow_backend)
        self.controls.message.connect(lambda m: self.statusBar().showMessage(m, 8000))
        self.kv_tab.pair_chosen.connect(self._on_kv_pair_chosen)
        self.layers_tab.projector_flags.connect(self._on_pasted_projector)
        self.catalog_tab.model_opened.connect(self._on_catalog_open)
        self.rig_panel.rig_changed.connect(self.session.set_rig)
        self.rig_panel.redetect_requested.connect(self.start_detection)

        self._after_first_paint: list[Callable[[], None]] = []
        self.what_if = WhatIfSuggestions(self)
        # File, View and Help shortcuts work from any field (a line edit claims Ctrl+E)
        self.shortcut_keeper = WindowShortcuts(self, self.window_actions)
        self._restore_choices()
        self.models.restore_imported()
        self._restore_layout()
        open_rig = str(self.qsettings.value("rig/open", "") or "")
        if rig is None and open_rig and Path(open_rig).is_file():
            self.rig_panel.open_rig_file(Path(open_rig))
        if rig is not None:
            self.rig_panel.set_detected(rig)
        elif detect_on_start:
            # after the window is on screen: the probes' imports would delay its first paint
            self._after_first_paint.append(self.start_detection)
        self.local_skipped: list[str] = []
        if detect_on_start:
            self._after_first_paint.append(self.scan_local_models)

    # ------------------------------------------------------------ data
    def _error_later(self, title: str, message: str) -> None:
        """Show a load problem once the window is up (not from inside the constructor)."""
        QTimer.singleShot(0, lambda: dialogs.show_error(self, title, message))

    def _load_database(self) -> GpuDatabase | None:
        try:
            return load_gpu_database(data_file("gpus.json"), lenient=True)
        except RigSparkError as err:
            self._error_later("GPU database", str(err))
            return None

    def _load_catalog(self) -> tuple[list[ModelSpec], SpeedModel]:
        specs: list[ModelSpec] = []
        perf = SpeedModel()
        self.speed_prior = perf
        try:
            catalog = load_catalog()
            specs = list(catalog.specs())
            specs = with_catalog_projectors(specs)  # vision models load their mmproj
            if catalog.errors:
                skipped = "\n".join(catalog.errors[:10])
                self._error_later("Some catalog entries were skipped", skipped)
        except RigSparkError as err:
            self._error_later("Model catalog", str(err))
        try:
            self.speed_prior = load_perf()
            perf = with_local_calibration(self.speed_prior)
        except RigSparkError as err:
            self._error_later("Speed calibration", str(err))
        return specs, perf

    # ------------------------------------------------------------ detection
    @Slot()
    def start_detection(self) -> None:
        self.rig_panel.set_detecting(True)
        self.detect_progress.show()
        self.statusBar().showMessage("Detecting GPUs, CPU and memory…")
        db = self.database

        def detect_here() -> Rig:
            # imported on the worker: NVML, psutil and sysfs readers stay off the
            # window's first paint
            from rigspark_gui.hardware.detect import detect

            return detect(database=db, timeout_s=5.0)

        run_in_background(
            self,
            detect_here,
            self._on_detected,
            self._on_detect_failed,
        )

    def _on_detected(self, rig: Rig) -> None:
        self.detect_progress.hide()
        self.rig_panel.set_detecting(False)
        self.rig_panel.set_detected(rig)
        from rigspark_gui.hardware.detect import needs_measuring

        gpus = len(rig.gpus)
        measure = needs_measuring(rig.cpu)
        self.statusBar().showMessage(
            f"Detected {gpus} GPU{'s' if gpus != 1 else ''} and "
            f"{rig.ram_total_bytes / (1 << 30):.0f} GiB RAM"
            + (f" — {plain_note(rig.notes[0])}" if rig.notes else "")
            + (" — measuring RAM bandwidth…" if measure else ""),
            10000,
        )
        if measure and self.auto_bandwidth:
            # CPU speed rests on it (and on a VM's vCPUs): measured in the background,
            # once per machine
            self.measure_bandwidth(automatic=True)

    @Slot()
    def measure_bandwidth(self, automatic: bool = False) -> None:
        from rigspark_gui.hardware import bandwidth_probe
        from rigspark_gui.hardware.detect import with_measured_bandwidth

        self.bandwidth_action.setEnabled(False)
        self.statusBar().showMessage("Measuring RAM bandwidth…")
        if not automatic:
            bandwidth_probe.clear_cache()  # the user asked for a new measurement
        machine = self.rig_panel.detected_rig()

        def measure() -> tuple[Cpu | None, bandwidth_probe.BandwidthResult]:
            if machine is None:  # nothing detected to keep the figure for
                return None, bandwidth_probe.measure_ram_bandwidth()
            measured, result = with_measured_bandwidth(machine)  # kept unless busy
            return measured.cpu, result

        def done(outcome: object) -> None:
            self.bandwidth_action.setEnabled(True)
            measured_cpu, result = outcome if isinstance(outcome, tuple) else (None, outcome)
            detected = self.rig_panel.detected_rig() or self.rig_panel.rig()
            gbps = float(getattr(result, "bandwidth_gbps", 0.0))
            prov = getattr(result, "provenance", None)
            if getattr(result, "busy", False):
                why = getattr(result, "reason", "the machine was busy")
                self.statusBar().showMessage(
                    f"RAM bandwidth {gbps:.1f} GB/s is unreliable ({why}): used for now, "
                    "measuring again in two minutes",
                    15000,
                )
                QTimer.singleShot(RETRY_BANDWIDTH_MS, self._retry_bandwidth)
            cpu = replace(
                detected.cpu,
                memory_bandwidth_gbps=gbps,
                provenance={**detected.cpu.provenance, "memory_bandwidth_gbps": prov}
                if prov is not None
                else detected.cpu.provenance,
            )
            if isinstance(measured_cpu, Cpu) and measured_cpu.compute_cores is not None:
                # a VM's vCPUs timed together (whole cores or hyperthread pairs)
                cpu = replace(
                    cpu,
                    compute_cores=measured_cpu.compute_cores,
                    provenance={
                        **cpu.provenance,
                        "compute_cores": measured_cpu.basis_of("compute_cores"),
                    },
                )
            self.rig_panel.set_detected(replace(detected, cpu=cpu))
            if not getattr(result, "busy", False):
                self.statusBar().showMessage(
                    f"RAM bandwidth: {gbps:.1f} GB/s (measured, kept for this machine)", 10000
                )

        def failed(err: Exception, _details: str) -> None:
            self.bandwidth_action.setEnabled(True)
            self.statusBar().showMessage(f"Bandwidth measurement failed: {err}", 10000)

        run_in_background(self, measure, done, failed)

    def _follow_backend(self, s: PlanSettings) -> None:
        """Layers ▸ Launch with follows the engine chosen in the top bar."""
        combo = self.layers_tab.engine_combo
        i = combo.findData(s.backend.value)
        if i >= 0 and i != combo.currentIndex():
            combo.setCurrentIndex(i)

    @Slot()
    def open_calibration(self) -> None:
        from rigspark_gui.ui.calibrate_dialog import CalibrateDialog

        rig = self.rig_panel.detected_rig() or self.session.rig
        dialog = CalibrateDialog(rig, self.speed_prior, self)
        dialog.calibrated.connect(self._on_calibrated)
        self.calibrate_dialog = dialog
        dialog.show()

    def _on_calibrated(self, cal: object) -> None:
        from rigspark_gui.calibrate import LocalCalibration, apply

        if isinstance(cal, LocalCalibration):
            self.session.perf = apply(self.speed_prior, cal)
            self.session.replan()
            self.statusBar().showMessage("Speeds now calibrated on this machine", 10000)

    def _retry_bandwidth(self) -> None:
        detected = self.rig_panel.detected_rig()
        prov = detected.cpu.basis_of("memory_bandwidth_gbps") if detected else None
        if prov is not None and "unreliable" in prov.source:
            self.measure_bandwidth(automatic=True)

    def _on_detect_failed(self, err: Exception, _details: str) -> None:
        self.detect_progress.hide()
        self.rig_panel.set_detecting(False)
        self.statusBar().showMessage(f"Detection failed: {err}")

    # ------------------------------------------------------------ plan
    def _on_plan_changed(self, plan: Plan) -> None:
        self.problem.hide()
        rig_notes = set(self.session.rig.notes) if self.session.rig is not None else set()
        self.paths_tab.show_plan(plan, warnings=[n for n in plan.notes if n not in rig_notes])
        self._refresh_visible_tab()
        self.what_if.schedule()  # after the controls settle: it plans a few variants

    # ------------------------------------------------------------ what would it take
    def apply_suggestion(self, idea: object) -> None:
        """Apply a suggestion as one undoable step: see `WhatIfSuggestions.apply`."""
        self.what_if.apply(idea)

    def undo_suggestion(self) -> None:
        """The Undo link beside the suggestions: see `WhatIfSuggestions.undo`."""
        self.what_if.undo()

    def _on_plan_failed(self, message: str) -> None:
        self.problem.setText(message)
        self.problem.show()
        self.controls.show_settings(self.session.settings)

    def _on_tab_changed(self, _i: int) -> None:
        follow_tabs(self)
        self._refresh_visible_tab()

    def _refresh_visible_tab(self) -> None:
        plan = self.session.plan
        if plan is None:
            return
        serving = plan.settings.backend.serving
        index = self.tabs.indexOf(self.serving_tab)
        if self.tabs.isTabVisible(index) != serving:
            self.tabs.setTabVisible(index, serving)
            follow_tabs(self)  # View ▸ Serving only while the tab is there
            if not serving:
                self.serving_tab.show_plan(plan)  # its empty state, not the last server's
        current = self.tabs.currentWidget()
        if current is self.serving_tab:
            self.serving_tab.show_plan(plan)
        elif current is self.kv_tab:
            self.kv_tab.show_plan(plan)
        elif current is self.catalog_tab:
            self.catalog_tab.refresh()
        elif current is self.layers_tab:
            self.update_layers(plan)

    def update_layers(self, plan: Plan) -> None:
        spec, rig = self.session.spec, self.session.rig
        if spec is None or rig is None:
            return
        if plan.serving is not None:
            engine = plan.settings.backend.label
            self.layers_tab.show_unplaceable(
                f"{engine} places the layers itself: tensor parallelism shards every layer "
                "over the GPUs and pipeline stages split them in order. The Serving tab "
                "shows what each GPU holds."
            )
            return
        rec = next((p for p in plan.paths if p.path is plan.recommended), plan.paths[0])
        quant = rec.quant or spec.available_quants[-1]
        self.layers_tab.set_context(
            spec, rig, plan.settings, self.session.perf, quant, start=plan.placement
        )

    def _on_pasted_projector(self, found: dict[str, object]) -> None:
        """A pasted command's --no-mmproj / --mmproj FILE applied to the plan."""
        from rigspark_gui.ui.pasted_projector import apply_pasted_projector

        said = apply_pasted_projector(self.session, found)
        if said:
            self.layers_tab.message.setText(said)
            self.statusBar().showMessage(said, 8000)

    def _on_kv_pair_chosen(self, k: KvCacheType, v: KvCacheType) -> None:
        self.controls.kv_link.setChecked(k == v)
        changes: dict[str, object] = {"kv_k": k, "kv_v": v}
        if v.quantized:
            changes["flash_attn"] = True
        self.session.update_settings(**changes)

    def _on_catalog_open(self, model_id: str) -> None:
        self.session.set_model(model_id)
        self.tabs.setCurrentWidget(self.paths_tab)

    # ------------------------------------------------------------ models and reports
    def import_model(self, path: Path, *, remember: bool = True, select: bool = True) -> None:
        """Plan the model in a file: see `ModelImports.import_model`."""
        self.models.import_model(path, remember=remember, select=select)

    def open_remote(self, text: str) -> None:
        """Plan a model on the web from its header: see `ModelImports.open_remote`."""
        self.models.open_remote(text)

    @Slot()
    def scan_local_models(self) -> None:
        """List the models on this computer: see `ModelImports.scan_local_models`."""
        self.models.scan_local_models()

    # ------------------------------------------------------------ persistence
    def _save_choices(self) -> None:
        save_choices(self.qsettings, self.session)

    def _restore_choices(self) -> None:
        values = saved_settings(self.qsettings)
        if values and not self.session.update_settings(**values):
            self.problem.hide()  # a stale saved choice is dropped quietly
        self.session.set_model(saved_model(self.qsettings, self.session))

    def _restore_layout(self) -> None:
        from rigspark_gui.ui.window_geometry import DockShare, clamp_to_screen

        geometry = self.qsettings.value("window/geometry")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
            clamp_to_screen(self)  # saved on a larger screen, or with another layout
        state = self.qsettings.value("window/state")
        if isinstance(state, QByteArray):
            self.restoreState(state)
        # the rig dock keeps room for its columns (bandwidth too); the tabs get the rest
        self.dock_share = DockShare(self, self.rig_dock)
        if not isinstance(state, QByteArray):
            QTimer.singleShot(0, self.dock_share.apply)  # first start, once shown
        tab = self.qsettings.value("window/tab")
        if tab is not None and str(tab).isdigit() and self.tabs.isTabVisible(int(str(tab))):
            self.tabs.setCurrentIndex(int(str(tab)))

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        while self._after_first_paint:
            QTimer.singleShot(0, self._after_first_paint.pop(0))

    def closeEvent(self, event: QCloseEvent) -> None:
        self.qsettings.setValue("window/geometry", self.saveGeometry())
        self.qsettings.setValue("window/state", self.saveState())
        self.qsettings.setValue("window/tab", self.tabs.currentIndex())
        # a rig opened from a file opens again next time (detection still runs beside it)
        open_rig = self.rig_panel.open_path
        self.qsettings.setValue("rig/open", str(open_rig) if open_rig else "")
        self._save_choices()
        self.qsettings.sync()
        super().closeEvent(event)
