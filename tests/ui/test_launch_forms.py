"""The Layers tab's launch box with llama-server's two forms: the pinned command to copy,
and under it which form the plan recommends and the let-fit-decide command."""

from __future__ import annotations

from rigspark_gui.core.model.model_spec import ModelSpec
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.ui.layers_tab import LayersTab


def test_the_launch_box_shows_both_forms(qtbot, llama8b: ModelSpec, rig2x3090: Rig,
                                         perf: SpeedModel) -> None:  # fmt: skip
    tab = LayersTab()
    qtbot.addWidget(tab)
    tab.set_context(llama8b, rig2x3090, PlanSettings(), perf, "Q4_K_M")
    tab.engine_combo.setCurrentIndex(tab.engine_combo.findData("llama.cpp"))
    command = tab.command_text.toPlainText()
    assert "llama-server" in command and " -ngl " in command
    notes = tab.command_notes.text().splitlines()
    recommended = [n for n in notes if n.startswith("• recommended: ")]
    fit = [n for n in notes if n.startswith("• let fit decide: ")]
    assert len(recommended) == 1 and len(fit) == 1
    assert recommended[0].removeprefix("• recommended: ").startswith(("pinned", "let fit decide"))
    assert "llama-server" in fit[0] and " -ngl " not in fit[0] and "-ot" not in fit[0]
