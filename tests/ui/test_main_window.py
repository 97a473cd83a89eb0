"""The window as a user drives it: pick a model, move the context, change KV types."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import QSettings, Qt

from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.plan.paths import PathName
from rigspark_gui.ui import background, dialogs
from rigspark_gui.ui.main_window import MainWindow
from tests.ui.conftest import rig_2x3090


@pytest.fixture(autouse=True)
def _headless(monkeypatch):
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    dialogs.shown.clear()


def pick(qtbot, window, text: str) -> None:
    picker = window.controls.model_picker
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), text)
    popup = picker.completer().popup()
    qtbot.waitUntil(popup.isVisible)
    first = picker.completer().completionModel().index(0, 0)
    popup.setCurrentIndex(first)
    qtbot.keyClick(popup, Qt.Key.Key_Return)


def test_type_a_model_and_see_its_paths(qtbot, window) -> None:
    pick(qtbot, window, "llama 3.3 70b")
    assert window.session.spec.id == "llama-3.3-70b-instruct"
    window.controls.context_spin.setValue(32768)  # one GPU cannot hold it even at 1.5 bits
    table = window.paths_tab.table
    assert table.item(0, 0).text() == "gpu (1 GPU)"
    assert table.item(0, 1).text() == "✗ does not fit"
    assert table.item(0, 4).text().startswith("needs ")
    assert "recommended" in table.item(1, 1).text()  # multi-gpu
    assert "loss" in table.item(1, 2).text()  # its quality cost beside the quantization
    fit = window.paths_tab.fit_chart.spec
    assert fit.rows[0].status == "over"
    assert any(s.role == "shortfall" for s in fit.rows[0].segments)
    assert "runs on the" in window.paths_tab.summary.text()
    # the chart keys sit above the plots, so they never hide a bar or its label
    key = window.paths_tab.fit_chart.legend_label
    qtbot.wait(0)  # the chart lays out on the next turn of the event loop
    assert all(w in key.text() for w in ("Weights", "KV cache", "Compute buffer", "Shortfall"))
    assert not key.isHidden() and key.geometry().bottom() <= window.paths_tab.fit_chart.plot.y()


def test_context_slider_and_presets_replan(qtbot, window) -> None:
    pick(qtbot, window, "qwen2.5 7b instruct")
    qtbot.mouseClick(window.controls.preset_buttons["8K"], Qt.MouseButton.LeftButton)
    assert window.session.settings.context == 8192
    assert not window.session.settings.is_auto("context")
    before = window.session.plan.paths[0].breakdown.kv_bytes
    qtbot.mouseClick(window.controls.preset_buttons["32K"], Qt.MouseButton.LeftButton)
    assert window.session.settings.context == 32768
    after = window.session.plan.paths[0].breakdown.kv_bytes
    assert after > before
    window.controls.context_slider.setValue(0)
    assert window.session.settings.context == 256
    qtbot.mouseClick(window.controls.preset_buttons["max"], Qt.MouseButton.LeftButton)
    assert window.session.settings.context == window.session.spec.geometry.context_length


def test_quantized_v_switches_flash_attention_on_and_says_why(qtbot, window) -> None:
    combo = window.controls.kv_k
    # left to llama.cpp (auto), flash attention comes on by itself for a quantized V
    combo.setCurrentIndex(combo.findData("q8_0"))
    s = window.session.settings
    assert s.kv_v is KvCacheType.Q8_0 and s.is_auto("flash_attn")
    assert window.session.plan.resolved.flash_attn
    # switched off by hand, a quantized V switches it on again, and says why
    combo.setCurrentIndex(combo.findData("f16"))
    window.controls.flash_attn.setCheckState(Qt.CheckState.Unchecked)
    assert not window.session.settings.flash_attn
    combo.setCurrentIndex(combo.findData("q4_0"))
    s = window.session.settings
    assert s.kv_k is KvCacheType.Q4_0 and s.kv_v is KvCacheType.Q4_0 and s.flash_attn
    assert window.controls.flash_attn.isChecked()
    assert "Flash attention switched on" in window.statusBar().currentMessage()
    window.controls.flash_attn.setChecked(False)
    assert window.session.settings.flash_attn  # stays on, with a message
    assert window.controls.flash_attn.isChecked()


def test_kv_table_applies_a_row(qtbot, window) -> None:
    window.tabs.setCurrentWidget(window.kv_tab)
    qtbot.waitUntil(lambda: window.kv_tab.table.rowCount() == 81)
    rows = window.kv_tab.rows
    r = next(
        i
        for i, row in enumerate(rows)
        if row.kv_k is KvCacheType.Q8_0 and row.kv_v is KvCacheType.Q8_0
    )
    window.kv_tab.table.cellDoubleClicked.emit(r, 0)
    assert window.session.settings.kv_k is KvCacheType.Q8_0
    assert window.session.settings.kv_v is KvCacheType.Q8_0
    assert window.kv_tab.chart.spec is not None and window.kv_tab.chart.spec.curves
    assert "KV q8_0" in window.kv_tab.chart.legend_label.text()


def test_catalog_ranks_and_opens(qtbot, window) -> None:
    window.tabs.setCurrentWidget(window.catalog_tab)
    qtbot.waitUntil(lambda: window.catalog_tab.model.rowCount() > 100)
    rows = window.catalog_tab.model.rows
    verdicts = [r.verdict.value for r in rows]
    assert verdicts == sorted(verdicts, key=["fits", "slow", "no"].index)
    view = window.catalog_tab.view
    window.catalog_tab.filter.setText("405b")
    assert window.catalog_tab.proxy.rowCount() == 1
    view.doubleClicked.emit(window.catalog_tab.proxy.index(0, 0))
    assert window.session.spec.id == "llama-3.1-405b-instruct"
    assert window.tabs.currentWidget() is window.paths_tab


def test_layers_tab_follows_the_plan(qtbot, window) -> None:
    window.tabs.setCurrentWidget(window.layers_tab)
    doc = window.layers_tab.document
    assert doc.placement is not None
    assert {u.device for u in doc.placement.units} >= {"cpu", "gpu:0"}


def test_choices_persist(qtbot, tmp_path) -> None:
    path = str(tmp_path / "persist.ini")
    w = MainWindow(
        rig=rig_2x3090(),
        detect_on_start=False,
        settings=QSettings(path, QSettings.Format.IniFormat),
    )
    qtbot.addWidget(w)
    w.session.set_model("qwen3-14b")
    w.session.update_settings(
        context=16384,
        kv_k=KvCacheType.Q8_0,
        kv_v=KvCacheType.Q8_0,
        flash_attn=True,
        backend="ollama",
    )
    w.close()
    again = MainWindow(
        rig=rig_2x3090(),
        detect_on_start=False,
        settings=QSettings(path, QSettings.Format.IniFormat),
    )
    qtbot.addWidget(again)
    s = again.session.settings
    assert again.session.spec.id == "qwen3-14b"
    assert (s.context, s.kv_k, s.backend.value) == (16384, KvCacheType.Q8_0, "ollama")


def test_rig_edit_replans(qtbot, window) -> None:
    pick(qtbot, window, "llama 3.3 70b")
    assert window.session.plan.recommended is PathName.MULTI_GPU
    window.rig_panel.remove_gpu(1)
    assert window.session.plan.recommended is not PathName.MULTI_GPU
    assert all(p.path is not PathName.MULTI_GPU for p in window.session.plan.paths)


def _fake_probe(monkeypatch, gbps: float = 42.0, busy: bool = False) -> list[int]:
    from rigspark_gui.core.rig import Basis, Provenance
    from rigspark_gui.hardware import bandwidth_probe

    calls: list[int] = []

    def fake(*_a: object, **_k: object) -> bandwidth_probe.BandwidthResult:
        calls.append(1)
        return bandwidth_probe.BandwidthResult(
            bandwidth_gbps=gbps,
            buffer_bytes=512 << 20,
            threads=2,
            runs=7,
            busy=busy,
            reason="the machine was busy (90 % CPU in use before measuring)" if busy else "",
            provenance=Provenance(
                basis=Basis.MEASURED,
                source="read-only stream" + ("; unreliable: busy" if busy else ""),
            ),
        )

    monkeypatch.setattr(bandwidth_probe, "measure_ram_bandwidth", fake)
    return calls


def _without_bandwidth():
    rig = rig_2x3090()
    return replace(rig, cpu=replace(rig.cpu, memory_bandwidth_gbps=None))


def test_measuring_ram_bandwidth_gives_the_cpu_path_a_speed(qtbot, window, monkeypatch) -> None:
    from rigspark_gui.hardware import bandwidth_cache

    _fake_probe(monkeypatch)
    window.rig_panel.set_detected(_without_bandwidth())
    cpu_path = next(p for p in window.session.plan.paths if p.path is PathName.CPU)
    assert not cpu_path.throughput.known
    window.bandwidth_action.trigger()
    qtbot.waitUntil(lambda: window.bandwidth_action.isEnabled())
    cpu_path = next(p for p in window.session.plan.paths if p.path is PathName.CPU)
    assert cpu_path.throughput.known and cpu_path.throughput.tok_s
    assert "kept for this machine" in window.statusBar().currentMessage()
    assert window.session.rig.cpu.basis_of("memory_bandwidth_gbps").basis.value == "measured"
    rig = window.session.rig
    key = bandwidth_cache.machine_key(rig.cpu.name, rig.cpu.cores, rig.ram_total_bytes)
    assert bandwidth_cache.cached_bandwidth(key) is not None


def test_measuring_a_vm_times_its_vcpus_and_the_cpu_path_slows(qtbot, window, monkeypatch) -> None:
    """A VM whose two vCPUs are one core's hyperthreads: the measurement says so, the rig
    row shows it and the CPU path's compute-bound speed drops to that share."""
    from rigspark_gui.core.rig import Basis, Provenance
    from rigspark_gui.hardware import core_probe

    def pairs(threads: int) -> core_probe.CoreScaling:
        return core_probe.CoreScaling(
            threads=threads, share=0.5, one_thread_gops=2.0, rounds=3,
            provenance=Provenance(basis=Basis.MEASURED, source="timed together"),
        )  # fmt: skip

    _fake_probe(monkeypatch, gbps=400.0)  # fast memory: decode compute-bound on 16 cores
    monkeypatch.setattr(core_probe, "measure_core_scaling", pairs)
    rig = _without_bandwidth()
    vm = replace(rig, cpu=replace(rig.cpu, cores=2, features=("avx2", "hypervisor")))
    window.rig_panel.set_detected(vm)
    window.bandwidth_action.trigger()
    qtbot.waitUntil(lambda: window.bandwidth_action.isEnabled())
    cpu = window.session.rig.cpu
    assert cpu.compute_cores == 1.0 and cpu.basis_of("compute_cores").basis is Basis.MEASURED
    tree = window.rig_panel.device_tree
    rows = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    row = next(r for r in rows if r is not None and r.text(0).startswith("CPU"))
    assert "vCPUs ≈ 1 core" in row.text(3), row.text(3)
    slow = next(p for p in window.session.plan.paths if p.path is PathName.CPU).throughput
    whole = replace(cpu, compute_cores=float(cpu.cores or 1))
    window.rig_panel.set_detected(replace(window.session.rig, cpu=whole))
    fast = next(p for p in window.session.plan.paths if p.path is PathName.CPU).throughput
    assert slow.tok_s is not None and fast.tok_s is not None
    assert slow.tok_s / fast.tok_s == pytest.approx(0.5, rel=0.05)  # half the cores' worth


