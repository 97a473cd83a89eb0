"""The window fits from 1024×700 up: it does not grow past the screen a newcomer has,
the top bar's controls do not overlap, and no chart label runs off its plot."""

from __future__ import annotations

import itertools

import pytest
from PySide6.QtCore import QSettings

from rigspark_gui.ui.main_window import MainWindow
from tests.ui.conftest import rig_2x3090


@pytest.fixture
def small(qtbot, tmp_path, monkeypatch):
    from rigspark_gui.ui import background

    monkeypatch.setattr(background, "POOL", background.SyncPool())
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=rig_2x3090(), detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.resize(1024, 700)
    w.show()
    qtbot.waitExposed(w)
    return w


def _settle(qtbot, w) -> None:
    qtbot.wait(50)


@pytest.mark.parametrize("model", ["llama-3.3-70b-instruct", "qwen3-30b-a3b"])
@pytest.mark.parametrize("tab", ["paths_tab", "layers_tab", "kv_tab", "catalog_tab"])
def test_the_window_stays_1024_wide(qtbot, small, model: str, tab: str) -> None:
    small.session.set_model(model)
    small.tabs.setCurrentWidget(getattr(small, tab))
    _settle(qtbot, small)
    assert small.width() <= 1030 and small.height() <= 700
    assert small.minimumSizeHint().width() <= 1030


def test_the_top_bar_controls_do_not_overlap(qtbot, small) -> None:
    c = small.controls
    widgets = [c.model_picker, c.quant, c.backend, c.context_slider, c.context_spin,
               c.kv_k, c.kv_v, c.kv_link, c.flash_attn, c.parallel, c.prompt,
               c.min_speed, c.gpu_backend, *c.preset_buttons.values()]  # fmt: skip
    rects = [(w, w.geometry().translated(w.parentWidget().mapTo(c, w.pos()) - w.pos()))
             for w in widgets]  # fmt: skip
    for (a, ra), (b, rb) in itertools.combinations(rects, 2):
        assert not ra.intersects(rb), (a.objectName() or type(a).__name__, type(b).__name__)
    for w, r in rects:
        assert r.right() <= c.width() and r.width() >= min(w.minimumSizeHint().width(), 40)


def test_chart_labels_stay_inside_their_plots(qtbot, small) -> None:
    small.session.set_model("llama-3.3-70b-instruct")
    small.session.update_settings(context=32768)
    _settle(qtbot, small)
    checked = 0
    for chart in (small.paths_tab.fit_chart, small.paths_tab.speed_chart):
        view = chart.plot.getViewBox()
        right = view.viewRange()[0][1]
        for item in view.addedItems:
            if hasattr(item, "textItem") and item.isVisible() and item.textItem.toPlainText():
                box = item.mapRectToView(item.boundingRect())
                assert box.right() <= right * 1.001, item.textItem.toPlainText()
                checked += 1
    assert checked >= 8  # four paths' labels in each chart


def test_the_layers_toolbar_fits_and_keeps_every_tool(qtbot, small) -> None:
    small.session.set_model("qwen3-30b-a3b")
    small.tabs.setCurrentWidget(small.layers_tab)
    _settle(qtbot, small)
    tab = small.layers_tab
    toolbar = tab._toolbar
    assert toolbar.sizeHint().width() <= toolbar.width() + 2  # no » overflow at 1024 px
    assert tab.experts_button.isVisible()
    menu_texts = [a.text() for a in tab.experts_menu.actions()]
    assert "First N layers' experts to CPU" in menu_texts
    tab.first_n_spin.setValue(4)
    tab.first_n_action.trigger()
    moved = [u for u in tab.document.placement.units if u.experts_device == "cpu"]
    assert len(moved) == 4
    assert tab.undo_action.text() == "Undo" and tab.undo_action.toolTip().startswith("Undo ")
