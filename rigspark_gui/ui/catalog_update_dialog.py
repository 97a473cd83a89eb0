"""Help ▸ Update the model catalog…: `catalog.update.run_update` in the background, with
a progress bar that names the repository being read and a Cancel button that stops
between repositories; the models it adds join the picker at once."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QMessageBox, QProgressDialog, QWidget

from rigspark_gui.catalog.update import CURATED, UpdateResult, run_update
from rigspark_gui.ui.background import run_in_background

if TYPE_CHECKING:
    from rigspark_gui.ui.session import PlannerSession


class _Progress(QObject):
    """Carries the worker's progress to the window's thread (a queued signal)."""

    moved = Signal(int, int, str)


class CatalogUpdate(QObject):
    """One update run: its dialog, its cancel flag and what it found."""

    finished = Signal(object)  # UpdateResult, or an Exception

    def __init__(self, parent: QWidget, session: PlannerSession) -> None:
        super().__init__(parent)
        self.session = session
        self.stop = threading.Event()
        self.dialog = QProgressDialog(
            "Reading the newest releases' configs from Hugging Face…",
            "Cancel",
            0,
            len(CURATED),
            parent,
        )
        self.dialog.setWindowTitle("Update the model catalog")
        self.dialog.setWindowModality(Qt.WindowModality.WindowModal)
        self.dialog.setMinimumDuration(0)
        self.dialog.setAutoClose(False)
        self.dialog.setAutoReset(False)
        self.dialog.canceled.connect(self.stop.set)
        self.progress = _Progress(self)
        self.progress.moved.connect(self._moved)

    def start(self) -> None:
        self.dialog.setValue(0)
        self.dialog.show()
        run_in_background(
            self,
            lambda: run_update(
                progress=lambda done, total, repo: self.progress.moved.emit(done, total, repo),
                cancelled=self.stop.is_set,
            ),
            self._done,
            lambda err, _detail: self._done(err),
        )

    def _moved(self, done: int, total: int, repo: str) -> None:
        self.dialog.setMaximum(total)
        self.dialog.setValue(done)
        if repo:
            self.dialog.setLabelText(f"Reading {repo}… ({done + 1} of {total})")

    def _done(self, result: object) -> None:
        self.dialog.hide()
        if isinstance(result, UpdateResult) and result.added:
            from rigspark_gui.catalog.models import load_catalog

            known = {s.id for s in self.session.specs}
            self.session.add_models([s for s in load_catalog().specs() if s.id not in known])
        self.finished.emit(result)


def summary(result: object) -> str:
    """What an update did, in a few lines for the box that follows it."""
    if not isinstance(result, UpdateResult):
        return f"The catalog could not be updated: {result}"
    lines = []
    if result.cancelled:
        lines.append("Stopped before every repository was read.")
    if result.added:
        lines.append(f"{len(result.added)} models read and added: {', '.join(result.added)}.")
    else:
        lines.append("No model was added; the catalog is unchanged.")
    lines += result.errors[:8]
    return "\n".join(lines)


def open_catalog_update(parent: QWidget, session: PlannerSession) -> CatalogUpdate:
    """Run an update now (the user asked: the only time the catalog goes online)."""
    run = CatalogUpdate(parent, session)
    run.finished.connect(
        lambda result: QMessageBox.information(parent, "Update the model catalog", summary(result))
    )
    run.start()
    return run