def test_a_vm_with_a_kept_bandwidth_still_times_its_vcpus(qtbot, window, monkeypatch) -> None:
    """A VM whose bandwidth was kept before its vCPUs were ever timed measures once more,
    by itself, so its CPU speed does not rest on the guess for an unmeasured VM."""
    from rigspark_gui.core.rig import Basis, Provenance
    from rigspark_gui.hardware import core_probe

    timed: list[int] = []

    def whole(threads: int) -> core_probe.CoreScaling:
        timed.append(threads)
        return core_probe.CoreScaling(
            threads=threads, share=1.0, one_thread_gops=2.0, rounds=3,
            provenance=Provenance(basis=Basis.MEASURED, source="timed together"),
        )  # fmt: skip

    calls = _fake_probe(monkeypatch)
    monkeypatch.setattr(core_probe, "measure_core_scaling", whole)
    window.auto_bandwidth = True
    rig = rig_2x3090()
    vm = replace(rig, cpu=replace(rig.cpu, cores=2, features=("avx2", "hypervisor")))
    window._on_detected(vm)
    qtbot.waitUntil(lambda: window.session.rig.cpu.compute_cores is not None)
    assert calls == [1] and timed == [2] and window.session.rig.cpu.compute_cores == 2.0
    calls.clear()
    window._on_detected(window.session.rig)  # measured now: nothing more to do
    qtbot.wait(200)
    assert calls == [] and window.bandwidth_action.isEnabled()


