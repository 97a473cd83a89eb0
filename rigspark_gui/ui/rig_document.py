"""The rig the plan is made for: one value, where it came from, and one undo history.

`RigDocument` holds the detected machine and the current rig with its origin
(`RigState`): detected on this computer, opened from a file, edited, or taken from
elsewhere (a plan report). Every change the user can take back — an edit in the rig
panel, a suggestion applied from the Paths tab — is one command on its `undo_stack` that
swaps two snapshots. Opening a rig file, a new detection taking over, or planning a
report's rig start a new history, so no undo brings an earlier rig back over the rig the
user chose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from rigspark_gui.core.rig import Rig

# What detection notes when this computer has no NVIDIA driver: hardware/nvidia.py's
# NVML_NOT_FOUND_NOTE, spelled out here because importing the hardware package loads the
# probes (tests/ui/test_newcomer_window.py pins that the two agree).
NO_DRIVER_NOTE = "no NVIDIA GPUs (NVML not found)"


class RigOrigin(Enum):
    NONE = "none"  # nothing detected or opened yet
    DETECTED = "detected"  # this computer, as detection found it
    FILE = "file"  # opened from a rig file, not edited since
    EDITED = "edited"  # changed by the user (an edit or an applied suggestion)
    ELSEWHERE = "elsewhere"  # taken from somewhere else, e.g. a plan report


@dataclass(frozen=True, slots=True)
class RigState:
    rig: Rig
    origin: RigOrigin
    # the rig file the rig came from: opened (FILE) or opened and edited since (EDITED)
    path: Path | None = None
    # where a rig from elsewhere came from, in words: "the rig of “…”"
    where: str = ""


def source_text(state: RigState) -> str:
    """Where the shown rig comes from, in a few words ('' when the name says it all)."""
    if state.origin is RigOrigin.DETECTED:
        return "Detected on this computer"
    if state.origin is RigOrigin.FILE and state.path is not None:
        return f"From {state.path.name}"
    if state.origin is RigOrigin.EDITED and state.path is not None:
        return f"From {state.path.name}, edited"
    if state.origin is RigOrigin.ELSEWHERE and state.where:
        return f"From {state.where}"
    return ""


def badge_text(state: RigState) -> str:
    """The badge beside the rig's name: only a rig the user changed is "edited"."""
    if not state.rig.edited:
        return ""  # the same machine as detected: no what-if
    if state.origin is RigOrigin.EDITED:
        return "Edited · what-if"
    if state.origin is RigOrigin.ELSEWHERE:
        return "What-if"
    return ""


def _plain(rig: Rig) -> Rig:
    """`rig` without its edited flag, name and notes, to compare what the rigs describe
    (this machine saved to a file and opened again is no what-if)."""
    return replace(rig, edited=False, name="", notes=())


class _SwapRigCommand(QUndoCommand):
    """One change of the rig: redo shows the state after it, undo the state before."""

    def __init__(self, document: RigDocument, before: RigState, after: RigState, text: str):
        super().__init__(text)
        self._document = document
        self._before = before
        self._after = after

    def redo(self) -> None:
        with self._document.replaying_command():
            self._document.restore(self._after)

    def undo(self) -> None:
        with self._document.replaying_command():
            self._document.restore(self._before)


class SuggestionCommand(_SwapRigCommand):
    """A "What would it take" suggestion applied: its rig and the settings it names.
    Undo puts back the rig and every setting as they were before it."""

    def __init__(
        self,
        document: RigDocument,
        before: RigState,
        after: RigState,
        change: str,
        settings: tuple[Mapping[str, object], Mapping[str, object]] | None,
        update_settings: Callable[..., object],
    ) -> None:
        super().__init__(document, before, after, change)
        self.change = change
        self.settings = settings  # (every setting before, the ones it changes), if any
        self._update_settings = update_settings

    def redo(self) -> None:
        with self._document.replaying_command():
            super().redo()
            if self.settings is not None:
                self._update_settings(**self.settings[1])

    def undo(self) -> None:
        with self._document.replaying_command():
            super().undo()
            if self.settings is not None:
                self._update_settings(**self.settings[0])


