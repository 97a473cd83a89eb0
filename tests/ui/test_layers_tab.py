"""The Layers tab driven like a user: drops through the lane models, keys, undo."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt

from rigspark_gui.core.model.model_spec import ModelSpec
from rigspark_gui.core.placement import CPU, Verdict
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.ui.lane_model import LAYERS_MIME, encode_units
from rigspark_gui.ui.layers_tab import LayersTab
from tests.conftest import LLAMA_31_8B, make_rig, spec_of

MOVE = Qt.DropAction.MoveAction


@pytest.fixture
def tab(qtbot, llama8b: ModelSpec, rig2x3090: Rig, perf: SpeedModel) -> LayersTab:
    w = LayersTab()
    qtbot.addWidget(w)
    w.set_context(llama8b, rig2x3090, PlanSettings(), perf, "Q4_K_M")
    return w


def _drop(tab: LayersTab, units: list[str], device: str) -> bool:
    model = tab.lane_model(device)
    return model.dropMimeData(encode_units(units), MOVE, -1, 0, QModelIndex())


def _drag_rows(tab: LayersTab, source: str, rows: list[int], target: str) -> bool:
    src = tab.lane_model(source)
    mime = src.mimeData([src.index(r) for r in rows])
    assert mime.hasFormat(LAYERS_MIME)
    dst = tab.lane_model(target)
    assert dst.canDropMimeData(mime, MOVE, -1, 0, QModelIndex())
    return dst.dropMimeData(mime, MOVE, -1, 0, QModelIndex())


def test_auto_placement_fills_the_lanes(tab: LayersTab) -> None:
    units = [u for d in ("gpu:0", "gpu:1", CPU) for u in tab.lane_model(d).unit_ids()]
    assert len(units) == 34 and tab.lane_model(CPU).unit_ids() == ["input"]
    assert "Fits" in tab.lane("gpu:0").bar.text
    assert "fits" in tab.summary.text() and "tok/s" in tab.summary.text()
    assert "llama-server" in tab.command_text.toPlainText()


def test_lane_model_passes_the_model_tester(tab: LayersTab, qtmodeltester) -> None:
    qtmodeltester.check(tab.lane_model("gpu:0"))


def test_drag_between_lanes_moves_and_undo_redo_restore(tab: LayersTab) -> None:
    before = tab.document.placement
    src = tab.lane_model("gpu:0")
    first_two = src.unit_ids()[:2]
    assert _drag_rows(tab, "gpu:0", [0, 1], "gpu:1")
    p = tab.document.placement
    assert p is not None and all(p.unit(u).device == "gpu:1" for u in first_two)
    assert not set(first_two) & set(src.unit_ids())
    assert set(first_two) <= set(tab.lane_model("gpu:1").unit_ids())
    assert "-ot" in tab.command_text.toPlainText()
    tab.undo_action.trigger()
    assert tab.document.placement == before and src.unit_ids()[:2] == first_two
    tab.redo_action.trigger()
    assert tab.document.placement == p


def test_source_remove_rows_after_a_move_drop_changes_nothing(tab: LayersTab) -> None:
    src = tab.lane_model("gpu:0")
    n_before = src.rowCount()
    assert _drag_rows(tab, "gpu:0", [3], "gpu:1")
    after_drop = tab.document.placement
    rows = src.rowCount()
    assert rows == n_before - 1
    # what QAbstractItemView does to the source after a MoveAction drop
    assert src.removeRows(3, 1, QModelIndex()) is False
    assert src.removeRows(0, rows, QModelIndex()) is False
    assert src.rowCount() == rows and tab.document.placement == after_drop
    assert tab.document.undo_stack.count() == 1


def test_drop_on_own_lane_and_refused_drop(tab: LayersTab) -> None:
    own = tab.lane_model("gpu:0").unit_ids()[:1]
    assert not _drop(tab, own, "gpu:0")
    assert not _drop(tab, ["input"], "gpu:1")
    assert "input embedding" in tab.message.text()
    assert tab.document.undo_stack.count() == 0


def test_keyboard_move_of_a_selection(tab: LayersTab) -> None:
    lane = tab.lane("gpu:1")
    model = lane.model
    sel = lane.view.selectionModel()
    picked = model.unit_ids()[:3]
    for r in range(3):
        sel.select(model.index(r), QItemSelectionModel.SelectionFlag.Select)
    action = tab.move_action(CPU)
    assert action.shortcut().toString() == "Alt+3"
    action.trigger()
    p = tab.document.placement
    assert p is not None and all(p.unit(u).device == CPU for u in picked)
    assert set(picked) <= set(tab.lane_model(CPU).unit_ids())


def test_summary_line_changes_after_a_move(tab: LayersTab) -> None:
    before = tab.summary.text()
    assert _drop(tab, [f"blk.{i}" for i in range(10)], CPU)
    assert tab.summary.text() != before and "Decode" in tab.summary.text()


def test_capacity_bar_warns_in_text_when_overcommitted(qtbot, perf: SpeedModel) -> None:
    w = LayersTab()
    qtbot.addWidget(w)
    rig = make_rig(2, vram_gib=6)
    w.set_context(spec_of(LLAMA_31_8B), rig, PlanSettings(), perf, "Q8_0")
    assert "OVER" not in w.lane("gpu:0").bar.text
    all_units = [f"blk.{i}" for i in range(32)] + ["output"]
    assert _drop(w, all_units, "gpu:0")
    bar = w.lane("gpu:0").bar
    assert bar.overcommitted and "⚠ OVER by" in bar.text
    assert "does not fit" in w.summary.text()
    w.undo_action.trigger()
    assert not w.lane("gpu:0").bar.overcommitted


def test_strategies_and_commands(tab: LayersTab) -> None:
    tab.cpu_action.trigger()
    assert tab.lane_model("gpu:0").rowCount() == 0
    assert "-ngl 0" in tab.command_text.toPlainText()
    tab.even_action.trigger()
    assert tab.lane_model(CPU).unit_ids() == ["input"]
    tab.fastest_action.trigger()
    tab.auto_action.trigger()
    assert tab.document.undo_stack.count() >= 2
    tab.engine_combo.setCurrentIndex(tab.engine_combo.findData("vllm"))
    assert "vllm serve" in tab.command_text.toPlainText()
    assert _drop(tab, ["blk.5"], CPU)
    assert "cannot" in tab.command_text.toPlainText()
    assert not tab.copy_button.isEnabled()


def test_moe_experts_to_cpu(qtbot, perf: SpeedModel) -> None:
    g = replace(LLAMA_31_8B, n_ff=0, n_expert=8, n_expert_used=2, n_ff_expert=4096)
    w = LayersTab()
    qtbot.addWidget(w)
    w.set_context(spec_of(g), make_rig(1, vram_gib=80), PlanSettings(), perf, "Q4_K_M")
    before = w.summary.text()
    w.first_n_spin.setValue(4)
    w.first_n_action.trigger()
    p = w.document.placement
    assert p is not None and p.unit("blk.3").experts_device == CPU
    assert p.unit("blk.4").experts_device is None
    lane = w.lane_model("gpu:0")
    row = lane.unit_ids().index("blk.0")
    text = lane.data(lane.index(row))
    moved = lane.data(lane.index(lane.unit_ids().index("blk.5")))
    assert "here" in text and ") on CPU" in text  # what stays, and where the experts went
    assert "here" not in moved
    # a layer whose experts left counts what stays, not its full size
    assert lane._rows[row].bytes < lane._rows[lane.unit_ids().index("blk.5")].bytes
    assert w.summary.text() != before
    # exactly llama.cpp's --n-cpu-moe 4, and the command says so
    assert "--n-cpu-moe 4" in w.command_text.toPlainText()
    loads = {x.device: x for x in w._loads}
    assert loads["gpu:0"].verdict is not Verdict.OVER


def test_first_n_experts_is_exactly_n_cpu_moe(qtbot, perf: SpeedModel) -> None:
    """Experts kept apart by hand elsewhere go back with their layers: the placement is
    the one `--n-cpu-moe N` makes, whatever it was before."""
    from rigspark_gui.core.placement import with_cpu_moe

    g = replace(LLAMA_31_8B, n_ff=0, n_expert=8, n_expert_used=2, n_ff_expert=4096)
    w = LayersTab()
    qtbot.addWidget(w)
    w.set_context(spec_of(g), make_rig(1, vram_gib=80), PlanSettings(), perf, "Q4_K_M")
    start = w.document.placement
    assert start is not None
    w.document.move_experts(["blk.10", "blk.20"], CPU)
    w.first_n_spin.setValue(3)
    w.first_n_action.trigger()
    assert w.document.placement == with_cpu_moe(start, g, 3)
    assert "--n-cpu-moe 3" in w.command_text.toPlainText()
    assert "-ot" not in w.command_text.toPlainText()


def _kv_line(tab: LayersTab, device: str) -> str:
    tip = tab.lane(device).bar.toolTip()
    return next(line for line in tip.splitlines() if line.startswith("KV cache"))


def test_a_dragged_layer_leaves_its_kv_where_llama_cpp_keeps_it(tab: LayersTab) -> None:
    """llama.cpp moves the weights with -ot but allocates the cache by -ngl: the GPU lane
    keeps the layer's KV, the CPU lane gains only the weights, and the command says so."""
    layer = tab.lane_model("gpu:0").unit_ids()[3]
    gpu_kv, cpu_kv = _kv_line(tab, "gpu:0"), _kv_line(tab, CPU)
    cpu_tip = tab.lane(CPU).bar.toolTip()
    assert _drop(tab, [layer], CPU)
    assert layer in tab.lane_model(CPU).unit_ids()
    assert (_kv_line(tab, "gpu:0"), _kv_line(tab, CPU)) == (gpu_kv, cpu_kv)
    assert tab.lane(CPU).bar.toolTip() != cpu_tip  # its weights did move
    assert f"{layer} (KV on gpu:0)" in tab.command_notes.text()


