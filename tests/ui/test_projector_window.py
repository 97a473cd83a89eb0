"""A vision model in the window: Gemma 3 27B's projector shows on GPU 0 in the Paths
chart and the Layers lanes; "Text only" takes it away and gives the memory back."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from rigspark_gui.ui import background, dialogs
from tests.ui.test_main_window import pick


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    dialogs.shown.clear()


def _gpu_lane_text(window) -> tuple[str, str]:
    bar = window.layers_tab.lane("gpu:0").bar
    return bar.text, bar.toolTip()


def test_gemma3_shows_its_projector_and_text_only_removes_it(qtbot, window) -> None:
    pick(qtbot, window, "gemma 3 27b")
    assert window.session.spec.id == "gemma-3-27b-it"
    assert window.session.spec.projector is not None
    plan = window.session.plan
    assert plan.projector is not None and plan.projector.device == "gpu:0"
    # Paths: its own segment in the recommended path's bar
    rows = window.paths_tab.fit_chart.spec.rows
    rec = next(r for r in rows if r.recommended)
    seg = next(s for s in rec.segments if s.role == "projector")
    assert seg.n_bytes == plan.projector.device_bytes
    # Layers: GPU 0's lane names it
    window.tabs.setCurrentWidget(window.layers_tab)
    _, tip = _gpu_lane_text(window)
    assert "projector" in tip
    # the box is offered for a model that has a projector; ticking it frees the memory
    box = window.controls.text_only
    assert box.isEnabled() and not box.isChecked()
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
    assert window.session.settings.text_only
    assert window.session.plan.projector is None
    assert all(d.projector_bytes == 0 for d in window.session.plan.device_loads)
    _, tip = _gpu_lane_text(window)
    assert "projector" not in tip


def test_a_text_model_offers_no_text_only_box(qtbot, window) -> None:
    pick(qtbot, window, "llama 3.1 8b")
    assert not window.controls.text_only.isEnabled()
    assert window.session.plan.projector is None


def test_a_draft_model_shows_its_memory_per_device_and_its_speed_basis(qtbot, window) -> None:
    pick(qtbot, window, "qwen2.5 32b instruct")
    assert window.session.spec.id == "qwen2.5-32b-instruct"
    combo = window.controls.draft
    assert combo.isEnabled()
    i = combo.findData("qwen2.5-0.5b-instruct")
    assert i > 0 and combo.findData("llama-3.2-1b-instruct") < 0  # another vocabulary
    combo.setCurrentIndex(i)
    plan = window.session.plan
    assert plan.draft is not None and plan.draft.model_id == "qwen2.5-0.5b-instruct"
    assert plan.draft.speed_basis.startswith("unknown")
    gpu = next(d for d in plan.device_loads if d.device == "gpu:0")
    assert gpu.draft_bytes == plan.draft.on()["gpu:0"]
    window.tabs.setCurrentWidget(window.layers_tab)
    _, tip = _gpu_lane_text(window)
    assert "draft model" in tip
    assert "-md qwen2.5-0.5b-instruct-Q8_0.gguf" in window.layers_tab.command_text.toPlainText()
    combo.setCurrentIndex(0)  # no draft
    assert window.session.plan.draft is None