class RigDocument(QObject):
    rig_changed = Signal(object)  # Rig: another rig is now current
    state_changed = Signal()  # the current rig, its origin or the detected machine changed
    history_changed = Signal()  # a command was pushed, undone or redone, or history dropped

    def __init__(self, placeholder: Rig, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._detected: Rig | None = None
        self._state = RigState(placeholder, RigOrigin.NONE)
        self._stack = QUndoStack(self)
        # relayed, not connected to callbacks: the stack also empties itself as it is
        # destroyed, when nothing that listens may be left
        self._stack.indexChanged.connect(self.history_changed)
        self._replaying = 0

    # -- what it holds -----------------------------------------------------------

    @property
    def state(self) -> RigState:
        return self._state

    @property
    def rig(self) -> Rig:
        return self._state.rig

    @property
    def detected(self) -> Rig | None:
        return self._detected

    @property
    def undo_stack(self) -> QUndoStack:
        return self._stack

    @property
    def replaying(self) -> bool:
        """True while a command is being done or undone (its changes are its own)."""
        return self._replaying > 0

    def top_suggestion(self) -> SuggestionCommand | None:
        """The applied suggestion the next undo would take back, if that is one."""
        index = self._stack.index()
        command = self._stack.command(index - 1) if index > 0 else None
        return command if isinstance(command, SuggestionCommand) else None

    # -- changes -----------------------------------------------------------------

    def detect(self, rig: Rig) -> bool:
        """Take a fresh detection: it becomes current unless the user opened, edited or
        chose another rig, which is kept. True when the detection became current."""
        self._detected = replace(rig, edited=False)
        if self._state.origin in (RigOrigin.NONE, RigOrigin.DETECTED):
            self.start(RigState(self._detected, RigOrigin.DETECTED))
            return True
        self.restore(self._state)  # the kept rig, compared with the new detection
        return False

    def start(self, state: RigState) -> None:
        """A new starting point: a rig opened, detected, or taken from a report. The
        history of the rig before it is dropped."""
        self._stack.clear()
        self.restore(state)

    def saved_as(self, path: Path) -> None:
        """The current rig was saved to `path`: from now on it is that file's rig."""
        self.restore(replace(self._state, origin=RigOrigin.FILE, path=path))

    def edit(self, rig: Rig, text: str) -> bool:
        """An edit of the current rig, as one undoable command; False if nothing changed."""
        after = RigState(rig, RigOrigin.EDITED, path=self._state.path)
        if self._settled(after).rig == self._state.rig:
            return False
        self._stack.push(_SwapRigCommand(self, self._state, after, text))
        return True

    def reset_to_detected(self) -> bool:
        """Back to the detected machine, as one undoable command."""
        if self._detected is None or self._state.origin is RigOrigin.DETECTED:
            return False
        after = RigState(self._detected, RigOrigin.DETECTED)
        self._stack.push(_SwapRigCommand(self, self._state, after, "Reset to detected"))
        return True

    def apply_suggestion(
        self,
        change: str,
        rig: Rig,
        settings: tuple[Mapping[str, object], Mapping[str, object]] | None,
        update_settings: Callable[..., object],
    ) -> None:
        """Apply a suggestion (a rig, settings or both) as one undoable command."""
        before = self._state
        changed = rig != before.rig
        after = RigState(rig, RigOrigin.EDITED, path=before.path) if changed else before
        self._stack.push(SuggestionCommand(self, before, after, change, settings, update_settings))

    def retire_settings_suggestions(self) -> bool:
        """The settings or the model changed by other means: an applied suggestion's undo
        (or redo) would now overwrite that change, so the history is dropped. True when
        there was such a suggestion."""
        for i in range(self._stack.count()):
            command = self._stack.command(i)
            if isinstance(command, SuggestionCommand) and command.settings is not None:
                self._stack.clear()
                return True
        return False

    # -- for the commands ----------------------------------------------------------

    @contextmanager
    def replaying_command(self) -> Iterator[None]:
        self._replaying += 1
        try:
            yield
        finally:
            self._replaying -= 1

    def restore(self, state: RigState) -> None:
        """Make `state` current (compared with the detection), with no history of its own."""
        state = self._settled(state)
        old = self._state
        self._state = state
        self.state_changed.emit()
        if state.rig != old.rig:
            self.rig_changed.emit(state.rig)

    def _settled(self, state: RigState) -> RigState:
        """`state` marked against the detection: a what-if unless it is this machine; a
        note that this computer has no NVIDIA driver says nothing about a rig of other
        GPUs (a file's, or one with what-if boards)."""
        if state.origin is RigOrigin.NONE:
            return state
        rig = state.rig
        edited = self._detected is None or _plain(rig) != _plain(self._detected)
        notes = rig.notes
        if state.origin is not RigOrigin.DETECTED and rig.gpus:
            notes = tuple(n for n in notes if n != NO_DRIVER_NOTE)
        if (edited, notes) != (rig.edited, rig.notes):
            state = replace(state, rig=replace(rig, edited=edited, notes=notes))
        return state
