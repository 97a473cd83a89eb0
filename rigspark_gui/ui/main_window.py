"""The main window: controls on top, the rig on the left, answers in tabs.

It wires widgets to the PlannerSession and persists what the user chose. Slow work
(hardware detection, model import, catalog ranking, the KV comparison) runs in the
background; planning one model is fast enough to run on every change.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QPaintEvent
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.calibrate import with_local_calibration
from rigspark_gui.catalog.gpu_database import GpuDatabase, load_gpu_database
from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.plan import Plan
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings, settings_values
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.identity import APP_NAME, APP_VERSION
from rigspark_gui.resources import data_file
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.background import run_in_background
from rigspark_gui.ui.catalog_tab import CatalogTab
from rigspark_gui.ui.controls_bar import ControlsBar
from rigspark_gui.ui.kv_tab import KvTab
from rigspark_gui.ui.paths_tab import PathsTab
from rigspark_gui.ui.session import PlannerSession

DEFAULT_MODEL = "llama-3.1-8b-instruct"
RETRY_BANDWIDTH_MS = 120_000  # a busy machine measures again after two minutes
SETTING_KEYS = (
    "context",
    "kv_k",
    "kv_v",
    "flash_attn",
    "parallel",
    "backend",
    "quant",
    "prompt_tokens",
    "gpu_backend",
    "min_tok_s",
    # the serving engines' knobs ('' = the engine's default)
    "memory_utilization",
    "tensor_parallel",
    "pipeline_parallel",
    "max_num_seqs",
    "cpu_offload_gb",
)
_OPTIONAL_INTS = ("tensor_parallel", "pipeline_parallel", "max_num_seqs")


def _import_model_file(path: Path) -> ModelSpec:
    if path.suffix.lower() == ".gguf":
        from rigspark_gui.catalog.gguf_import import import_gguf

        return import_gguf(path)
    from rigspark_gui.catalog.hf_import import import_hf_config

    result = import_hf_config(path)
    return getattr(result, "spec", result)  # type: ignore[no-any-return]


class MainWindow(QMainWindow):
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
        self.resize(1400, 860)
        self.setMinimumSize(1024, 700)
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

        self._build_menus()
        self.session.plan_changed.connect(self._on_plan_changed)
        self.session.plan_failed.connect(self._on_plan_failed)
        self.session.model_changed.connect(lambda _s: self._save_choices())
        self.session.settings_changed.connect(lambda _s: self._save_choices())
        self.session.settings_changed.connect(self._follow_backend)
        self.controls.message.connect(lambda m: self.statusBar().showMessage(m, 8000))
        self.kv_tab.pair_chosen.connect(self._on_kv_pair_chosen)
        self.catalog_tab.model_opened.connect(self._on_catalog_open)
        self.rig_panel.rig_changed.connect(self.session.set_rig)
        self.rig_panel.redetect_requested.connect(self.start_detection)

        self._after_first_paint: list[Callable[[], None]] = []
        self._applied: tuple[PlanSettings, Rig, str] | None = None
        self._suggest_key: object = None
        self._suggest_timer = QTimer(self)
        self._suggest_timer.setSingleShot(True)
        self._suggest_timer.setInterval(300)
        self._suggest_timer.timeout.connect(self._suggest_now)
        self.paths_tab.suggestion_chosen.connect(self.apply_suggestion)
        self.paths_tab.undo_requested.connect(self.undo_suggestion)
        self._restore_choices()
        self._restore_imported()
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

    # ------------------------------------------------------------ menus
    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self.import_action = QAction("&Import model…", self)
        self.import_action.setShortcut(QKeySequence("Ctrl+I"))
        self.import_action.setStatusTip("Plan a .gguf file or a Hugging Face config.json")
        self.import_action.triggered.connect(self._on_import)
        file_menu.addAction(self.import_action)
        self.open_remote_action = QAction("Open from &Hugging Face or a URL…", self)
        self.open_remote_action.setStatusTip(
            "Plan a GGUF on the web from its header alone (a few MB, not the whole file)"
        )
        self.open_remote_action.triggered.connect(self._on_open_remote)
        file_menu.addAction(self.open_remote_action)
        self.reconcile_action = QAction("&Reconcile with a llama.cpp log…", self)
        self.reconcile_action.setStatusTip(
            "Predicted vs actual: every buffer llama.cpp allocated per device, against this plan"
        )
        self.reconcile_action.triggered.connect(self._on_reconcile)
        file_menu.addAction(self.reconcile_action)
        self.add_folder_action = QAction("Add a &models folder…", self)
        self.add_folder_action.setStatusTip(
            "Also list the GGUF files in a folder of yours under “On this computer”"
        )
        self.add_folder_action.triggered.connect(self._on_add_models_folder)
        file_menu.addAction(self.add_folder_action)
        file_menu.addSeparator()
        self.open_plan_action = QAction("&Open plan…", self)
        self.open_plan_action.setStatusTip("Show a plan report saved as JSON (read-only)")
        self.open_plan_action.triggered.connect(self._on_open_plan)
        file_menu.addAction(self.open_plan_action)
        self.export_action = QAction("&Export plan report…", self)
        self.export_action.setShortcut(QKeySequence("Ctrl+E"))
        self.export_action.setStatusTip("Save this plan as HTML, PDF, Markdown or JSON")
        self.export_action.triggered.connect(self._on_export_report)
        file_menu.addAction(self.export_action)
        file_menu.addSeparator()
        self.open_rig_action = QAction("Open &rig…", self)
        self.open_rig_action.setShortcut(QKeySequence.StandardKey.Open)
        self.open_rig_action.setStatusTip("Plan for a rig saved as JSON (a what-if machine)")
        self.open_rig_action.triggered.connect(self.rig_panel._on_open_button_clicked)
        file_menu.addAction(self.open_rig_action)
        self.save_rig_action = QAction("&Save rig…", self)
        self.save_rig_action.setShortcut(QKeySequence.StandardKey.Save)
        self.save_rig_action.setStatusTip("Save this rig as JSON to plan with it later")
        self.save_rig_action.triggered.connect(self.rig_panel._on_save_button_clicked)
        file_menu.addAction(self.save_rig_action)
        file_menu.addSeparator()
        quit_action = QAction("&Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file_menu.addAction(quit_action)
        view = self.menuBar().addMenu("&View")
        for i in range(self.tabs.count()):
            act = QAction(self.tabs.tabText(i).replace("&", ""), self)
            act.setShortcut(QKeySequence(f"Ctrl+{i + 1}"))
            act.triggered.connect(lambda _=False, i=i: self.tabs.setCurrentIndex(i))
            view.addAction(act)
        redetect = QAction("Re-&detect hardware", self)
        redetect.setShortcut(QKeySequence("F5"))
        redetect.triggered.connect(self.start_detection)
        view.addAction(redetect)
        self.bandwidth_action = QAction("Measure RAM &bandwidth", self)
        self.bandwidth_action.setShortcut(QKeySequence("Ctrl+B"))
        self.bandwidth_action.setStatusTip(
            "Measure again: a few seconds of read-only streaming, kept for this machine"
        )
        self.bandwidth_action.triggered.connect(self.measure_bandwidth)
        view.addAction(self.bandwidth_action)
        self.calibrate_action = QAction("&Calibrate speed…", self)
        self.calibrate_action.setStatusTip(
            "Time llama.cpp on this machine and use its measured speeds from then on"
        )
        self.calibrate_action.triggered.connect(self.open_calibration)
        view.addAction(self.calibrate_action)
        help_menu = self.menuBar().addMenu("&Help")
        self.numbers_action = QAction("How the numbers are &computed", self)
        self.numbers_action.setShortcut(QKeySequence.StandardKey.HelpContents)
        self.numbers_action.triggered.connect(self._on_numbers_help)
        help_menu.addAction(self.numbers_action)
        self.shortcuts_action = QAction("&Keyboard shortcuts", self)
        self.shortcuts_action.triggered.connect(self._on_shortcuts_help)
        help_menu.addAction(self.shortcuts_action)
        help_menu.addSeparator()
        about = QAction("&About RigSpark", self)
        about.triggered.connect(self._on_about)
        help_menu.addAction(about)

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
        gpus = len(rig.gpus)
        self.statusBar().showMessage(
            f"Detected {gpus} GPU{'s' if gpus != 1 else ''} and "
            f"{rig.ram_total_bytes / (1 << 30):.0f} GiB RAM"
            + (f" — {rig.notes[0]}" if rig.notes else "")
            + ("" if rig.cpu.memory_bandwidth_gbps else " — measuring RAM bandwidth…"),
            10000,
        )
        if not rig.cpu.memory_bandwidth_gbps and self.auto_bandwidth:
            # CPU speed rests on it: measure in the background, once per machine
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

        def measure() -> bandwidth_probe.BandwidthResult:
            if machine is None:  # nothing detected to keep the figure for
                return bandwidth_probe.measure_ram_bandwidth()
            return with_measured_bandwidth(machine)[1]  # kept for this machine unless busy

        def done(result: object) -> None:
            self.bandwidth_action.setEnabled(True)
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
        self._suggest_timer.start()  # after the controls settle: it plans a few variants

    # ------------------------------------------------------------ what would it take
    def _suggest_now(self) -> None:
        from rigspark_gui.catalog.quality import load_quality
        from rigspark_gui.core.plan import suggest

        spec, rig, s, perf = (
            self.session.spec,
            self.session.rig,
            self.session.settings,
            self.session.perf,
        )
        if spec is None or rig is None:
            return
        key = (spec.id, rig, s)
        self._suggest_key = key

        def work() -> tuple[Plan, object]:
            from rigspark_gui.core.plan import plan

            full = plan(spec, rig, s, perf)  # with every path's ladder
            return full, suggest(spec, rig, s, perf, load_quality())

        def done(result: tuple[Plan, object]) -> None:
            if self._suggest_key != key:  # the inputs have moved on since
                return
            full, ideas = result
            notes = set(rig.notes)
            self.paths_tab.show_plan(full, warnings=[n for n in full.notes if n not in notes])
            self.paths_tab.show_suggestions(ideas, self._undo_text())  # type: ignore[arg-type]

        def failed(err: Exception, _details: str) -> None:
            self.paths_tab.show_suggestions((), self._undo_text())

        run_in_background(self, work, done, failed)

    def _undo_text(self) -> str:
        return f"Applied: {self._applied[2]}." if self._applied is not None else ""

    def apply_suggestion(self, idea: object) -> None:
        """One click: the change a suggestion names, undoable from the same line."""
        from rigspark_gui.core.plan import Suggestion, rig_after

        assert isinstance(idea, Suggestion)
        rig = self.session.rig
        if rig is None:
            return
        self._applied = (self.session.settings, rig, idea.change)
        if idea.rig_change:
            self.rig_panel.use_rig(rig_after(rig, idea.rig_change), f"a what-if: {idea.change}")
        if idea.settings:
            self.session.update_settings(**idea.settings)
        self.statusBar().showMessage(f"Applied: {idea.change} (Undo beside the suggestions)", 8000)

    def undo_suggestion(self) -> None:
        if self._applied is None:
            return
        settings, rig, _what = self._applied
        self._applied = None
        if rig != self.session.rig:
            self.rig_panel.use_rig(rig, "the rig from before the suggestion")
        self.session.update_settings(**settings_values(settings))
        self.statusBar().showMessage("Undone.", 5000)

    def _on_plan_failed(self, message: str) -> None:
        self.problem.setText(message)
        self.problem.show()
        self.controls.show_settings(self.session.settings)

    def _on_tab_changed(self, _i: int) -> None:
        self._refresh_visible_tab()

    def _refresh_visible_tab(self) -> None:
        plan = self.session.plan
        if plan is None:
            return
        serving = plan.settings.backend.serving
        index = self.tabs.indexOf(self.serving_tab)
        if self.tabs.isTabVisible(index) != serving:
            self.tabs.setTabVisible(index, serving)
        current = self.tabs.currentWidget()
        if current is self.serving_tab:
            self.serving_tab.show_plan(plan)
        elif current is self.kv_tab:
            self.kv_tab.show_plan(plan)
        elif current is self.catalog_tab:
            self.catalog_tab.refresh()
        elif current is self.layers_tab:
            self._update_layers(plan)

    def _update_layers(self, plan: Plan) -> None:
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

    def _on_kv_pair_chosen(self, k: KvCacheType, v: KvCacheType) -> None:
        self.controls.kv_link.setChecked(k == v)
        changes: dict[str, object] = {"kv_k": k, "kv_v": v}
        if v.quantized:
            changes["flash_attn"] = True
        self.session.update_settings(**changes)

    def _on_catalog_open(self, model_id: str) -> None:
        self.session.set_model(model_id)
        self.tabs.setCurrentWidget(self.paths_tab)

    # ------------------------------------------------------------ import
    def _on_import(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Import model",
            str(Path.home()),
            "Models (*.gguf config.json *.json);;GGUF (*.gguf);;HF config (config.json)",
        )
        if path:
            self.import_model(Path(path))

    def _on_reconcile(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Reconcile with a llama.cpp log", str(Path.home()),
            "Logs (*.log *.txt *.json *.csv *.md);;All files (*)",
        )  # fmt: skip
        if path:
            self.reconcile_log(Path(path))

    def reconcile_log(self, path: Path) -> None:
        """Read a llama.cpp log on a worker and show its buffers next to the plan's: the
        log's model file when it is on this computer, else the model on screen."""
        from rigspark_gui.reconcile import (
            format_reconciliation,
            parse_llama_log,
            read_log_text,
            reconcile_log,
        )

        current, rig, perf = self.session.spec, self.session.rig, self.session.perf
        if rig is None:
            dialogs.show_error(self, "Reconcile", "There is no rig yet: detect or open one.")
            return

        def work() -> str:
            log = parse_llama_log(read_log_text(path))
            spec, note = current, ""
            named = Path(log.model_path) if log.model_path else None
            if named is not None and named.is_file():
                spec = _import_model_file(named)
            elif current is not None:
                note = (
                    f"The log's model file ({log.model_path or 'not named'}) is not on this "
                    f"computer: compared with {current.name}, the model on screen.\n\n"
                )
            if spec is None:
                raise RigSparkError("choose the log's model first: its file is not here")
            return note + format_reconciliation(reconcile_log(log, spec, rig, perf))

        def done(text: str) -> None:
            self._show_text(f"Predicted vs actual: {path.name}", text)

        def failed(err: Exception, _details: str) -> None:
            dialogs.show_error(self, "Reconcile", str(err))

        run_in_background(self, work, done, failed)

    def _show_text(self, title: str, text: str) -> None:
        from PySide6.QtGui import QFontDatabase
        from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPlainTextEdit

        dialog = QDialog(self)
        dialog.setWindowTitle(title)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.resize(900, 500)
        view = QPlainTextEdit(text, dialog)
        view.setReadOnly(True)
        view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, dialog)
        buttons.rejected.connect(dialog.close)
        box = QVBoxLayout(dialog)
        box.addWidget(view)
        box.addWidget(buttons)
        self.text_dialog, self.text_view = dialog, view
        dialog.show()

    def _on_open_remote(self) -> None:
        from PySide6.QtWidgets import QInputDialog

        text, ok = QInputDialog.getText(
            self,
            "Open from Hugging Face or a URL",
            "A Hugging Face repository with its quantization (owner/name:Q4_K_M),\n"
            "or the URL of a .gguf file. Only the file's header is read.",
        )
        if ok and text.strip():
            self.open_remote(text.strip())

    def open_remote(self, text: str) -> None:
        """Read a remote model's header on a worker, with a busy dialog that can cancel
        (the answer is then dropped); the header is cached for later plans."""
        from PySide6.QtWidgets import QProgressDialog

        from rigspark_gui.catalog.remote import model_from_hf, model_from_url
        from rigspark_gui.user_dirs import cache_dir

        is_url = text.startswith(("http://", "https://")) and not text.startswith(
            ("https://huggingface.co/", "https://www.huggingface.co/")
        )
        ref = text if is_url else "hf:" + text.removeprefix("hf:").split("huggingface.co/")[-1]
        busy = QProgressDialog(f"Reading the header of {text}…", "Cancel", 0, 0, self)
        busy.setWindowTitle("Open from the web")
        busy.setMinimumDuration(300)
        self.remote_progress = busy
        cache = cache_dir()

        def fetch() -> ModelSpec:
            return model_from_url(ref, cache) if is_url else model_from_hf(ref, cache)

        def done(spec: ModelSpec) -> None:
            cancelled = busy.wasCanceled()
            busy.reset()
            if cancelled:
                return
            self.session.add_model(spec)
            self.session.set_model(spec.id)
            self.statusBar().showMessage(f"Planned {spec.name} from its header", 8000)

        def failed(err: Exception, _details: str) -> None:
            cancelled = busy.wasCanceled()
            busy.reset()
            if not cancelled:
                dialogs.show_error(self, "Open from the web", str(err))

        run_in_background(self, fetch, done, failed)

    def import_model(self, path: Path, *, remember: bool = True, select: bool = True) -> None:
        self.statusBar().showMessage(f"Reading {path.name}…")

        def done(spec: ModelSpec) -> None:
            self.session.add_model(spec)
            if remember:
                self._remember_import(path)
            if select:
                self.session.set_model(spec.id)
            self.statusBar().showMessage(f"Imported {spec.name}", 6000)

        def failed(err: Exception, _details: str) -> None:
            self.statusBar().clearMessage()
            if select:
                dialogs.show_error(self, "Import model", str(err))
            else:
                self.statusBar().showMessage(f"Could not reopen {path.name}: {err}", 10000)

        run_in_background(self, lambda: _import_model_file(path), done, failed)

    def _remember_import(self, path: Path) -> None:
        paths = [p for p in self._imported_paths() if p != str(path)]
        self.qsettings.setValue("models/imported", [str(path), *paths][:50])

    def _imported_paths(self) -> list[str]:
        value = self.qsettings.value("models/imported", [])
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value or []]

    def _restore_imported(self) -> None:
        for p in self._imported_paths():
            if Path(p).exists():
                self.import_model(Path(p), remember=False, select=False)

    # ------------------------------------------------------------ models on this computer
    def model_folders(self) -> list[Path]:
        raw = self.qsettings.value("local/folders", []) or []
        folders = [raw] if isinstance(raw, str) else list(raw)
        return [Path(str(f)) for f in folders if str(f)]

    def _on_add_models_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a models folder", str(Path.home()))
        if not folder:
            return
        folders = [str(f) for f in self.model_folders()]
        if folder not in folders:
            self.qsettings.setValue("local/folders", [*folders, folder])
        self.scan_local_models()

    @Slot()
    def scan_local_models(self) -> None:
        """Ollama's store, LM Studio, the Hugging Face and llama.cpp caches and the user's
        folders, read header by header on a worker; the picker lists them first."""
        from rigspark_gui.catalog.local_models import find_local_models, read_all

        folders = self.model_folders()
        self.statusBar().showMessage("Looking for models on this computer…", 10000)

        def scan() -> tuple[list[ModelSpec], list[str]]:
            return read_all(find_local_models(folders=folders))

        def done(result: tuple[list[ModelSpec], list[str]]) -> None:
            specs, skipped = result
            self.local_skipped = skipped
            if specs:
                self.session.add_models(specs)
            extra = f" ({len(skipped)} unreadable, skipped)" if skipped else ""
            self.statusBar().showMessage(
                f"{len(specs)} model{'s' if len(specs) != 1 else ''} on this computer{extra}",
                10000,
            )

        def failed(err: Exception, _details: str) -> None:
            self.statusBar().showMessage(f"Looking for models failed: {err}", 15000)

        run_in_background(self, scan, done, failed)

    # ------------------------------------------------------------ reports
    def _on_export_report(self) -> None:
        from rigspark_gui.report.export import (
            FILTERS,
            FORMATS,
            SUFFIXES,
            export_plan,
            format_of,
            now_iso,
        )

        spec, rig = self.session.spec, self.session.rig
        if spec is None or rig is None or self.session.plan is None:
            dialogs.show_error(
                self, "Export plan report", "There is no plan to export yet: choose a model."
            )
            return
        # the folder and format of the last export are offered again
        last_fmt = str(self.qsettings.value("export/format", "html"))
        last_fmt = last_fmt if last_fmt in FORMATS else "html"
        folder = Path(str(self.qsettings.value("export/folder", "") or Path.home()))
        if not folder.is_dir():
            folder = Path.home()
        filters = [FILTERS[last_fmt], *(FILTERS[f] for f in FORMATS if f != last_fmt)]
        path, chosen = QFileDialog.getSaveFileName(
            self,
            "Export plan report",
            str(folder / f"{spec.id}-plan{SUFFIXES[last_fmt]}"),
            ";;".join(filters),
        )
        if not path:
            return
        target = Path(path)
        by_filter = next((f for f in FORMATS if FILTERS[f] == chosen), "html")
        # a typed suffix wins over the filter; no suffix takes the filter's
        fmt = format_of(target, default=by_filter) if target.suffix else by_filter
        if not target.suffix:
            target = target.with_suffix(SUFFIXES[fmt])
        self.qsettings.setValue("export/folder", str(target.parent))
        self.qsettings.setValue("export/format", fmt)
        settings, perf, created_at = self.session.settings, self.session.perf, now_iso()
        edited = self.layers_tab.edited_placement()  # the placement on screen, if changed
        self.export_action.setEnabled(False)
        self.statusBar().showMessage(f"Writing {target.name}…")

        def done(_report: object) -> None:
            self.export_action.setEnabled(True)
            self.statusBar().showMessage(f"Exported the plan to {target}", 10000)

        def failed(err: Exception, _details: str) -> None:
            self.export_action.setEnabled(True)
            self.statusBar().clearMessage()
            dialogs.show_error(self, "Export plan report", str(err))

        run_in_background(
            self,
            lambda: export_plan(
                spec, rig, settings, perf, target, fmt, created_at=created_at, placement=edited
            ),
            done,
            failed,
        )

    def _on_open_plan(self) -> None:
        from rigspark_gui.report.charts import render_charts
        from rigspark_gui.report.model import load_report

        path, _ = QFileDialog.getOpenFileName(
            self, "Open plan", str(Path.home()), "JSON plan (*.json);;All files (*)"
        )
        if not path:
            return

        def load() -> tuple[object, dict[str, bytes]]:
            report = load_report(Path(path))
            return report, render_charts(report)

        def failed(err: Exception, _details: str) -> None:
            dialogs.show_error(self, "Open plan", str(err))

        run_in_background(self, load, lambda result: self._show_report(*result), failed)

    def _show_report(self, report: object, charts: dict[str, bytes]) -> None:
        """A read-only view of a shared plan, beside the live one."""
        from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser

        from rigspark_gui.report.document import report_document
        from rigspark_gui.report.model import PlanReport

        assert isinstance(report, PlanReport)
        dialog = QDialog(self)
        dialog.setWindowTitle(f"Plan: {report.title}")
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.resize(1000, 800)
        browser = QTextBrowser(dialog)
        browser.setOpenExternalLinks(False)
        doc = report_document(report, charts, image_width=900)
        doc.setParent(browser)
        browser.setDocument(doc)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, dialog)
        buttons.rejected.connect(dialog.close)
        self.restore_plan_button = buttons.addButton(
            "Plan it &here", QDialogButtonBox.ButtonRole.ActionRole
        )
        self.restore_plan_button.setToolTip(
            "Use this report's rig, model and settings in the window (the rig as a what-if)"
        )
        self.restore_plan_button.clicked.connect(lambda: self.restore_plan(report))
        box = QVBoxLayout(dialog)
        box.addWidget(browser)
        box.addWidget(buttons)
        self.report_dialog, self.report_browser = dialog, browser
        dialog.show()

    def _resolve(self, name: str) -> ModelSpec | None:
        """A model named the way people name them (the resolver the CLI uses)."""
        from rigspark_gui.catalog.resolve import resolve

        try:
            return resolve(self.session.specs, name).spec
        except RigSparkError:
            return None

    def restore_plan(self, report: object) -> None:
        """Plan a shared report's rig, model and settings here."""
        from rigspark_gui.report.model import PlanReport

        assert isinstance(report, PlanReport)
        self.rig_panel.use_rig(report.rig, f"the rig of “{report.title}”")
        known = self.session.spec_by_id(report.model.id) or self._resolve(report.model.name)
        if known is not None:
            self.session.set_model(known.id)
            note = ""
        else:
            note = (
                f" {report.model.name} is not in the catalog here: import its file "
                "(File ▸ Import model…) to plan it."
            )
        self.session.update_settings(**settings_values(report.settings))
        plan = self.session.plan
        if report.placement_edited and report.placement is not None and plan is not None:
            self._update_layers(plan)
            if self.layers_tab.restore_placement(report.placement):
                self.tabs.setCurrentWidget(self.layers_tab)
                note += " Its hand-edited placement is on the Layers tab (Undo goes back)."
            else:
                note += " Its hand-edited placement does not match this model: not restored."
        self.statusBar().showMessage(f"Planning “{report.title}” here.{note}", 15000)

    # ------------------------------------------------------------ persistence
    def _save_choices(self) -> None:
        s = self.session.settings
        if self.session.spec is not None:
            self.qsettings.setValue("plan/model", self.session.spec.id)
        for key in SETTING_KEYS:
            value = getattr(s, key)
            self.qsettings.setValue(f"plan/{key}", "" if value is None else str(value))

    def _restore_choices(self) -> None:
        q = self.qsettings
        values: dict[str, object] = {}
        for key in SETTING_KEYS:
            raw = q.value(f"plan/{key}")
            if raw is None:
                continue
            raw = str(raw)
            if key in ("context", "parallel", "prompt_tokens"):
                values[key] = int(raw) if raw.isdigit() else None
            elif key == "flash_attn":
                values[key] = raw.lower() == "true"
            elif key in ("quant", "gpu_backend"):
                values[key] = raw or None
            elif key in _OPTIONAL_INTS:
                values[key] = int(raw) if raw.isdigit() else ""
            elif key in ("memory_utilization", "cpu_offload_gb"):
                try:
                    values[key] = float(raw)
                except ValueError:
                    values[key] = "" if key == "memory_utilization" else None
            elif key == "min_tok_s":
                try:
                    values[key] = float(raw)
                except ValueError:
                    values[key] = None
            else:
                values[key] = raw
        values = {k: v for k, v in values.items() if v is not None or k in ("quant", "gpu_backend")}
        # '' marks a serving knob left at the engine's default
        values = {k: (None if v == "" else v) for k, v in values.items()}
        if values and not self.session.update_settings(**values):
            self.problem.hide()  # a stale saved choice is dropped quietly
        model = str(q.value("plan/model", DEFAULT_MODEL))
        if self.session.spec_by_id(model) is None:
            model = DEFAULT_MODEL
        if self.session.spec_by_id(model) is None and self.session.specs:
            model = self.session.specs[0].id
        self.session.set_model(model)

    def _restore_layout(self) -> None:
        geometry = self.qsettings.value("window/geometry")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        state = self.qsettings.value("window/state")
        if isinstance(state, QByteArray):
            self.restoreState(state)
        else:
            # first start: room for memory and bandwidth with their basis, once shown
            QTimer.singleShot(
                0, lambda: self.resizeDocks([self.rig_dock], [400], Qt.Orientation.Horizontal)
            )
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
        open_rig = self.rig_panel.open_path if self.rig_panel.is_edited() else None
        self.qsettings.setValue("rig/open", str(open_rig) if open_rig else "")
        self._save_choices()
        self.qsettings.sync()
        super().closeEvent(event)

    def _on_numbers_help(self) -> None:
        speed = self.session.perf
        basis = speed.local_basis or speed.basis or "no speed calibration loaded"
        self.help_box = QMessageBox(QMessageBox.Icon.Information, "How the numbers are computed",
            "<p><b>Memory</b> follows llama.cpp's own allocator: tensor bytes from the ggml "
            "block sizes (or the GGUF header itself), the KV cache padded to 256 cells per "
            "layer type, compute buffers as ggml-alloc sizes them, layers placed by -ngl and "
            "--tensor-split as llama.cpp assigns them. A path fits when every device keeps "
            "5 % of its usable memory free; under 10 % to spare it is <i>tight</i>.</p>"
            "<p><b>Speed</b> is a point with a band: bytes each device reads per token over "
            "its bandwidth times an efficiency fitted on published llama-bench runs (its "
            "class, GPU backend and quantization), plus a fixed cost per layer; on a CPU the "
            "larger of that and the compute time. The band is the spread of the estimate on "
            "devices left out of the fit. Current basis: " + html.escape(basis) + ".</p>"
            "<p><b>Auto</b> takes the best quality that reaches the minimum speed, else the "
            "fastest plan that fits. View ▸ Calibrate speed… measures this machine.</p>"
            "<p>Every figure's tooltip gives its exact bytes and basis; the project's "
            "docs/validation*.md show how far each is from llama.cpp itself.</p>",
            QMessageBox.StandardButton.Ok, self)  # fmt: skip
        self.help_box.setTextFormat(Qt.TextFormat.RichText)
        self.help_box.show()

    def _on_shortcuts_help(self) -> None:
        rows = []
        for action in self.findChildren(QAction):
            key = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            name = action.text().replace("&", "")
            if key and name:
                rows.append(
                    f"<tr><td><b>{html.escape(key)}</b></td><td>{html.escape(name)}</td></tr>"
                )
        text = "<table cellspacing=6>" + "".join(sorted(set(rows))) + "</table>"
        self.help_box = QMessageBox(
            QMessageBox.Icon.NoIcon, "Keyboard shortcuts", text, QMessageBox.StandardButton.Ok, self
        )
        self.help_box.setTextFormat(Qt.TextFormat.RichText)
        self.help_box.show()

    def _on_about(self) -> None:
        QMessageBox.about(
            self,
            f"About {APP_NAME}",
            f"<b>{APP_NAME} {APP_VERSION}</b><p>Will this LLM run on this machine, on which "
            "path, at which quantization and KV precision, and how fast?</p>"
            "<p>Memory follows llama.cpp's allocator; speeds are estimates with their basis.</p>",
        )
