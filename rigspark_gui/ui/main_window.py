"""The main window (placeholder until the planner view lands)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QMainWindow

from rigspark_gui.identity import APP_NAME


class MainWindow(QMainWindow):
    def __init__(self) -> None:
        super().__init__()
        self.setWindowTitle(APP_NAME)
        self.setCentralWidget(QLabel("RigSpark"))
