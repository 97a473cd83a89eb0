"""Every message box the window shows is built here, so tests can switch them off.

With `HEADLESS = True` (tests, offscreen screenshots) nothing modal opens: each
message is recorded in `shown` instead, where a test can assert what the user would
have read. A modal box in a test would block the event loop until a timeout.
"""

from __future__ import annotations

from typing import NamedTuple

from PySide6.QtWidgets import QMessageBox, QWidget

HEADLESS = False


class ShownMessage(NamedTuple):
    kind: str
    title: str
    message: str
    details: str = ""


shown: list[ShownMessage] = []


def show_error(parent: QWidget | None, title: str, message: str) -> None:
    """Tell the user something they did (or a file they chose) failed, and why."""
    if HEADLESS:
        shown.append(ShownMessage("error", title, message))
        return
    QMessageBox.critical(parent, title, message)


def show_exception(parent: QWidget | None, title: str, message: str, details: str) -> None:
    """Report a failure of the program itself: a short message, the traceback behind a
    "Show Details" button, so the user can copy it into a bug report."""
    if HEADLESS:
        shown.append(ShownMessage("exception", title, message, details))
        return
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Critical)
    box.setWindowTitle(title)
    box.setText(message)
    box.setDetailedText(details)
    box.setStandardButtons(QMessageBox.StandardButton.Close)
    box.exec()


# what a headless run answers when a text is asked for (tests set it)
answers: list[str] = []


def ask_text(parent: QWidget | None, title: str, label: str) -> str | None:
    """A multi-line text from the user (None: cancelled). Headless: the next queued
    answer, or None."""
    if HEADLESS:
        return answers.pop(0) if answers else None
    from PySide6.QtWidgets import QInputDialog

    text, ok = QInputDialog.getMultiLineText(parent, title, label)
    return text if ok else None
