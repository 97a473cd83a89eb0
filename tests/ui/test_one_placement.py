"""One plan, one placement: the Layers tab starts from the plan's placement, a hand edit
survives settings changes that keep it valid, and the exported report and the command
show the placement on screen (issue: one plan on every surface)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QFileDialog

from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.cli import main as cli
from rigspark_gui.report.export import FILTERS
from rigspark_gui.resources import data_file
from rigspark_gui.ui import background
from rigspark_gui.ui.main_window import MainWindow

ROOT = Path(__file__).resolve().parents[2]
RIG = ROOT / "examples" / "rig-2x3090.json"


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    rig = load_rig(RIG, load_gpu_database(data_file("gpus.json"), lenient=True))
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=rig, detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.show()
    w.session.set_model("gpt-oss-20b")
    w.session.update_settings(context=8192)
    w.tabs.setCurrentWidget(w.layers_tab)
    return w


def test_the_layers_tab_starts_from_the_plans_placement(window, capsys) -> None:
    plan = window.session.plan
    assert window.layers_tab.document.placement == plan.placement
    shown = window.layers_tab.command_text.toPlainText()
    assert cli(["place", "--model", "gpt-oss-20b", "--rig", str(RIG), "--context", "8192",
                "--json"]) == 0  # fmt: skip
    placed = json.loads(capsys.readouterr().out)
    llama = next(c for c in placed["launch_commands"] if c["engine"] == "llama.cpp")
    assert llama["text"] == shown


def _move_one_block(window) -> str:
    tab = window.layers_tab
    placement = tab.document.placement
    block = next(u for u in placement.units if u.unit.startswith("blk.") and u.device != "cpu")
    assert tab.document.move_units([block.unit], "cpu")
    return block.unit


def test_a_hand_edit_survives_a_settings_change_and_is_exported(
    qtbot, window, tmp_path, monkeypatch
) -> None:
    unit = _move_one_block(window)
    tab = window.layers_tab
    assert tab.edited_placement() is not None
    window.session.update_settings(prompt_tokens=2048)
    moved = {u.unit: u.device for u in tab.document.placement.units}
    assert moved[unit] == "cpu"
    assert "kept" in tab.message.text()
    assert tab.undo_action.isEnabled()

    target = tmp_path / "plan.json"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a: (str(target), FILTERS["json"]))
    )
    window.export_action.trigger()
    qtbot.waitUntil(target.exists)
    report = json.loads(target.read_text())
    assert report["placement_edited"] is True
    exported = {u["unit"]: u["device"] for u in report["placement"]["units"]}
    assert exported[unit] == "cpu"
    llama = next(c for c in report["launch_commands"] if c["engine"] == "llama.cpp")
    assert llama["text"] == tab.command_text.toPlainText()


def test_a_new_model_starts_over(window) -> None:
    _move_one_block(window)
    window.session.set_model("llama-3.1-8b-instruct")
    window.tabs.setCurrentWidget(window.paths_tab)
    window.tabs.setCurrentWidget(window.layers_tab)
    assert window.layers_tab.edited_placement() is None
    assert window.layers_tab.document.placement == window.session.plan.placement