def test_a_detected_machine_measures_its_bandwidth_by_itself(qtbot, window, monkeypatch) -> None:
    calls = _fake_probe(monkeypatch)
    window.auto_bandwidth = True
    window._on_detected(_without_bandwidth())
    qtbot.waitUntil(lambda: window.session.rig.cpu.memory_bandwidth_gbps is not None)
    assert calls == [1]
    cpu_path = next(p for p in window.session.plan.paths if p.path is PathName.CPU)
    assert cpu_path.throughput.known


def test_a_busy_machine_measures_again_later(qtbot, window, monkeypatch) -> None:
    from rigspark_gui.hardware import bandwidth_cache

    calls = _fake_probe(monkeypatch, gbps=9.0, busy=True)
    window.auto_bandwidth = True
    window._on_detected(_without_bandwidth())
    qtbot.waitUntil(lambda: window.session.rig.cpu.memory_bandwidth_gbps is not None)
    assert "unreliable" in window.statusBar().currentMessage()
    rig = window.session.rig
    key = bandwidth_cache.machine_key(rig.cpu.name, rig.cpu.cores, rig.ram_total_bytes)
    assert bandwidth_cache.cached_bandwidth(key) is None  # a busy figure is never kept
    _fake_probe(monkeypatch, gbps=40.0)
    window._retry_bandwidth()
    qtbot.waitUntil(lambda: window.session.rig.cpu.memory_bandwidth_gbps == 40.0)
    assert calls == [1]
    assert bandwidth_cache.cached_bandwidth(key) is not None


