"""A hybrid model's recurrent state on screen: its own segment and legend entry in the
Layers tab's capacity bars, named in their tooltips, apart from the attention KV."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtWidgets import QLabel

from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.ui.capacity_bar import SEGMENTS
from rigspark_gui.ui.layers_tab import LayersTab
from tests.conftest import make_rig, spec_of
from tests.core.test_hybrid_memory import QWEN35_9B

# RIGSPARK_SHOTS=DIR saves the tab as a picture to look at
SHOTS = os.environ.get("RIGSPARK_SHOTS")


def test_layers_tab_names_the_recurrent_state(qtbot, perf: SpeedModel) -> None:
    tab = LayersTab()
    qtbot.addWidget(tab)
    spec = spec_of(QWEN35_9B, "qwen3.5-9b", ("Q4_K_M",))
    tab.set_context(spec, make_rig(1), PlanSettings(context=32768, parallel=4), perf, "Q4_K_M")
    tab.resize(1200, 700)
    tab.show()
    qtbot.waitExposed(tab)
    assert "recurrent state" in [name for name, _ in SEGMENTS]
    legends = [w.text() for w in tab.findChildren(QLabel)]
    assert any("recurrent state" in t.replace("&nbsp;", " ") for t in legends)
    bar = tab.lane("gpu:0").bar
    tip = bar.toolTip()
    assert "recurrent state 0.20 GiB" in tip and "whatever the KV cache type" in tip
    # the attention KV alone: 8 layers of 32, 32768 cells of 4 x 256 f16 K and V
    assert "KV cache 1.00 GiB\nrecurrent state" in tip
    if SHOTS:
        tab.grab().save(str(Path(SHOTS) / "layers_recurrent_state.png"))


def test_an_attention_model_shows_no_state(qtbot, llama8b, perf: SpeedModel) -> None:
    tab = LayersTab()
    qtbot.addWidget(tab)
    tab.set_context(llama8b, make_rig(1), PlanSettings(context=8192), perf, "Q4_K_M")
    assert "recurrent state" not in tab.lane("gpu:0").bar.toolTip()
