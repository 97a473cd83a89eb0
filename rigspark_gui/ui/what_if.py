"""What would it take: a few changes under the Paths tab's verdict, each applied in one
click and taken back from the same line or with Edit ▸ Undo.

`WhatIfSuggestions` plans the variants in the background once the controls settle and
shows them on the Paths tab. Applying one pushes a command on the rig's one undo history
(`RigDocument.undo_stack`), beside the rig panel's edits. The "Applied: … Undo" link
stands for that command only while it is the next undo: another edit, an opened rig, or
a change of settings or model made by other means retires it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer

from rigspark_gui.core.plan import Plan
from rigspark_gui.core.settings import settings_values
from rigspark_gui.ui.background import run_in_background

if TYPE_CHECKING:
    from rigspark_gui.ui.main_window import MainWindow

SETTLE_MS = 300  # after the controls settle: each pass plans a few variants


class WhatIfSuggestions:
    """The window's suggestions: computed in the background, applied and undone through
    the rig's undo history."""

    def __init__(self, window: MainWindow) -> None:
        self.window = window
        self._key: object = None
        self.timer = QTimer(window)
        self.timer.setSingleShot(True)
        self.timer.setInterval(SETTLE_MS)
        self.timer.timeout.connect(self.suggest_now)
        self.document = window.rig_panel.document
        self.document.history_changed.connect(self.show_undo)
        window.paths_tab.suggestion_chosen.connect(self.apply)
        window.paths_tab.undo_requested.connect(self.undo)
        window.session.settings_changed.connect(self._on_inputs_changed)
        window.session.model_changed.connect(self._on_inputs_changed)

    def schedule(self) -> None:
        self.timer.start()

    def suggest_now(self) -> None:
        from rigspark_gui.catalog.quality import load_quality
        from rigspark_gui.core.plan import suggest

        session = self.window.session
        spec, rig, s, perf = session.spec, session.rig, session.settings, session.perf
        if spec is None or rig is None:
            return
        key = (spec.id, rig, s)
        self._key = key
        tab = self.window.paths_tab

        catalog = tuple(session.specs)

        def work() -> tuple[Plan, object, object]:
            from rigspark_gui.core.plan import plan, smaller_models

            full = plan(spec, rig, s, perf)  # with every path's ladder
            ideas = suggest(spec, rig, s, perf, load_quality())
            # when no quantization reaches the minimum speed: smaller models that do
            return full, ideas, smaller_models(spec, rig, s, perf, catalog)

        def done(result: tuple[Plan, object, object]) -> None:
            if self._key != key:  # the inputs have moved on since
                return
            full, ideas, smaller = result
            notes = set(rig.notes)
            tab.show_plan(full, warnings=[n for n in full.notes if n not in notes])
            tab.show_suggestions(ideas, self.undo_text(), smaller)  # type: ignore[arg-type]

        def failed(err: Exception, _details: str) -> None:
            tab.show_suggestions((), self.undo_text())

        run_in_background(self.window, work, done, failed)

    def undo_text(self) -> str:
        """The line beside the suggestions while the next undo is an applied one."""
        applied = self.document.top_suggestion()
        return f"Applied: {applied.change}." if applied is not None else ""

    def show_undo(self) -> None:
        tab = self.window.paths_tab
        tab.show_suggestions(tab.ideas, self.undo_text(), tab.smaller)

    def apply(self, idea: object) -> None:
        """One click: the change a suggestion names, as one step of the rig's history."""
        from rigspark_gui.core.plan import Suggestion, rig_after

        assert isinstance(idea, Suggestion)
        session = self.window.session
        rig = session.rig
        if rig is None:
            return
        if idea.model_id:
            # a smaller model: the picker shows it, and takes the first one back
            before = session.spec.name if session.spec is not None else ""
            session.set_model(idea.model_id)
            self.window.statusBar().showMessage(
                f"Planning {idea.change} instead of {before} (the model picker switches back)",
                8000,
            )
            return
        after = rig_after(rig, idea.rig_change) if idea.rig_change else rig
        settings = (settings_values(session.settings), idea.settings) if idea.settings else None
        self.document.apply_suggestion(idea.change, after, settings, session.update_settings)
        if after != rig:
            self.window.rig_panel.note(f"Using a what-if: {idea.change}.")
        self.window.statusBar().showMessage(
            f"Applied: {idea.change} (Undo beside the suggestions, or Edit ▸ Undo)", 8000
        )

    def undo(self) -> None:
        """The Undo link: takes back the applied suggestion while it is the next undo."""
        if self.document.top_suggestion() is None:
            self.show_undo()  # a stale link: show the line as it stands
            return
        self.document.undo_stack.undo()
        self.window.statusBar().showMessage("Undone.", 5000)

    def _on_inputs_changed(self, _value: object) -> None:
        # the link disappears with it (indexChanged); the status bar keeps its message
        if not self.document.replaying:
            self.document.retire_settings_suggestions()
