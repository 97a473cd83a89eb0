"""The Weights ▾ panel on the tabs' row: choosing how llama-server loads the weights
changes the CPU figure in the Paths table and the Layers tab's command, is remembered,
is off with a reason where it changes nothing, and gives the CLI's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtTest import QTest

from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.cli import main
from rigspark_gui.core.plan import PathName
from rigspark_gui.core.units import gib
from rigspark_gui.ui import background, dialogs
from rigspark_gui.ui.main_window import MainWindow

MEMORY_COLUMN = 3
# a CPU-only machine whose CPU repacks MXFP4 (AVX2): gpt-oss-20b at 32K fits only read in
CPU_24GB = {
    "schema_version": 1,
    "name": "CPU-only 24 GB",
    "gpus": [],
    "ram_total_bytes": 24 * 1024**3,
    "ram_available_bytes": 22 * 1024**3,
    "cpu": {
        "name": "2-core x86",
        "cores": 2,
        "memory_bandwidth_gbps": 28.0,
        "features": ["avx2", "avx512"],
    },
    "unified_memory": False,
}
MODEL, QUANT, CONTEXT = "gpt-oss-20b", "MXFP4", 32768


@pytest.fixture(autouse=True)
def _headless(monkeypatch):
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    monkeypatch.setattr(background, "POOL", background.SyncPool())


@pytest.fixture
def rig_file(tmp_path: Path) -> Path:
    path = tmp_path / "cpu24.json"
    path.write_text(json.dumps(CPU_24GB), encoding="utf-8")
    return path


def _window(qtbot, tmp_path: Path, rig_file: Path, features=None) -> MainWindow:
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    rig = load_rig(str(rig_file), lambda: None)
    if features is not None:
        from dataclasses import replace

        rig = replace(rig, cpu=replace(rig.cpu, features=features))
    w = MainWindow(rig=rig, detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.resize(1024, 700)
    w.show()
    w.session.set_model(MODEL)
    w.session.update_settings(context=CONTEXT, quant=QUANT)
    qtbot.waitUntil(lambda: w.session.plan is not None and w.session.plan.model_id == MODEL)
    return w


@pytest.fixture
def window(qtbot, tmp_path, rig_file) -> MainWindow:
    return _window(qtbot, tmp_path, rig_file)


def _cpu_row(w: MainWindow) -> int:
    return next(r for r, p in enumerate(w.session.plan.paths) if p.path is PathName.CPU)


def _memory_cell(w: MainWindow) -> str:
    return w.paths_tab.table.item(_cpu_row(w), MEMORY_COLUMN).text()


def _open_panel(qtbot, w: MainWindow):
    loading = w.controls.loading
    QTest.mouseClick(loading.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(loading.panel.isVisible)
    return loading.panel


def _choose(qtbot, panel, text: str) -> None:
    """Step the Weights box with the arrow keys until it reads `text`."""
    combo = panel.mode
    key = Qt.Key.Key_Down if combo.findText(text) > combo.currentIndex() else Qt.Key.Key_Up
    for _ in range(combo.count()):
        if combo.currentText() == text:
            return
        QTest.keyClick(combo, key)
    assert combo.currentText() == text


def _command(qtbot, w: MainWindow) -> str:
    w.tabs.tabBar().setCurrentIndex(w.tabs.indexOf(w.layers_tab))
    qtbot.waitUntil(lambda: "llama-server" in w.layers_tab.command_text.toPlainText())
    return w.layers_tab.command_text.toPlainText()


def test_choosing_memory_mapped_changes_the_cpu_figure_and_the_command(qtbot, window) -> None:
    w = window
    panel = _open_panel(qtbot, w)
    assert panel.mode.currentText() == "Auto" and panel.mode.isEnabled()
    # the panel says both of the plan's figures before anything is chosen
    load = w.session.plan.paths[_cpu_row(w)].cpu_loading
    usable = w.session.plan.paths[_cpu_row(w)].usable_bytes
    assert load is not None and load.flag == "--load-mode none"
    assert panel.figures.text().splitlines()[1] == (
        f"As planned (Read in): {gib(load.required_bytes)} of {gib(usable)} usable"
    )
    assert f"Memory-mapped (llama.cpp's default): {gib(load.mapped_required_bytes)}" in (
        panel.figures.text()
    )
    assert _memory_cell(w).startswith(gib(load.required_bytes))
    assert "--load-mode none" in _command(qtbot, w)

    w.tabs.tabBar().setCurrentIndex(w.tabs.indexOf(w.paths_tab))
    _choose(qtbot, panel, "Memory-mapped")
    qtbot.waitUntil(lambda: w.session.settings.mmap is True)
    # the CPU path now needs what the panel said for the mapped file, and no longer fits
    assert _memory_cell(w).startswith(gib(load.mapped_required_bytes))
    assert "does not fit" in w.paths_tab.table.item(_cpu_row(w), 1).text()
    # the panel still compares: the mapped plan as planned, read in beside it
    lines = panel.figures.text().splitlines()
    assert lines[1].startswith("As planned (Memory-mapped):") and not panel.note.isVisible()
    assert lines[1].endswith("usable, does not fit")
    assert f"Read in (--load-mode none): {gib(load.required_bytes)}" in lines
    assert "--load-mode" not in _command(qtbot, w)

    _choose(qtbot, panel, "Read in (--load-mode none)")
    qtbot.waitUntil(lambda: w.session.settings.mmap is False)
    assert "--load-mode none" in _command(qtbot, w)


def test_dont_repack_reaches_the_command_and_the_figure(qtbot, window) -> None:
    w = window
    panel = _open_panel(qtbot, w)
    mapped = w.session.plan.paths[_cpu_row(w)].cpu_loading.mapped_required_bytes
    # its figure is in the panel before it is ticked
    line = next(x for x in panel.figures.text().splitlines() if x.startswith("Don't repack"))
    QTest.keyClick(panel.no_repack, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: w.session.settings.repack is False)
    rec = w.session.plan.paths[_cpu_row(w)]
    assert rec.cpu_loading.flag == "--no-repack"
    assert line.endswith(gib(rec.required_bytes))
    assert _memory_cell(w).startswith(gib(rec.required_bytes))
    assert rec.required_bytes < mapped
    command = _command(qtbot, w)
    assert "--no-repack" in command and "--load-mode" not in command
    # read in as well: both flags, as pinned
    _choose(qtbot, panel, "Read in (--load-mode none)")
    qtbot.waitUntil(lambda: w.session.settings.mmap is False)
    command = _command(qtbot, w)
    assert "--no-repack" in command and "--load-mode none" in command


def test_the_choice_is_remembered(qtbot, tmp_path, rig_file, window) -> None:
    panel = _open_panel(qtbot, window)
    _choose(qtbot, panel, "Memory-mapped")
    QTest.keyClick(panel.no_repack, Qt.Key.Key_Space)
    qtbot.waitUntil(lambda: window.session.settings.repack is False)
    window.close()
    again = _window(qtbot, tmp_path, rig_file)
    assert again.session.settings.mmap is True and again.session.settings.repack is False
    again_panel = again.controls.loading.panel
    assert again_panel.mode.currentText() == "Memory-mapped"
    assert again_panel.no_repack.isChecked()
    # back to Auto is remembered too ('' = left to the plan)
    panel = _open_panel(qtbot, again)
    _choose(qtbot, panel, "Auto")
    qtbot.waitUntil(lambda: again.session.settings.mmap is None)
    q = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    assert q.value("plan/mmap") == "" and q.value("plan/repack") == "False"


def test_alt_w_opens_the_panel_with_the_choice_focused(qtbot, window) -> None:
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow)
    QTest.keyClick(window, Qt.Key.Key_W, Qt.KeyboardModifier.AltModifier)
    panel = window.controls.loading.panel
    qtbot.waitUntil(panel.isVisible)
    QTest.keyClick(panel, Qt.Key.Key_Escape)
    assert not panel.isVisible()


def test_an_engine_without_the_flags_says_its_own_loading_and_keeps_a_choice(qtbot, window):
    w = window
    panel = _open_panel(qtbot, w)
    _choose(qtbot, panel, "Read in (--load-mode none)")
    qtbot.waitUntil(lambda: w.session.settings.mmap is False)
    read_in = w.session.plan.paths[_cpu_row(w)].cpu_loading.required_bytes
    panel.hide()
    backend = w.controls.backend
    backend.setCurrentIndex(backend.findData("lm-studio"))
    qtbot.waitUntil(lambda: w.session.plan.settings.backend.value == "lm-studio")
    panel = _open_panel(qtbot, w)
    assert "LM Studio's launch command cannot carry" in panel.note.text()
    assert "Try mmap()" in panel.note.text()
    assert "cannot carry" in w.controls.loading.button.toolTip()
    # the kept choice still holds (LM Studio's note says to turn "Try mmap()" off) and
    # stays changeable so it can be undone
    assert panel.mode.isEnabled()
    assert _memory_cell(w).startswith(gib(read_in))
    _choose(qtbot, panel, "Auto")
    qtbot.waitUntil(lambda: w.session.plan.settings.mmap is None)
    # left open, planned as LM Studio loads: the file mapped, the larger figure
    qtbot.waitUntil(lambda: not _memory_cell(w).startswith(gib(read_in)))
    assert not panel.mode.isEnabled()


def test_nothing_repacked_turns_it_off_with_the_reason(qtbot, tmp_path, rig_file) -> None:
    w = _window(qtbot, tmp_path, rig_file, features=())
    panel = _open_panel(qtbot, w)
    assert not panel.mode.isEnabled() and not panel.no_repack.isEnabled()
    assert "Nothing this plan puts on the CPU" in panel.note.text()
    assert not panel.figures.isVisible()


@pytest.mark.parametrize(
    ("choice", "flags"),
    [
        ("Auto", []),
        ("Memory-mapped", ["--mmap"]),
        ("Read in (--load-mode none)", ["--no-mmap"]),
        ("Auto", ["--no-repack"]),
        ("Memory-mapped", ["--mmap", "--no-repack"]),
        ("Read in (--load-mode none)", ["--no-mmap", "--no-repack"]),
    ],
)
def test_the_cli_with_the_same_flag_gives_the_same_figures(
    qtbot, capsys, window, rig_file, choice, flags
) -> None:
    w = window
    panel = _open_panel(qtbot, w)
    _choose(qtbot, panel, choice)
    if "--no-repack" in flags:
        QTest.keyClick(panel.no_repack, Qt.Key.Key_Space)
        qtbot.waitUntil(lambda: w.session.settings.repack is False)
    cpu = w.session.plan.paths[_cpu_row(w)]
    argv = ["plan", "--model", MODEL, "--quant", QUANT, "--context", str(CONTEXT)]
    argv += ["--rig", str(rig_file), "--kv-compare", "none", "--json", *flags]
    capsys.readouterr()
    assert main(argv) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    cli = next(p for p in out["paths"] if p["path"] == "cpu")
    assert cli["required_bytes"] == cpu.required_bytes
    assert cli["fits"] is cpu.fits
    if cpu.cpu_loading is None:  # a path that does not fit says no flag
        assert cli["cpu_loading"] is None and not cpu.fits
    else:
        assert cli["cpu_loading"]["flag"] == cpu.cpu_loading.flag
        assert cli["cpu_loading"]["required_bytes"] == cpu.cpu_loading.required_bytes
        assert cli["cpu_loading"]["mapped_required_bytes"] == (
            cpu.cpu_loading.mapped_required_bytes
        )
    assert _memory_cell(w).startswith(gib(cli["required_bytes"]))
