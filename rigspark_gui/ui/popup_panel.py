"""A small popup panel under a tool button beside the tabs (Projector ▾, Weights ▾):
opened right-aligned under its button, its first control focused, closed with Escape."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QKeyEvent, QShowEvent
from PySide6.QtWidgets import QFrame, QLabel, QToolButton, QWidget


class PopupPanel(QFrame):
    """The popup frame; a subclass sets `focus_widget`, the control focused on show."""

    focus_widget: QWidget | None = None

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName(name)
        self.note = QLabel()  # why a control is off, in the palette's quiet colour
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: palette(mid);")

    def open_below(self, anchor: QWidget) -> None:
        """Show under `anchor`, right-aligned with it."""
        self.adjustSize()
        corner = anchor.mapToGlobal(QPoint(anchor.width(), anchor.height()))
        self.move(corner - QPoint(self.width(), 0))
        self.show()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.focus_widget is not None:
            self.focus_widget.setFocus(Qt.FocusReason.PopupFocusReason)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() == Qt.Key.Key_Escape:
            self.hide()
            return
        super().keyPressEvent(event)


def popup_button(parent: QWidget | None, text: str, name: str) -> QToolButton:
    """The text-only tool button that opens a popup panel."""
    button = QToolButton(parent)
    button.setText(text)
    button.setAccessibleName(name)
    button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
    return button
