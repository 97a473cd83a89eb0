"""The Layers tab's Copy feedback names the command on screen: switching the launcher
after copying clears "Copied the llama.cpp command"."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication

from rigspark_gui.core.model.model_spec import ModelSpec
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.ui.layers_tab import LayersTab


@pytest.fixture
def tab(qtbot, llama8b: ModelSpec, rig2x3090: Rig, perf: SpeedModel) -> LayersTab:
    w = LayersTab()
    qtbot.addWidget(w)
    w.set_context(llama8b, rig2x3090, PlanSettings(), perf, "Q4_K_M")
    return w


def test_switching_the_launcher_clears_what_was_copied(qtbot, tab: LayersTab) -> None:
    qtbot.mouseClick(tab.copy_button, Qt.MouseButton.LeftButton)
    assert tab.message.text() == "Copied the llama.cpp (llama-server) command."
    assert QGuiApplication.clipboard().text() == tab.command_text.toPlainText()

    tab.engine_combo.setCurrentIndex(tab.engine_combo.findData("koboldcpp"))
    assert "koboldcpp" in tab.command_text.toPlainText()
    assert "Copied" not in tab.message.text()

    qtbot.mouseClick(tab.copy_button, Qt.MouseButton.LeftButton)
    assert tab.message.text() == "Copied the koboldcpp command."
    tab.engine_combo.setCurrentIndex(tab.engine_combo.findData("llama.cpp"))
    assert tab.message.text() == ""


def test_other_messages_survive_a_launcher_switch(tab: LayersTab) -> None:
    tab.message.setText("Select layers first (click, Shift/Ctrl-click or drag a box)")
    tab.engine_combo.setCurrentIndex(tab.engine_combo.findData("ollama"))
    assert tab.message.text().startswith("Select layers first")
