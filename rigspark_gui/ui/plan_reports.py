"""Plans in files, for the main window's File menu: export, open, reconcile.

`PlanReports` exports the plan on screen as a report (HTML, PDF, Markdown or JSON),
shows a saved JSON report read-only beside the live plan and can plan its rig, model
and settings in the window, and compares a llama.cpp log's buffers with the plan
(predicted vs actual). The writers and readers load on use, off the window's start.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QVBoxLayout

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.settings import settings_values
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.background import run_in_background
from rigspark_gui.ui.model_imports import import_model_file

if TYPE_CHECKING:
    from rigspark_gui.ui.main_window import MainWindow


class PlanReports:
    """The window's plan files: export a report, open one, reconcile a llama.cpp log."""

    def __init__(self, window: MainWindow) -> None:
        self.window = window

    def on_export_report(self) -> None:
        from rigspark_gui.report.export import (
            FILTERS,
            FORMATS,
            SUFFIXES,
            export_plan,
            format_of,
            now_iso,
        )

        spec, rig = self.window.session.spec, self.window.session.rig
        if spec is None or rig is None or self.window.session.plan is None:
            dialogs.show_error(
                self.window, "Export plan report", "There is no plan to export yet: choose a model."
            )
            return
        # the folder and format of the last export are offered again
        last_fmt = str(self.window.qsettings.value("export/format", "html"))
        last_fmt = last_fmt if last_fmt in FORMATS else "html"
        folder = Path(str(self.window.qsettings.value("export/folder", "") or Path.home()))
        if not folder.is_dir():
            folder = Path.home()
        filters = [FILTERS[last_fmt], *(FILTERS[f] for f in FORMATS if f != last_fmt)]
        path, chosen = QFileDialog.getSaveFileName(
            self.window,
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
        self.window.qsettings.setValue("export/folder", str(target.parent))
        self.window.qsettings.setValue("export/format", fmt)
        settings, perf, created_at = (
            self.window.session.settings,
            self.window.session.perf,
            now_iso(),
        )
        edited = self.window.layers_tab.edited_placement()  # the placement on screen, if changed
        self.window.export_action.setEnabled(False)
        self.window.statusBar().showMessage(f"Writing {target.name}…")

        def done(_report: object) -> None:
            self.window.export_action.setEnabled(True)
            self.window.statusBar().showMessage(f"Exported the plan to {target}", 10000)

        def failed(err: Exception, _details: str) -> None:
            self.window.export_action.setEnabled(True)
            self.window.statusBar().clearMessage()
            dialogs.show_error(self.window, "Export plan report", str(err))

        run_in_background(
            self.window,
            lambda: export_plan(
                spec, rig, settings, perf, target, fmt, created_at=created_at, placement=edited
            ),
            done,
            failed,
        )

    def on_open_plan(self) -> None:
        from rigspark_gui.report.charts import render_charts
        from rigspark_gui.report.model import load_report

        path, _ = QFileDialog.getOpenFileName(
            self.window, "Open plan", str(Path.home()), "JSON plan (*.json);;All files (*)"
        )
        if not path:
            return

        def load() -> tuple[object, dict[str, bytes]]:
            report = load_report(Path(path))
            return report, render_charts(report)

        def failed(err: Exception, _details: str) -> None:
            dialogs.show_error(self.window, "Open plan", str(err))

        run_in_background(self.window, load, lambda result: self._show_report(*result), failed)

    def _show_report(self, report: object, charts: dict[str, bytes]) -> None:
        """A read-only view of a shared plan, beside the live one."""
        from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser

        from rigspark_gui.report.document import report_document
        from rigspark_gui.report.model import PlanReport

        assert isinstance(report, PlanReport)
        dialog = QDialog(self.window)
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
        self.window.restore_plan_button = buttons.addButton(
            "Plan it &here", QDialogButtonBox.ButtonRole.ActionRole
        )
        self.window.restore_plan_button.setToolTip(
            "Use this report's rig, model and settings in the window (the rig as a what-if)"
        )
        self.window.restore_plan_button.clicked.connect(lambda: self.restore_plan(report))
        box = QVBoxLayout(dialog)
        box.addWidget(browser)
        box.addWidget(buttons)
        self.window.report_dialog, self.window.report_browser = dialog, browser
        dialog.show()

    def _resolve(self, name: str) -> ModelSpec | None:
        """A model named the way people name them (the resolver the CLI uses)."""
        from rigspark_gui.catalog.resolve import resolve

        try:
            return resolve(self.window.session.specs, name).spec
        except RigSparkError:
            return None

    def restore_plan(self, report: object) -> None:
        """Plan a shared report's rig, model and settings here."""
        from rigspark_gui.report.model import PlanReport

        assert isinstance(report, PlanReport)
        self.window.rig_panel.use_rig(report.rig, f"the rig of “{report.title}”")
        known = self.window.session.spec_by_id(report.model.id) or self._resolve(report.model.name)
        if known is not None:
            self.window.session.set_model(known.id)
            note = ""
        else:
            note = (
                f" {report.model.name} is not in the catalog here: import its file "
                "(File ▸ Import model…) to plan it."
            )
        self.window.session.update_settings(**settings_values(report.settings))
        plan = self.window.session.plan
        if report.placement_edited and report.placement is not None and plan is not None:
            self.window.update_layers(plan)
            if self.window.layers_tab.restore_placement(report.placement):
                self.window.tabs.setCurrentWidget(self.window.layers_tab)
                note += " Its hand-edited placement is on the Layers tab (Undo goes back)."
            else:
                note += " Its hand-edited placement does not match this model: not restored."
        self.window.statusBar().showMessage(f"Planning “{report.title}” here.{note}", 15000)

    def on_reconcile(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self.window, "Reconcile with a llama.cpp log", str(Path.home()),
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

        current, rig, perf = (
            self.window.session.spec,
            self.window.session.rig,
            self.window.session.perf,
        )
        if rig is None:
            dialogs.show_error(self.window, "Reconcile", "There is no rig yet: detect or open one.")
            return

        def work() -> str:
            log = parse_llama_log(read_log_text(path))
            spec, note = current, ""
            named = Path(log.model_path) if log.model_path else None
            if named is not None and named.is_file():
                spec = import_model_file(named)
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
            dialogs.show_error(self.window, "Reconcile", str(err))

        run_in_background(self.window, work, done, failed)

    def _show_text(self, title: str, text: str) -> None:
        from PySide6.QtGui import QFontDatabase
        from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPlainTextEdit

        dialog = QDialog(self.window)
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
        self.window.text_dialog, self.window.text_view = dialog, view
        dialog.show()