def test_tooltip_explains_pipeline_copies(tab: LayersTab) -> None:
    """Two GPUs with everything offloaded: llama.cpp's pipeline copies are named."""
    assert "pipeline parallelism" in tab.lane("gpu:0").bar.toolTip()
    assert _drop(tab, [tab.lane_model("gpu:0").unit_ids()[0]], CPU)  # a layer on the CPU
    assert "pipeline parallelism" not in tab.lane("gpu:0").bar.toolTip()


def test_the_strip_draws_each_lane_and_selects_like_the_list(qtbot, perf) -> None:
    from PySide6.QtCore import QPointF

    from rigspark_gui.ui.lane_model import encode_units

    g = replace(LLAMA_31_8B, n_ff=0, n_expert=8, n_expert_used=2, n_ff_expert=4096)
    w = LayersTab()
    qtbot.addWidget(w)
    w.resize(1200, 700)
    w.show()
    w.set_context(spec_of(g), make_rig(1, vram_gib=80), PlanSettings(), perf, "Q4_K_M")
    gpu = w.lane("gpu:0")
    blocks = gpu.strip.blocks
    assert [b.unit for b in blocks] == gpu.model.unit_ids()
    widths = [b.weights_bytes + b.kv_bytes for b in blocks]
    assert widths[0] > 0 and all(not b.guest_experts for b in blocks)

    # a click on the picture selects that layer in the list; Ctrl adds
    gpu.strip.repaint()
    rects = dict((u, r) for r, u in gpu.strip.block_rects())
    qtbot.mouseClick(gpu.strip, Qt.MouseButton.LeftButton, pos=rects["blk.3"].center().toPoint())
    assert gpu.selected_units() == ["blk.3"] and gpu.strip.selected == {"blk.3"}
    qtbot.mouseClick(gpu.strip, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                     rects["blk.5"].center().toPoint())  # fmt: skip
    assert gpu.selected_units() == ["blk.3", "blk.5"]
    assert QPointF(rects["blk.3"].center()).x() < QPointF(rects["blk.5"].center()).x()

    # experts sent to the CPU: drawn apart on the CPU's strip, the layer shrinks here
    before = next(b for b in gpu.strip.blocks if b.unit == "blk.3").weights_bytes
    w.first_n_spin.setValue(4)
    w.first_n_action.trigger()
    cpu = w.lane("cpu")
    guests = [b.unit for b in cpu.strip.blocks if b.guest_experts]
    assert guests == ["blk.0", "blk.1", "blk.2", "blk.3"]
    assert next(b for b in gpu.strip.blocks if b.unit == "blk.3").weights_bytes < before

    # layers dropped on a strip move to its device, with undo
    cpu.strip.units_dropped.emit(encode_units(["blk.10"]))
    assert w.document.placement.unit("blk.10").device == CPU
    assert "blk.10" in [b.unit for b in cpu.strip.blocks if not b.guest_experts]


