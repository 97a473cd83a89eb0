"""A word-wrapped rich-text label whose new text does not re-lay out the window.

A QLabel asks its parent's layout to recompute on every setText, and that request runs
up through the tab widget to the main window: for the Paths tab's summary, which changes
with every control, that relayout cost more than the plan itself. Here the label sits
in a holder with no layout; the holder asks for a new layout only when the text needs
more height at the current width (a line fewer keeps its room until the next resize).
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class SteadyLabel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel(self)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._height = 0

    def text(self) -> str:
        return self.label.text()

    def setText(self, text: str) -> None:
        if text == self.label.text():
            return
        self.label.setText(text)
        height = self.heightForWidth(max(self.width(), 1))
        if height > self._height:
            self._height = height
            self.updateGeometry()  # a line more: the one time the layout moves
        # a line fewer keeps the room it had until the next resize: figures that change
        # as the user drags a control (a ladder losing a rung) never make the tab jump
        self.label.resize(self.width(), max(height, self.height()))

    def setToolTip(self, tip: str) -> None:
        super().setToolTip(tip)
        self.label.setToolTip(tip)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self.label.heightForWidth(width)

    def sizeHint(self) -> QSize:
        hint = self.label.sizeHint()
        return QSize(hint.width(), self.heightForWidth(self.width() or hint.width()))

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self.label.minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._height = self.heightForWidth(event.size().width())
        self.label.resize(event.size())
