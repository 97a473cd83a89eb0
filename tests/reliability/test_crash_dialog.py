"""Uncaught exceptions on any thread land in the one error dialog, with the traceback."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from rigspark_gui.ui import crash, dialogs

pytestmark = pytest.mark.gui


@pytest.fixture
def hooks(qapp, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dialogs.ShownMessage]]:
    # pytest-qt's own hook is saved by monkeypatch and put back after the test.
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    dialogs.shown.clear()
    crash.install()
    yield dialogs.shown
    crash.uninstall()


class Emitter(QObject):
    fired = Signal()

    @Slot()
    def on_fired(self) -> None:
        raise RuntimeError("the slot broke")


def test_exception_in_a_slot(qtbot, hooks: list[dialogs.ShownMessage], capsys) -> None:
    emitter = Emitter()
    emitter.fired.connect(emitter.on_fired)

    emitter.fired.emit()

    (msg,) = hooks
    assert msg.kind == "exception" and msg.title == crash.TITLE
    assert "RuntimeError: the slot broke" in msg.message
    assert "on_fired" in msg.details and "Traceback" in msg.details
    assert "the slot broke" in capsys.readouterr().err  # still on stderr


def test_exception_in_a_python_thread(qtbot, hooks: list[dialogs.ShownMessage]) -> None:
    def work() -> None:
        raise ValueError("worker failed")

    thread = threading.Thread(target=work, name="importer")
    thread.start()
    thread.join()

    qtbot.waitUntil(lambda: bool(hooks), timeout=3000)
    (msg,) = hooks
    assert "in the background (importer)" in msg.message
    assert "ValueError: worker failed" in msg.message
    assert "work" in msg.details


class Failing(QRunnable):
    def run(self) -> None:
        raise KeyError("pool task failed")


def test_exception_in_a_qrunnable(qtbot, hooks: list[dialogs.ShownMessage]) -> None:
    QThreadPool.globalInstance().start(Failing())
    QThreadPool.globalInstance().waitForDone(3000)

    qtbot.waitUntil(lambda: bool(hooks), timeout=3000)
    (msg,) = hooks
    assert "KeyError" in msg.message and "pool task failed" in msg.message
    assert "in the background" in msg.message


def test_background_callback_failure_reaches_the_dialog(
    qtbot, hooks: list[dialogs.ShownMessage]
) -> None:
    from rigspark_gui.ui.background import run_in_background

    parent = QObject()

    def on_success(_result: object) -> None:
        raise ZeroDivisionError("callback broke")

    run_in_background(parent, lambda: 1, on_success, lambda _e, _d: None)

    qtbot.waitUntil(lambda: bool(hooks), timeout=3000)
    assert "ZeroDivisionError: callback broke" in hooks[0].message


def test_the_same_failure_is_shown_once(qtbot, hooks: list[dialogs.ShownMessage]) -> None:
    emitter = Emitter()
    emitter.fired.connect(emitter.on_fired)

    for _ in range(5):
        emitter.fired.emit()  # a repaint that raises every frame must not flood dialogs

    assert len(hooks) == 1


def test_thread_exit_is_quiet(qtbot, hooks: list[dialogs.ShownMessage]) -> None:
    thread = threading.Thread(target=sys.exit)
    thread.start()
    thread.join()
    qtbot.wait(50)

    assert hooks == []


def test_app_installs_the_hook_and_the_settings_store(
    qapp, hooks: list[dialogs.ShownMessage], monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication

    from rigspark_gui import app
    from rigspark_gui.ui import main_window, settings_store

    crash.uninstall()
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    made: list[dict[str, object]] = []

    class Window:
        def __init__(self, **kwargs: object) -> None:
            made.append(kwargs)
            # By the time the window is built, an uncaught error already has its dialog.
            assert sys.excepthook is crash._excepthook
            assert threading.excepthook is crash._thread_excepthook

        def show(self) -> None:
            pass

    monkeypatch.setattr(main_window, "MainWindow", Window)
    monkeypatch.setattr(settings_store, "open_settings", lambda: settings)
    monkeypatch.setattr(QApplication, "exec", lambda _self: 0)

    names = (qapp.applicationName(), qapp.organizationName(), qapp.applicationVersion())
    try:
        assert app.main([]) == 0
    finally:  # main() names the shared test QApplication; give it its names back
        qapp.setApplicationName(names[0])
        qapp.setOrganizationName(names[1])
        qapp.setApplicationVersion(names[2])
    assert made == [{"settings": settings}]
