"""The main window's menu bar, and the boxes its Help menu opens.

`build_menus` adds the File menu (models, plan reports, rig files), the Edit menu (undo
and redo of the rig's one history), the View menu (a shortcut per tab, hardware
detection, RAM bandwidth, speed calibration) and the Help menu to a `MainWindow`, and
keeps each action the window or its tests reach on the window (`window.export_action`...).
File actions go to the window's `ModelImports` and `PlanReports`; `follow_tabs` keeps the
View and Edit actions in step with the tabs; the Help boxes are built here.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMessageBox

from rigspark_gui.identity import APP_NAME, APP_VERSION

if TYPE_CHECKING:
    from rigspark_gui.ui.main_window import MainWindow


def build_menus(window: MainWindow) -> None:
    """The File, View and Help menus; their actions are kept on the window."""
    file_menu = window.menuBar().addMenu("&File")
    window.import_action = QAction("&Import model…", window)
    window.import_action.setShortcut(QKeySequence("Ctrl+I"))
    window.import_action.setStatusTip("Plan a .gguf file or a Hugging Face config.json")
    window.import_action.triggered.connect(window.models.on_import)
    file_menu.addAction(window.import_action)
    window.open_remote_action = QAction("Open from &Hugging Face or a URL…", window)
    window.open_remote_action.setStatusTip(
        "Plan a GGUF on the web from its header alone (a few MB, not the whole file)"
    )
    window.open_remote_action.triggered.connect(window.models.on_open_remote)
    file_menu.addAction(window.open_remote_action)
    window.reconcile_action = QAction("&Reconcile with a llama.cpp log…", window)
    window.reconcile_action.setStatusTip(
        "Predicted vs actual: every buffer llama.cpp allocated per device, against this plan"
    )
    window.reconcile_action.triggered.connect(window.reports.on_reconcile)
    file_menu.addAction(window.reconcile_action)
    window.add_folder_action = QAction("Add a &models folder…", window)
    window.add_folder_action.setStatusTip(
        "Also list the GGUF files in a folder of yours under “On this computer”"
    )
    window.add_folder_action.triggered.connect(window.models.on_add_models_folder)
    file_menu.addAction(window.add_folder_action)
    file_menu.addSeparator()
    window.open_plan_action = QAction("&Open plan…", window)
    window.open_plan_action.setStatusTip("Show a plan report saved as JSON (read-only)")
    window.open_plan_action.triggered.connect(window.reports.on_open_plan)
    file_menu.addAction(window.open_plan_action)
    window.export_action = QAction("&Export plan report…", window)
    window.export_action.setShortcut(QKeySequence("Ctrl+E"))
    window.export_action.setStatusTip("Save this plan as HTML, PDF, Markdown or JSON")
    window.export_action.triggered.connect(window.reports.on_export_report)
    file_menu.addAction(window.export_action)
    file_menu.addSeparator()
    window.open_rig_action = QAction("Open &rig…", window)
    window.open_rig_action.setShortcut(QKeySequence.StandardKey.Open)
    window.open_rig_action.setStatusTip("Plan for a rig saved as JSON (a what-if machine)")
    window.open_rig_action.triggered.connect(window.rig_panel._on_open_button_clicked)
    file_menu.addAction(window.open_rig_action)
    window.save_rig_action = QAction("&Save rig…", window)
    window.save_rig_action.setShortcut(QKeySequence.StandardKey.Save)
    window.save_rig_action.setStatusTip("Save this rig as JSON to plan with it later")
    window.save_rig_action.triggered.connect(window.rig_panel._on_save_button_clicked)
    file_menu.addAction(window.save_rig_action)
    file_menu.addSeparator()
    quit_action = QAction("&Quit", window)
    quit_action.setShortcut(QKeySequence.StandardKey.Quit)
    quit_action.triggered.connect(window.close)
    file_menu.addAction(quit_action)
    # no mnemonic: every letter of "Edit" is taken by the rig panel's fields
    edit = window.menuBar().addMenu("Edit")
    stack = window.rig_panel.document.undo_stack
    window.undo_action = stack.createUndoAction(window, "&Undo")
    window.undo_action.setStatusTip("Take back the last change of the rig or applied suggestion")
    window.redo_action = stack.createRedoAction(window, "&Redo")
    window.redo_action.setStatusTip("Do again what Undo took back")
    edit.addAction(window.undo_action)
    edit.addAction(window.redo_action)
    view = window.menuBar().addMenu("&View")
    view.setToolTipsVisible(True)  # a tab's entry says why it is off
    window.view_actions = []
    for i in range(window.tabs.count()):
        act = QAction(window.tabs.tabText(i).replace("&", ""), window)
        act.setShortcut(QKeySequence(f"Ctrl+{i + 1}"))
        act.triggered.connect(lambda _=False, i=i: window.tabs.setCurrentIndex(i))
        view.addAction(act)
        window.view_actions.append(act)
    redetect = QAction("Re-&detect hardware", window)
    redetect.setShortcut(QKeySequence("F5"))
    redetect.triggered.connect(window.start_detection)
    view.addAction(redetect)
    window.bandwidth_action = QAction("Measure RAM &bandwidth", window)
    window.bandwidth_action.setShortcut(QKeySequence("Ctrl+B"))
    window.bandwidth_action.setStatusTip(
        "Measure again: a few seconds of read-only streaming, kept for this machine"
    )
    window.bandwidth_action.triggered.connect(window.measure_bandwidth)
    view.addAction(window.bandwidth_action)
    window.calibrate_action = QAction("&Calibrate speed…", window)
    window.calibrate_action.setStatusTip(
        "Time llama.cpp on this machine and use its measured speeds from then on"
    )
    window.calibrate_action.triggered.connect(window.open_calibration)
    view.addAction(window.calibrate_action)
    help_menu = window.menuBar().addMenu("&Help")
    window.numbers_action = QAction("How the numbers are &computed", window)
    window.numbers_action.setShortcut(QKeySequence.StandardKey.HelpContents)
    window.numbers_action.triggered.connect(lambda: show_numbers_help(window))
    help_menu.addAction(window.numbers_action)
    window.shortcuts_action = QAction("&Keyboard shortcuts", window)
    window.shortcuts_action.triggered.connect(lambda: show_shortcuts_help(window))
    help_menu.addAction(window.shortcuts_action)
    _add_catalog_update(window, help_menu)
    help_menu.addSeparator()
    about = QAction("&About RigSpark", window)
    about.triggered.connect(lambda: show_about(window))
    help_menu.addAction(about)
    window.window_actions = [
        a for menu in (file_menu, view, help_menu) for a in menu.actions() if not a.isSeparator()
    ]
    follow_tabs(window)


def _add_catalog_update(window: MainWindow, help_menu: QMenu) -> None:
    """Help ▸ Update the model catalog… (the catalog's only network read, on request);
    the picker offers it too when the shipped catalog is over six months old."""
    from rigspark_gui.catalog.update import STALE_DAYS, is_stale, shipped_date

    action = QAction("&Update the model catalog…", window)
    action.setStatusTip("Read the newest releases' config.json from Hugging Face")

    def update() -> None:
        from rigspark_gui.ui.catalog_update_dialog import open_catalog_update

        window.catalog_update = open_catalog_update(window, window.session)

    action.triggered.connect(update)
    help_menu.addAction(action)
    window.update_catalog_action = action
    picker = window.controls.model_picker
    picker.update_requested.connect(action.trigger)
    when = shipped_date()
    if when is not None and is_stale():
        picker.set_stale_notice(f"Catalog of {when:%B %Y}, over {STALE_DAYS // 30} months old")


# Ctrl+Z and Ctrl+Shift+Z (or Ctrl+Y), as the Layers tab's own undo and redo have them
UNDO_KEYS = (QKeySequence("Ctrl+Z"),)
REDO_KEYS = (QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y"))
SERVING_OFF_TIP = "The Serving tab plans a vLLM or SGLang server: choose one as the Backend"


def follow_tabs(window: MainWindow) -> None:
    """View's tab entries as the tabs stand (a hidden tab's entry is off and says why);
    Edit ▸ Undo's keys left to the Layers tab's own undo while it is shown."""
    for i, act in enumerate(window.view_actions):
        shown = window.tabs.isTabVisible(i)
        act.setEnabled(shown)
        off = SERVING_OFF_TIP if window.tabs.widget(i) is window.serving_tab else "Not shown now"
        tip = "" if shown else off
        act.setToolTip(tip or act.text())
        act.setStatusTip(tip)
    # Two enabled actions on one key inside the Layers tab would be ambiguous: neither runs.
    layers = window.tabs.currentWidget() is window.layers_tab
    window.undo_action.setShortcuts([] if layers else list(UNDO_KEYS))
    window.redo_action.setShortcuts([] if layers else list(REDO_KEYS))


def show_numbers_help(window: MainWindow) -> None:
    """How memory and speed are estimated, with the speed basis in use."""
    speed = window.session.perf
    basis = speed.local_basis or speed.basis or "no speed calibration loaded"
    window.help_box = QMessageBox(QMessageBox.Icon.Information, "How the numbers are computed",
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
        "<p>Every figure's tooltip gives its exact bytes and basis. The memory figures "
        "are checked against what llama.cpp itself allocates: File ▸ Reconcile with a "
        "llama.cpp log… sets a run of yours beside this plan, buffer by buffer.</p>",
        QMessageBox.StandardButton.Ok, window)  # fmt: skip
    window.help_box.setTextFormat(Qt.TextFormat.RichText)
    window.help_box.show()


def show_shortcuts_help(window: MainWindow) -> None:
    """Every shortcut of the window's actions, in a table."""
    rows = []
    for action in window.findChildren(QAction):
        key = action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
        name = action.text().replace("&", "")
        if key and name:
            rows.append(f"<tr><td><b>{html.escape(key)}</b></td><td>{html.escape(name)}</td></tr>")
    text = "<table cellspacing=6>" + "".join(sorted(set(rows))) + "</table>"
    window.help_box = QMessageBox(
        QMessageBox.Icon.NoIcon, "Keyboard shortcuts", text, QMessageBox.StandardButton.Ok, window
    )
    window.help_box.setTextFormat(Qt.TextFormat.RichText)
    window.help_box.show()


def show_about(window: MainWindow) -> None:
    QMessageBox.about(
        window,
        f"About {APP_NAME}",
        f"<b>{APP_NAME} {APP_VERSION}</b><p>Will this LLM run on this machine, on which "
        "path, at which quantization and KV precision, and how fast?</p>"
        "<p>Memory follows llama.cpp's allocator; speeds are estimates with their basis.</p>",
    )