def test_an_imported_gguf_joins_the_picker_and_is_remembered(qtbot, tmp_path) -> None:
    from tests.importers.importer_helpers import Dims, decoder_kv, decoder_tensors, write_gguf

    d = Dims()
    written = write_gguf(
        tmp_path / "tiny.gguf", "llama", decoder_kv("llama", d), decoder_tensors(d)
    )
    path = str(tmp_path / "s.ini")
    w = MainWindow(
        rig=rig_2x3090(),
        detect_on_start=False,
        settings=QSettings(path, QSettings.Format.IniFormat),
    )
    qtbot.addWidget(w)
    w.import_model(written.path)
    spec = w.session.spec
    assert spec.imported and spec.id.startswith("file:")
    assert "imported" in w.controls.model_picker.currentText()
    w.close()
    again = MainWindow(
        rig=rig_2x3090(),
        detect_on_start=False,
        settings=QSettings(path, QSettings.Format.IniFormat),
    )
    qtbot.addWidget(again)
    assert again.session.spec_by_id(spec.id) is not None


def test_a_corrupt_import_is_one_clear_error(qtbot, window, tmp_path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    before = window.session.spec
    window.import_model(bad)
    assert dialogs.shown and dialogs.shown[-1].title == "Import model"
    assert "broken.gguf" in dialogs.shown[-1].message
    assert window.session.spec is before


def test_a_bad_catalog_entry_is_shown_and_the_rest_loads(qtbot, tmp_path, monkeypatch) -> None:
    import json

    from rigspark_gui.catalog import models as catalog_models
    from rigspark_gui.resources import data_file
    from rigspark_gui.ui import main_window

    raw = json.loads(data_file("models.json").read_text())
    raw["models"][0]["geometry"]["n_layer"] = "many"
    monkeypatch.setattr(main_window, "load_catalog", lambda: catalog_models.parse_catalog(raw))
    w = MainWindow(
        rig=rig_2x3090(),
        detect_on_start=False,
        settings=QSettings(str(tmp_path / "c.ini"), QSettings.Format.IniFormat),
    )
    qtbot.addWidget(w)
    qtbot.waitUntil(lambda: bool(dialogs.shown))
    assert dialogs.shown[0].title == "Some catalog entries were skipped"
    assert "geometry.n_layer" in dialogs.shown[0].message
    assert len(w.session.specs) == len(raw["models"]) - 1


def test_prompt_length_drives_the_prefill_estimate(qtbot, window) -> None:
    gpu = lambda: next(p for p in window.session.plan.paths if p.fits)  # noqa: E731
    before = gpu().prefill.high_seconds
    window.controls.prompt.setValue(4096)
    assert window.session.settings.prompt_tokens == 4096
    assert gpu().prefill.high_seconds > before
    assert "4096 tokens" in window.paths_tab.table.item(0, 6).text()


def _gpu_path(window):
    return next(p for p in window.session.plan.paths if p.path is PathName.GPU)


def test_minimum_speed_steers_auto_and_is_remembered(qtbot, tmp_path) -> None:
    path = str(tmp_path / "speed.ini")
    w = MainWindow(rig=rig_2x3090(), detect_on_start=False,
                   settings=QSettings(path, QSettings.Format.IniFormat))  # fmt: skip
    qtbot.addWidget(w)
    w.show()
    w.session.set_model("llama-3.1-8b-instruct")
    w.session.update_settings(context=8192)  # a context BF16 fits one GPU at
    spin = w.controls.min_speed
    spin.clear()
    qtbot.keyClicks(spin, "0")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    assert w.session.settings.min_tok_s == 0 and _gpu_path(w).quant == "BF16"
    assert spin.text() == "off"

    spin.selectAll()
    qtbot.keyClicks(spin, "120")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    gpu = _gpu_path(w)
    assert gpu.quant != "BF16" and gpu.throughput.tok_s >= 120
    assert "below the 120 tok/s minimum" in w.paths_tab.summary.text()
    quant_cell = w.paths_tab.table.item(0, 2)
    assert "Fits on this path" in quant_cell.toolTip() and "BF16" in quant_cell.toolTip()
    w.close()

    again = MainWindow(rig=rig_2x3090(), detect_on_start=False,
                       settings=QSettings(path, QSettings.Format.IniFormat))  # fmt: skip
    qtbot.addWidget(again)
    assert again.session.settings.min_tok_s == 120
    assert again.controls.min_speed.value() == 120


def test_the_gpu_backend_choice_changes_the_speed(qtbot, window) -> None:
    window.session.set_model("llama-3.1-8b-instruct")
    window.session.update_settings(min_tok_s=0.0)
    cuda = _gpu_path(window).throughput.tok_s
    combo = window.controls.gpu_backend
    combo.setCurrentIndex(combo.findText("Vulkan"))
    assert window.session.settings.gpu_backend.value == "vulkan"
    vulkan = _gpu_path(window).throughput.tok_s
    assert vulkan != cuda
    combo.setCurrentIndex(combo.findText("Metal"))
    assert not _gpu_path(window).throughput.known
    assert "metal does not run on nvidia" in window.paths_tab.table.item(0, 5).toolTip()
    combo.setCurrentIndex(combo.findText("Auto"))
    assert window.session.settings.gpu_backend is None


def test_paths_show_a_point_with_its_band(qtbot, window) -> None:
    window.session.set_model("llama-3.1-8b-instruct")
    text = window.paths_tab.table.item(0, 5).text()
    t = _gpu_path(window).throughput
    assert text == f"{t.tok_s:.0f} tok/s ({t.low_tok_s:.0f}–{t.high_tok_s:.0f})"
    assert "calibrated on" in window.paths_tab.table.item(0, 5).toolTip()


def test_any_name_a_user_types_in_the_picker_resolves(qtbot, window) -> None:
    """An Ollama tag with a quantization, typed and entered: that model, that quant."""
    picker = window.controls.model_picker
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), "llama3.1:8b-instruct-q3_K_M")
    # the list narrows as the name is typed, as for any other words
    assert picker.completer().completionModel().rowCount() >= 1
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.session.spec.id == "llama-3.1-8b-instruct")
    assert window.session.settings.quant == "Q3_K_M"
    assert window.controls.quant.currentData() == "Q3_K_M"
    # a Hugging Face id
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), "Qwen/Qwen3-8B")
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.session.spec.id == "qwen3-8b")
    # a name that could be several models says which, and changes nothing
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), "phi3.5")
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    assert window.session.spec.id == "qwen3-8b"
    assert "phi-3.5-mini-instruct" in window.statusBar().currentMessage()


