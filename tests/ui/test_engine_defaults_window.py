"""A new plan in the window starts from the engine's own defaults and shows what
llama.cpp's fit would do beside RigSpark's plan; the Layers tab takes a pasted
llama.cpp command line and fit's own placement."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt

from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.core.placement import CPU
from rigspark_gui.resources import data_file
from rigspark_gui.ui import background, dialogs
from rigspark_gui.ui.main_window import MainWindow

ROOT = Path(__file__).resolve().parents[2]
RIG = ROOT / "examples" / "rig-2x3090.json"


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    rig = load_rig(RIG, load_gpu_database(data_file("gpus.json"), lenient=True))
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=rig, detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.show()
    w.session.set_model("llama-3.1-8b-instruct")
    return w


def test_a_new_plan_takes_the_engines_defaults(window) -> None:
    s = window.session.settings
    assert {"context", "flash_attn", "parallel"} <= s.engine_defaults
    c = window.controls
    # what the user sees: "auto" in the fields, a partly checked flash attention box
    assert c.context_spin.text().startswith("auto")
    assert c.parallel.text().endswith("auto")
    assert c.flash_attn.checkState() is Qt.CheckState.PartiallyChecked
    plan = window.session.plan
    assert plan is not None and plan.resolved is not None and plan.fit is not None
    assert plan.resolved.parallel == 4 and plan.resolved.kv_unified
    assert plan.resolved.flash_attn
    assert "flash attention (on)" in c.flash_attn.text().lower()
    # the plan's context is what it resolved to, shown in the spin box's tooltip
    assert f"{plan.settings.context:,} tokens" in c.context_spin.toolTip()
    # llama.cpp alone runs it over both GPUs at the full trained context; RigSpark's
    # plan keeps it on one: the window says so in a line of its own
    assert "llama.cpp alone would" in window.paths_tab.summary.text()


def test_pinning_a_setting_takes_it_off_auto(window, qtbot) -> None:
    c = window.controls
    c.context_spin.setValue(16384)
    assert not window.session.settings.is_auto("context")
    assert window.session.plan.settings.context == 16384
    c.flash_attn.setCheckState(Qt.CheckState.Unchecked)
    assert window.session.settings.flash_attn is False
    assert not window.session.settings.is_auto("flash_attn")
    qtbot.mouseClick(c.preset_buttons["auto"], Qt.MouseButton.LeftButton)
    assert window.session.settings.is_auto("context")


def test_the_layers_tab_places_a_pasted_command(window) -> None:
    window.tabs.setCurrentWidget(window.layers_tab)
    tab = window.layers_tab
    dialogs.answers.append("llama-server -m model.gguf -c 8192 -ngl 10 -ts 1,1")
    tab.paste_action.trigger()
    placement = tab._document.placement
    assert placement is not None
    assert placement.gpu_slots == 10
    on_gpus = {u.device for u in placement.units if u.device != CPU}
    assert on_gpus == {"gpu:0", "gpu:1"}
    dialogs.answers.append("llama-server -m model.gguf -ngl lots")
    tab.paste_action.trigger()
    assert "cannot be placed" in tab.message.text()
    assert tab._document.placement == placement  # nothing lost


def test_the_layers_tab_starts_from_fits_placement(window) -> None:
    window.tabs.setCurrentWidget(window.layers_tab)
    tab = window.layers_tab
    tab.fit_action.trigger()
    assert "As llama.cpp's fit places it" in tab.message.text()
    assert tab._document.placement is not None


def test_settings_left_to_the_engine_are_remembered_as_such(qtbot, tmp_path, monkeypatch):
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    rig = load_rig(RIG, load_gpu_database(data_file("gpus.json"), lenient=True))
    path = str(tmp_path / "remember.ini")
    w = MainWindow(rig=rig, detect_on_start=False,
                   settings=QSettings(path, QSettings.Format.IniFormat))  # fmt: skip
    qtbot.addWidget(w)
    w.show()
    w.session.set_model("llama-3.1-8b-instruct")
    w.session.update_settings(parallel=2)  # pinned; context and flash attention stay auto
    w.close()
    again = MainWindow(rig=rig, detect_on_start=False,
                       settings=QSettings(path, QSettings.Format.IniFormat))  # fmt: skip
    qtbot.addWidget(again)
    s = again.session.settings
    assert s.is_auto("context") and s.is_auto("flash_attn")
    assert not s.is_auto("parallel") and s.parallel == 2
