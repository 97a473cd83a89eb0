"""View ▸ Calibrate speed…: a user starts a calibration, watches it, reads predicted
against measured, and the window's speeds follow; or cancels and nothing is kept."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from rigspark_gui.calibrate import load_calibration, synth
from rigspark_gui.core.plan.paths import PathName
from rigspark_gui.ui.main_window import MainWindow
from tests.calibrate.test_calibrate import TINY, fake_bin  # noqa: F401  (fixture)
from tests.ui.conftest import rig_2x3090


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    from rigspark_gui.calibrate import calibration

    monkeypatch.setattr(synth, "DEFAULT_SHAPE", TINY)
    monkeypatch.setattr(calibration, "DEFAULT_QUANTS", ("Q8_0", "Q4_0"))  # the stand-in's
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=rig_2x3090(), detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.show()
    return w


def _cpu_basis(window) -> str:
    return next(p for p in window.session.plan.paths if p.path is PathName.CPU).throughput.basis


def test_calibrating_shows_measured_speeds_and_the_plan_uses_them(
    qtbot,
    window,
    fake_bin,  # noqa: F811
) -> None:
    assert "calibrated on this machine" not in _cpu_basis(window)
    window.calibrate_action.trigger()
    dialog = window.calibrate_dialog
    assert "llama-bench" in dialog.found.text() and dialog.start.isEnabled()

    qtbot.mouseClick(dialog.start, qtbot_left())
    qtbot.waitUntil(
        lambda: dialog.table.isVisible() or "failed" in dialog.step.text(), timeout=30000
    )
    assert "failed" not in dialog.step.text(), dialog.step.text()

    assert dialog.table.rowCount() == 2 * 3  # two quantizations on the CPU and two GPUs
    devices = {dialog.table.item(r, 0).text() for r in range(dialog.table.rowCount())}
    assert window.session.rig.cpu.name in devices
    assert dialog.progress.value() == dialog.progress.maximum()
    assert "calibrated on this machine" in _cpu_basis(window)
    assert load_calibration() is not None
    assert dialog.close_button.isVisible() and not dialog.cancel.isVisible()


def test_cancel_keeps_nothing(qtbot, window, fake_bin) -> None:  # noqa: F811
    window.calibrate_action.trigger()
    dialog = window.calibrate_dialog
    qtbot.mouseClick(dialog.start, qtbot_left())
    qtbot.mouseClick(dialog.cancel, qtbot_left())
    qtbot.waitUntil(lambda: "Cancelled" in dialog.step.text(), timeout=30000)
    assert load_calibration() is None
    assert dialog.start.isEnabled()
    assert "calibrated on this machine" not in _cpu_basis(window)


def test_without_llama_cpp_the_dialog_says_how_to_get_it(qtbot, window, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    window.calibrate_action.trigger()
    dialog = window.calibrate_dialog
    assert "llama.cpp was not found" in dialog.found.text()
    assert not dialog.start.isEnabled()


def qtbot_left():
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton
