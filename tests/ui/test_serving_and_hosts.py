"""The Serving tab (vLLM, SGLang) and rigs of several machines, driven as a user would:
pick the engine, turn its knobs, read the pool and the launch scripts; see each host's
lanes and drag a layer from one machine to the other. Every surface shows one plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QModelIndex, QSettings, Qt

from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.cli import main as cli
from rigspark_gui.formats.jsonable import jsonable
from rigspark_gui.report.export import export_plan
from rigspark_gui.resources import data_file
from rigspark_gui.ui import background
from rigspark_gui.ui.lane_model import LAYERS_MIME
from rigspark_gui.ui.main_window import MainWindow

ROOT = Path(__file__).resolve().parents[2]
TWO_HOSTS = ROOT / "examples" / "rig-two-hosts-3090.json"
ONE_BOX = ROOT / "examples" / "rig-2x3090.json"
MOVE = Qt.DropAction.MoveAction


def _window(qtbot, tmp_path, monkeypatch, rig_file: Path) -> MainWindow:
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    rig = load_rig(rig_file, load_gpu_database(data_file("gpus.json"), lenient=True))
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=rig, detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.show()
    return w


@pytest.fixture
def serving(qtbot, tmp_path, monkeypatch) -> MainWindow:
    w = _window(qtbot, tmp_path, monkeypatch, ONE_BOX)
    w.session.set_model("llama-3.1-8b-instruct")
    w.session.update_settings(context=20000)
    return w


def _choose_engine(w: MainWindow, label: str) -> None:
    combo = w.controls.backend
    combo.setCurrentIndex(combo.findText(label))


def test_the_serving_tab_comes_with_vllm_and_goes_with_llama_cpp(serving: MainWindow) -> None:
    tabs = serving.tabs
    index = tabs.indexOf(serving.serving_tab)
    assert not tabs.isTabVisible(index)
    _choose_engine(serving, "vLLM")
    assert tabs.isTabVisible(index)
    tabs.setCurrentWidget(serving.serving_tab)
    text = serving.serving_tab.summary.text()
    assert "KV pool" in text and "tokens" in text and "concurrency" in text
    quants = [serving.controls.quant.itemData(i) for i in range(serving.controls.quant.count())]
    assert quants == ["", "BF16", "FP8", "INT8", "AWQ", "GPTQ"]  # checkpoint formats
    assert "vllm serve" in serving.serving_tab.launch.toPlainText()
    tabs.setCurrentWidget(serving.layers_tab)
    assert "places the layers itself" in serving.layers_tab.summary.text()
    tabs.setCurrentWidget(serving.serving_tab)
    serving.serving_tab.utilization.setValue(0.8)
    assert serving.session.settings.memory_utilization == pytest.approx(0.8)
    _choose_engine(serving, "llama.cpp")
    s = serving.session.settings
    assert s.memory_utilization is None and s.quant is None  # the engine's knobs reset
    assert not tabs.isTabVisible(index)
    assert serving.controls.quant.findData("Q4_K_M") >= 0


def test_memory_utilization_moves_the_pool(serving: MainWindow) -> None:
    _choose_engine(serving, "vLLM")
    serving.tabs.setCurrentWidget(serving.serving_tab)
    tab = serving.serving_tab
    tab.utilization.setValue(0.9)
    before = serving.session.plan.serving.kv_cache_tokens
    tab.utilization.setValue(0.8)
    after = serving.session.plan.serving.kv_cache_tokens
    assert after < before
    assert f"{after:,} tokens" in tab.summary.text()
    assert tab.chart.plan is serving.session.plan.serving  # the chart draws the same plan


def test_a_context_vllm_refuses_says_so_with_the_longest_it_takes(serving: MainWindow) -> None:
    _choose_engine(serving, "vLLM")
    serving.session.update_settings(
        context=131072, quant="BF16", tensor_parallel=1, pipeline_parallel=1
    )
    serving.tabs.setCurrentWidget(serving.serving_tab)
    sp = serving.session.plan.serving
    assert sp is not None and not sp.fits
    text = serving.serving_tab.summary.text()
    assert "refuses" in text and f"{sp.largest_max_model_len:,}" in text
    assert serving.serving_tab.no_chart.isVisible()  # no empty chart in its place
    assert not serving.serving_tab.chart_slot.isVisible()


def test_serving_plan_is_one_truth_on_cli_report_and_tab(
    serving: MainWindow, tmp_path: Path, capsys
) -> None:
    _choose_engine(serving, "SGLang")
    serving.tabs.setCurrentWidget(serving.serving_tab)
    assert cli(["plan", "--model", "llama-3.1-8b-instruct", "--rig", str(ONE_BOX),
                "--context", "20000", "--backend", "sglang", "--json"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    window = serving.session.plan
    assert data["serving"] == jsonable(window.serving)
    report = export_plan(
        serving.session.spec, serving.session.rig, window.settings, serving.session.perf,
        tmp_path / "r.json", "json",
    )  # fmt: skip
    assert report.serving == window.serving
    shown = serving.serving_tab.launch.toPlainText()
    assert window.launch is not None and shown.startswith(window.launch.text)
    assert data["launch"]["scripts"][0]["text"] in shown


@pytest.fixture
def hosts(qtbot, tmp_path, monkeypatch) -> MainWindow:
    w = _window(qtbot, tmp_path, monkeypatch, TWO_HOSTS)
    w.session.set_model("llama-3.3-70b-instruct")
    w.session.update_settings(context=8192, quant="Q4_K_M")
    w.tabs.setCurrentWidget(w.layers_tab)
    return w


def test_lanes_are_grouped_by_host_and_a_layer_drags_across(hosts: MainWindow) -> None:
    tab = hosts.layers_tab
    titles = [b.title() for b in tab._host_boxes]
    assert titles[0].startswith("box2 (192.168.1.11): rpc-server over 10 GbE")
    assert titles[1].startswith("This machine")
    assert tab.lane("gpu:1").parent() is tab._host_boxes[0]  # box2's GPU under box2
    assert "rpc-server" in tab.command_text.toPlainText()
    src, dst = tab.lane_model("gpu:1"), tab.lane_model("gpu:0")
    first = src.unit_ids()[0]
    mime = src.mimeData([src.index(0)])
    assert mime.hasFormat(LAYERS_MIME)
    assert dst.dropMimeData(mime, MOVE, -1, 0, QModelIndex())
    assert tab.document.placement.unit(first).device == "gpu:0"
    # a layer out of llama.cpp's order cannot be expressed over RPC: the command says why
    assert "one run of layers" in tab.command_text.toPlainText()
    tab.undo_action.trigger()
    assert "--rpc 192.168.1.11:50052" in tab.command_text.toPlainText()


def test_cpu_boxes_have_lanes_of_their_own(qtbot, tmp_path, monkeypatch) -> None:
    # hosts without a GPU serve their CPU over RPC: a lane each, under its host
    rig = json.loads(TWO_HOSTS.read_text())
    box = {"ram_total_bytes": 64 << 30, "cpu": {"name": "AMD EPYC 4364P", "cores": 8,
                                                "memory_bandwidth_gbps": 83.2}}  # fmt: skip
    rig["ram_total_bytes"] = 16 << 30
    rig["hosts"] = [{"name": f"cpu{k}", "address": f"10.0.1.{k}", **box} for k in (1, 2)]
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(rig))
    w = _window(qtbot, tmp_path, monkeypatch, path)
    w.session.set_model("llama-3.3-70b-instruct")
    w.session.update_settings(context=8192, quant="Q4_K_M")
    w.tabs.setCurrentWidget(w.layers_tab)
    assert w.session.plan.recommended.value == "multi-host"
    tab = w.layers_tab
    titles = [b.title() for b in tab._host_boxes]
    assert titles[0].startswith("cpu1 (10.0.1.1): rpc-server")
    assert titles[1].startswith("cpu2 (10.0.1.2): rpc-server")
    assert titles[2].startswith("This machine")
    assert tab.lane("rpc-cpu:cpu1").parent() is tab._host_boxes[0]
    assert tab.lane("rpc-cpu:cpu2").parent() is tab._host_boxes[1]
    assert tab.lane_model("rpc-cpu:cpu1").unit_ids()
    text = tab.command_text.toPlainText()
    assert "--rpc 10.0.1.1:50052,10.0.1.2:50052" in text
    assert text == w.session.plan.launch.text


def test_the_rig_panel_lists_each_host(hosts: MainWindow) -> None:
    tree = hosts.rig_panel.device_tree
    top = [tree.topLevelItem(i).text(0) for i in range(tree.topLevelItemCount())]
    assert top[0] == "This machine" and top[1].startswith("box2 · 192.168.1.11 · 10 GbE")
    box2 = tree.topLevelItem(1)
    assert "RTX 3090" in box2.child(0).text(0)


def test_multi_host_launch_is_one_truth(hosts: MainWindow, capsys) -> None:
    plan = hosts.session.plan
    assert plan.recommended.value == "multi-host" and plan.launch is not None
    assert cli(["plan", "--model", "llama-3.3-70b-instruct", "--rig", str(TWO_HOSTS),
                "--context", "8192", "--quant", "Q4_K_M", "--json"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert data["launch"] == jsonable(plan.launch)
    assert hosts.layers_tab.command_text.toPlainText() == plan.launch.text


def test_a_hand_edit_made_for_llama_cpp_stays_out_of_a_vllm_report(serving: MainWindow) -> None:
    from rigspark_gui.report.model import build_report

    serving.tabs.setCurrentWidget(serving.layers_tab)
    tab = serving.layers_tab
    block = next(u for u in tab.document.placement.units if u.unit.startswith("blk."))
    assert tab.document.move_units([block.unit], "cpu")
    edited = tab.edited_placement()
    assert edited is not None
    _choose_engine(serving, "vLLM")
    w = serving.session
    report = build_report(
        w.spec, w.rig, w.settings, w.perf, created_at="now", placement=edited
    )  # the window passes the Layers tab's edit along
    assert not report.placement_edited and report.placement is None
    assert report.serving is not None and report.launch is not None


def test_the_serving_knobs_are_remembered(qtbot, tmp_path, monkeypatch) -> None:
    first = _window(qtbot, tmp_path, monkeypatch, ONE_BOX)
    first.session.set_model("llama-3.1-8b-instruct")
    first.session.update_settings(backend="vllm", memory_utilization=0.85, max_num_seqs=64)
    first.close()
    again = _window(qtbot, tmp_path, monkeypatch, ONE_BOX)  # the same settings file
    s = again.session.settings
    assert s.backend.value == "vllm" and s.memory_utilization == pytest.approx(0.85)
    assert s.max_num_seqs == 64 and s.tensor_parallel is None
