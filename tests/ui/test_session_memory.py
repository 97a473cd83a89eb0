"""Menus, feedback and files a newcomer expects: Open/Save rig in the File menu, help
that explains the numbers, shortcuts listed, Copy that says it copied, a saved rig that
others can read and that opens again as this machine, not a what-if."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QFileDialog

from tests.ui.conftest import rig_2x3090


def test_file_menu_holds_open_and_save_rig(window) -> None:
    texts = [a.text().replace("&", "") for a in window.menuBar().actions()[0].menu().actions()]
    assert "Open rig…" in texts and "Save rig…" in texts


def test_help_explains_the_numbers_and_lists_shortcuts(qtbot, window) -> None:
    window.numbers_action.trigger()
    text = window.help_box.text()
    assert "llama.cpp's own allocator" in text and "calibrated on" in text
    window.help_box.close()
    window.shortcuts_action.trigger()
    shortcuts = window.help_box.text()
    assert "Ctrl+E" in shortcuts and "Export plan report" in shortcuts
    assert "Ctrl+B" in shortcuts


def test_copy_says_what_it_copied(qtbot, window) -> None:
    window.session.set_model("llama-3.1-8b-instruct")
    window.tabs.setCurrentWidget(window.layers_tab)
    tab = window.layers_tab
    qtbot.mouseClick(tab.copy_button, qtbot_left())
    assert QGuiApplication.clipboard().text() == tab.command_text.toPlainText()
    assert tab.message.text().startswith("Copied the llama.cpp")


def test_a_saved_rig_is_readable_named_and_opens_as_it_was(
    qtbot,
    window,
    tmp_path,
    monkeypatch,
) -> None:
    panel = window.rig_panel
    from rigspark_gui.catalog.device_overhead import rig_with_overhead

    # as detection hands it over: each GPU's backend context as its reserve
    detected = rig_with_overhead(replace(rig_2x3090(), name="This machine"))
    panel.set_detected(detected)
    target = tmp_path / "workstation.json"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a: (str(target), "")))
    window.save_rig_action.trigger()
    mode = stat.S_IMODE(os.stat(target).st_mode)
    mask = os.umask(0)
    os.umask(mask)
    assert mode == 0o666 & ~mask  # the user's usual mode, not owner-only
    assert '"name": "workstation"' in Path(target).read_text()
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a: (str(target), "")))
    window.open_rig_action.trigger()
    assert not panel.is_edited()
    assert not panel.edited_badge.isVisible()


def qtbot_left():
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton


def test_the_wrong_kind_of_file_is_one_plain_sentence(tmp_path) -> None:
    import json

    import pytest

    from rigspark_gui.catalog.rig_file import load_rig
    from rigspark_gui.core.errors import RigSparkError
    from rigspark_gui.report.model import load_report

    rig = tmp_path / "rig.json"
    rig.write_text(json.dumps({"schema_version": 1, "ram_total_bytes": 1 << 34, "gpus": []}))
    with pytest.raises(RigSparkError, match=r"rig\.json is a rig file, not a plan report"):
        load_report(rig)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schema_version": 1, "paths": [], "model": {}}))
    with pytest.raises(RigSparkError, match="is a plan report, not a rig"):
        load_rig(plan, None)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema_version": 1, "title": "x"}))
    with pytest.raises(RigSparkError, match="is not a RigSpark plan report") as err:
        load_report(other)
    assert "Field required" not in str(err.value)


def test_the_open_rig_and_the_export_folder_come_back(qtbot, tmp_path, monkeypatch) -> None:
    import json

    from PySide6.QtCore import QSettings

    from rigspark_gui.report.export import FILTERS
    from rigspark_gui.ui import background
    from rigspark_gui.ui.main_window import MainWindow

    monkeypatch.setattr(background, "POOL", background.SyncPool())
    ini = str(tmp_path / "remember.ini")
    rig_file = tmp_path / "cluster-node.json"
    body = {"schema_version": 1, "name": "node", "ram_total_bytes": 64 << 30,
            "gpus": [{"name": "NVIDIA GeForce RTX 4090"}]}  # fmt: skip
    rig_file.write_text(json.dumps(body))
    w = MainWindow(detect_on_start=False, settings=QSettings(ini, QSettings.Format.IniFormat))
    qtbot.addWidget(w)
    w.rig_panel.open_rig_file(rig_file)
    w.session.set_model("llama-3.1-8b-instruct")
    out = tmp_path / "reports"
    out.mkdir()
    asked: list[str] = []

    def save(parent, caption, start, filters):
        asked.append(start)
        return str(out / "mine.md"), FILTERS["md"]

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save))
    w.export_action.trigger()
    w.close()

    again = MainWindow(detect_on_start=False, settings=QSettings(ini, QSettings.Format.IniFormat))
    qtbot.addWidget(again)
    assert again.rig_panel.rig().name == "node" and again.rig_panel.open_path == rig_file
    again.session.set_model("llama-3.1-8b-instruct")
    again.export_action.trigger()
    assert Path(asked[-1]).parent == out and asked[-1].endswith(".md")