def test_layers_dragged_out_of_a_strip_move_to_the_strip_they_land_on(
    qtbot, perf, monkeypatch
) -> None:
    from PySide6.QtCore import QPoint
    from PySide6.QtTest import QTest

    from rigspark_gui.ui.layer_strip import LayerStrip

    w = LayersTab()
    qtbot.addWidget(w)
    w.resize(1200, 700)
    w.show()
    w.set_context(spec_of(LLAMA_31_8B), make_rig(1, vram_gib=80), PlanSettings(), perf, "Q4_K_M")
    gpu, cpu = w.lane("gpu:0"), w.lane("cpu")
    gpu.strip.repaint()
    rects = dict((u, r) for r, u in gpu.strip.block_rects())
    # the drag itself is the platform's; here it ends with a drop on the CPU's strip
    carried = []

    def land_on_cpu(strip: LayerStrip, mime) -> None:
        carried.append(mime)
        cpu.strip.units_dropped.emit(mime)

    monkeypatch.setattr(LayerStrip, "exec_drag", land_on_cpu)
    # select blk.4 and blk.6, then drag from blk.6: both go
    qtbot.mouseClick(gpu.strip, Qt.MouseButton.LeftButton, pos=rects["blk.4"].center().toPoint())
    qtbot.mouseClick(gpu.strip, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                     rects["blk.6"].center().toPoint())  # fmt: skip
    start = rects["blk.6"].center().toPoint()
    QTest.mousePress(gpu.strip, Qt.MouseButton.LeftButton, pos=start)
    QTest.mouseMove(gpu.strip, start + QPoint(0, 40))
    assert len(carried) == 1
    for unit in ("blk.4", "blk.6"):
        assert w.document.placement.unit(unit).device == CPU
    cpu_units = [b.unit for b in cpu.strip.blocks if not b.guest_experts]
    assert {"blk.4", "blk.6"} <= set(cpu_units)
    assert "blk.5" in [b.unit for b in gpu.strip.blocks]
    # a short twitch is a click, not a drag
    gpu.strip.repaint()
    rects = dict((u, r) for r, u in gpu.strip.block_rects())
    start = rects["blk.8"].center().toPoint()
    QTest.mousePress(gpu.strip, Qt.MouseButton.LeftButton, pos=start)
    QTest.mouseMove(gpu.strip, start + QPoint(1, 0))
    QTest.mouseRelease(gpu.strip, Qt.MouseButton.LeftButton, pos=start + QPoint(1, 0))
    assert len(carried) == 1 and w.document.placement.unit("blk.8").device != CPU


def test_undo_names_layers_as_the_lanes_do(qtbot, perf) -> None:
    w = LayersTab()
    qtbot.addWidget(w)
    w.set_context(spec_of(LLAMA_31_8B), make_rig(1, vram_gib=80), PlanSettings(), perf, "Q4_K_M")
    w.document.move_units(["blk.12"], CPU)
    assert w.document.undo_stack.undoText() == "Move layer 12 to CPU"
    assert w.undo_action.toolTip() == "Undo Move layer 12 to CPU"
