"""The placement being edited: one value, an undo stack, and a change signal.

Every edit computes its result with a pure core function first, so an invalid move
raises before anything is pushed; the pushed command only swaps two frozen snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack

from rigspark_gui.core.placement import CPU, Placement, move_experts, move_layers, unit_label


class _SwapPlacementCommand(QUndoCommand):
    def __init__(
        self, document: PlacementDocument, before: Placement, after: Placement, text: str
    ) -> None:
        super().__init__(text)
        self._document = document
        self._before = before
        self._after = after

    def redo(self) -> None:
        self._document._set(self._after)

    def undo(self) -> None:
        self._document._set(self._before)


class PlacementDocument(QObject):
    placement_changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._placement: Placement | None = None
        self._stack = QUndoStack(self)

    @property
    def placement(self) -> Placement | None:
        return self._placement

    @property
    def undo_stack(self) -> QUndoStack:
        return self._stack

    def reset(self, placement: Placement | None) -> None:
        """A new starting point (new model, rig or settings): history is dropped."""
        self._stack.clear()
        self._set(placement)

    def adjust(self, placement: Placement) -> None:
        """The same placement under new settings (its context): history is kept."""
        self._set(placement)

    def replace(self, placement: Placement, text: str) -> bool:
        """Push a whole new placement (auto-place, even split...) as one undoable edit."""
        before = self._placement
        if before is None or placement == before:
            return False
        self._stack.push(_SwapPlacementCommand(self, before, placement, text))
        return True

    def move_units(self, unit_ids: Iterable[str], device: str) -> bool:
        """Move units (with their experts) to `device`; raises InvalidPlacementError."""
        if self._placement is None:
            return False
        ids = list(unit_ids)
        after = move_layers(self._placement, ids, device)
        return self.replace(after, _describe(ids, f"to {_device_text(device)}"))

    def move_experts(self, unit_ids: Iterable[str], device: str | None) -> bool:
        if self._placement is None:
            return False
        ids = list(unit_ids)
        after = move_experts(self._placement, ids, device)
        where = f"to {_device_text(device)}" if device else "back with their layers"
        return self.replace(after, _describe(ids, f"experts {where}"))

    def _set(self, placement: Placement | None) -> None:
        self._placement = placement
        self.placement_changed.emit()


def _device_text(device: str) -> str:
    return "CPU" if device == CPU else f"GPU {device.split(':')[1]}"


def _describe(ids: list[str], what: str) -> str:
    head = unit_label(ids[0]) if len(ids) == 1 else f"{len(ids)} layers"
    return f"Move {head} {what}"
