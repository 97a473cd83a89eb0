"""File ▸ Export plan report… and File ▸ Open plan… as a user drives them."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QFileDialog

from rigspark_gui.report.export import FILTERS
from rigspark_gui.report.model import load_report
from rigspark_gui.ui import background, dialogs
from rigspark_gui.ui.main_window import MainWindow

from .conftest import example_rig


@pytest.fixture(autouse=True)
def _headless(monkeypatch):
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    dialogs.shown.clear()


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=example_rig(), detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.show()
    w.session.set_model("llama-3.3-70b-instruct")
    return w


def choose_save(monkeypatch, path, chosen_filter: str) -> list[str]:
    asked: list[str] = []

    def fake(parent, caption, directory, filters):
        asked.append(filters)
        return str(path), chosen_filter

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(fake))
    return asked


def test_export_action_writes_the_report(qtbot, window, monkeypatch, tmp_path) -> None:
    assert window.export_action.shortcut().toString() == "Ctrl+E"
    asked = choose_save(monkeypatch, tmp_path / "shared", FILTERS["json"])
    window.export_action.trigger()
    assert all(FILTERS[f] in asked[0] for f in ("html", "pdf", "md", "json"))
    path = tmp_path / "shared.json"  # the filter's suffix is added
    qtbot.waitUntil(path.exists)
    report = load_report(path)
    assert report.model.id == "llama-3.3-70b-instruct"
    assert report.paths == window.session.plan.paths  # the window's figures
    assert dialogs.shown == []
    assert "Exported the plan" in window.statusBar().currentMessage()
    assert window.export_action.isEnabled()


def test_export_by_typed_suffix(qtbot, window, monkeypatch, tmp_path) -> None:
    choose_save(monkeypatch, tmp_path / "plan.pdf", FILTERS["html"])
    window.export_action.trigger()
    qtbot.waitUntil((tmp_path / "plan.pdf").exists)
    assert (tmp_path / "plan.pdf").read_bytes().startswith(b"%PDF")


def test_export_error_is_shown(qtbot, window, monkeypatch, tmp_path) -> None:
    choose_save(monkeypatch, tmp_path / "missing" / "plan.html", FILTERS["html"])
    window.export_action.trigger()
    assert dialogs.shown and dialogs.shown[0].title == "Export plan report"
    assert "cannot write" in dialogs.shown[0].message
    assert window.export_action.isEnabled()


def test_cancelled_export_writes_nothing(window, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a: ("", "")))
    window.export_action.trigger()
    assert list(tmp_path.glob("*.html")) == [] and dialogs.shown == []


def test_open_plan_shows_it_read_only(qtbot, window, monkeypatch, tmp_path) -> None:
    choose_save(monkeypatch, tmp_path / "plan.json", FILTERS["json"])
    window.export_action.trigger()
    monkeypatch.setattr(
        QFileDialog,
        "getOpenFileName",
        staticmethod(lambda *a: (str(tmp_path / "plan.json"), "")),
    )
    window.open_plan_action.trigger()
    qtbot.waitUntil(lambda: getattr(window, "report_dialog", None) is not None)
    browser = window.report_browser
    assert window.report_dialog.isVisible()
    assert browser.isReadOnly()
    text = browser.toPlainText()
    assert "Llama 3.3 70B Instruct" in text and "multi-gpu" in text
    window.report_dialog.close()


def test_open_plan_rejects_a_bad_file(window, monkeypatch, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 7}')
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a: (str(bad), "")))
    window.open_plan_action.trigger()
    assert dialogs.shown[0].title == "Open plan"
    assert "unsupported report schema_version 7" in dialogs.shown[0].message


def test_export_runs_on_a_worker_thread(qtbot, window, monkeypatch, tmp_path) -> None:
    """The real pool: charts and the PDF are drawn off the GUI thread."""
    monkeypatch.setattr(background, "POOL", None)
    choose_save(monkeypatch, tmp_path / "plan.pdf", FILTERS["pdf"])
    window.export_action.trigger()
    qtbot.waitUntil(lambda: "Exported" in window.statusBar().currentMessage(), timeout=20000)
    assert (tmp_path / "plan.pdf").read_bytes().startswith(b"%PDF")
    assert dialogs.shown == []


def test_open_plan_can_plan_it_here(qtbot, window, monkeypatch, tmp_path) -> None:
    """A shared report brings its rig, model and settings into the window."""
    from rigspark_gui.core.model.ggml_types import KvCacheType

    window.session.set_model("qwen3-14b")
    window.session.update_settings(context=16384, kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0,
                                   flash_attn=True)  # fmt: skip
    choose_save(monkeypatch, tmp_path / "shared.json", FILTERS["json"])
    window.export_action.trigger()
    window.session.set_model("llama-3.1-8b-instruct")
    window.session.update_settings(context=4096, kv_k=KvCacheType.F16, kv_v=KvCacheType.F16)
    monkeypatch.setattr(
        QFileDialog, "getOpenFileName", staticmethod(lambda *a: (str(tmp_path / "shared.json"), ""))
    )
    window.open_plan_action.trigger()
    qtbot.mouseClick(window.restore_plan_button, Qt.MouseButton.LeftButton)
    s = window.session.settings
    assert window.session.spec.id == "qwen3-14b"
    assert (s.context, s.kv_k) == (16384, KvCacheType.Q8_0)
    assert "here" in window.statusBar().currentMessage()


def test_open_plan_restores_a_hand_edited_placement(qtbot, window, monkeypatch, tmp_path) -> None:
    """A report saved after dragging layers brings that placement back, undoable."""
    from rigspark_gui.core.placement import CPU

    window.session.set_model("llama-3.1-8b-instruct")
    window.tabs.setCurrentWidget(window.layers_tab)
    layers = window.layers_tab
    start = layers.document.placement
    moved = [u.unit for u in start.blocks if u.device != CPU][-2:]
    layers.document.move_units(moved, CPU)
    assert layers.edited_placement() is not None
    choose_save(monkeypatch, tmp_path / "edited.json", FILTERS["json"])
    window.export_action.trigger()
    assert load_report(tmp_path / "edited.json").placement_edited

    window.session.set_model("qwen3-14b")
    window.tabs.setCurrentWidget(window.paths_tab)
    monkeypatch.setattr(
        QFileDialog, "getOpenFileName", staticmethod(lambda *a: (str(tmp_path / "edited.json"), ""))
    )
    window.open_plan_action.trigger()
    qtbot.mouseClick(window.restore_plan_button, Qt.MouseButton.LeftButton)
    assert window.session.spec.id == "llama-3.1-8b-instruct"
    assert window.tabs.currentWidget() is layers
    for unit in moved:
        assert layers.document.placement.unit(unit).device == CPU
    assert layers.edited_placement() is not None
    assert "hand-edited placement" in window.statusBar().currentMessage()
    layers.document.undo_stack.undo()  # back to the plan's own placement
    assert layers.edited_placement() is None
