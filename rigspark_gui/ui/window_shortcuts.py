"""The window's own shortcuts work wherever the focus is.

Before a key press reaches a shortcut, Qt asks the focused widget whether it wants the
key itself (a ShortcutOverride event). Text fields say yes to their editing keys, and on
X11 a line edit also claims Ctrl+E ("end of line", from emacs): File ▸ Export did nothing
while the model picker or the Catalog filter had the focus, and the path typed next went
into the field. `WindowShortcuts` answers no for the window's File, View and Help keys
only, so the fields keep every other key (undo, copy, paste, select all...).
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QEvent, QObject, Slot
from PySide6.QtGui import QAction, QKeyEvent
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QLineEdit,
    QPlainTextEdit,
    QTextEdit,
    QWidget,
)

# Widgets that claim keys for editing. A combo box and a spin box ask their own line
# edit directly, not through its event filters, so they are watched themselves too.
TEXT_FIELDS = (QLineEdit, QAbstractSpinBox, QComboBox, QTextEdit, QPlainTextEdit)


class WindowShortcuts(QObject):
    """Keeps the keys of `actions` for the actions while any text field of `window` has
    the focus (fields focused later are watched from their first focus)."""

    def __init__(self, window: QWidget, actions: Iterable[QAction]) -> None:
        super().__init__(window)
        self._window = window
        self._keys = {
            sequence[0].toCombined()
            for action in actions
            for sequence in action.shortcuts()
            if sequence.count() == 1
        }
        for field in window.findChildren(QWidget):
            self._watch(field)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.focusChanged.connect(self._on_app_focus_changed)

    def keeps(self, event: QKeyEvent) -> bool:
        """Whether the key of `event` belongs to one of the window's actions."""
        return event.keyCombination().toCombined() in self._keys

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and self.keeps(event)
        ):
            event.ignore()  # not the field's: the window's shortcut runs
            return True
        return super().eventFilter(watched, event)

    def _watch(self, widget: QWidget) -> None:
        if isinstance(widget, TEXT_FIELDS):
            widget.installEventFilter(self)  # once: installing again only moves it first

    @Slot(QWidget, QWidget)
    def _on_app_focus_changed(self, _old: QWidget | None, new: QWidget | None) -> None:
        # a field built after the window (a lazily made tab part) is watched once focused
        widget = new
        while widget is not None and widget is not self._window:
            self._watch(widget)
            widget = widget.parentWidget()
