"""`rigspark`: start the window."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PySide6.QtCore import QCoreApplication
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QWidget


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
    from PySide6.QtWidgets import QApplication

    from rigspark_gui.identity import APP_ID, APP_NAME, APP_VERSION, ORGANIZATION
    from rigspark_gui.ui import crash
    from rigspark_gui.ui.main_window import MainWindow
    from rigspark_gui.ui.settings_store import open_settings

    app = QApplication.instance() or QApplication(sys.argv if argv is None else argv)
    app.setApplicationName(APP_NAME)
    app.setApplicationVersion(APP_VERSION)
    app.setOrganizationName(ORGANIZATION)
    QApplication.setDesktopFileName(APP_ID)  # Wayland ties the window to the .desktop file
    QApplication.setWindowIcon(_app_icon())
    # From here on an uncaught error is a dialog, not a silent exit.
    crash.install()
    window = MainWindow(settings=open_settings())
    _report_when_painted(window, app)
    window.show()
    _exit_after_smoke_delay(app)
    return app.exec()


def _app_icon() -> QIcon:
    from PySide6.QtGui import QIcon

    from rigspark_gui.identity import ICON_FILE, ICON_PNG_FILE
    from rigspark_gui.resources import resource_file

    icon = QIcon()
    # The PNG keeps an icon when the SVG icon-engine plugin is missing.
    for name in (ICON_FILE, ICON_PNG_FILE):
        path = resource_file(name)
        if path.exists():
            icon.addFile(str(path))
    return icon


def _report_when_painted(window: QWidget, app: QCoreApplication) -> None:
    """RIGSPARK_EXIT_WHEN_PAINTED=1 prints the wall clock (ns) of the window's first paint
    and quits: benchmarks/bench_startup.py times launch to window with it."""
    if os.environ.get("RIGSPARK_EXIT_WHEN_PAINTED") != "1":
        return
    import time

    from PySide6.QtCore import QEvent, QObject

    class FirstPaint(QObject):
        def eventFilter(self, obj: QObject, event: QEvent) -> bool:
            if obj is window and event.type() == QEvent.Type.Paint:
                print(f"painted {time.time_ns()}", flush=True)
                window.removeEventFilter(self)
                app.quit()
            return False

    spy = FirstPaint(window)
    window.installEventFilter(spy)


def _exit_after_smoke_delay(app: QCoreApplication) -> None:
    """RIGSPARK_SMOKE_EXIT_MS=N quits N ms after start; packaging/smoke_test.sh uses it."""
    delay_ms = os.environ.get("RIGSPARK_SMOKE_EXIT_MS", "")
    if delay_ms.isdigit():
        from PySide6.QtCore import QTimer

        QTimer.singleShot(int(delay_ms), app.quit)


if __name__ == "__main__":
    sys.exit(main())