def test_what_would_it_take_buys_a_better_quantization_in_one_click(
    qtbot, window, monkeypatch
) -> None:
    """Llama 3.3 70B on 2x RTX 3090 at 32K, f16 K/V: a suggestion reaches a better
    quantization than the plan's; applying it re-plans with that choice, and Undo puts
    the settings back."""
    from rigspark_gui.ui import background

    monkeypatch.setattr(background, "POOL", background.SyncPool())
    window.session.set_model("llama-3.3-70b-instruct")
    window.session.update_settings(context=32768)
    tab = window.paths_tab
    qtbot.waitUntil(lambda: bool(tab.ideas), timeout=10000)
    order = window.session.spec.available_quants
    before = window.session.plan
    rec = next(p for p in before.paths if p.path is before.recommended)
    good = [i for i in tab.ideas if order.index(i.quant) < order.index(rec.quant)]
    assert good, [(i.change, i.quant) for i in tab.ideas]
    assert "What would it take" in tab.suggestions.text()
    idea = good[0]
    tab.suggestions.linkActivated.emit(f"apply:{tab.ideas.index(idea)}")
    after = window.session.plan
    chosen = next(p for p in after.paths if p.path is after.recommended)
    assert chosen.quant == idea.quant
    qtbot.waitUntil(lambda: "Undo" in tab.suggestions.text(), timeout=10000)
    tab.suggestions.linkActivated.emit("undo")
    assert window.session.settings.kv_k == before.settings.kv_k
    assert window.session.settings.context == 32768
