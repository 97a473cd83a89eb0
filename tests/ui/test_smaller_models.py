"""A model no quantization makes fast enough on a CPU-only machine: the Paths tab names
smaller models that are, beside "What would it take", and one click plans the first; the
CPU path's loading flag is said in the summary and both figures are in the tooltip."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from rigspark_gui.core.plan import PathName
from rigspark_gui.core.rig import GIB, Cpu, Rig
from rigspark_gui.ui import background, dialogs
from rigspark_gui.ui.main_window import MainWindow


def cpu_only_24gb() -> Rig:
    return Rig(
        name="2-core laptop",
        ram_total_bytes=24 * GIB,
        ram_available_bytes=22 * GIB,
        cpu=Cpu(name="CPU", cores=2, memory_bandwidth_gbps=28.0, features=("avx2", "avx512")),
    )


@pytest.fixture(autouse=True)
def _headless(monkeypatch):
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    dialogs.shown.clear()


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=cpu_only_24gb(), detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.show()
    return w


def test_a_smaller_model_is_one_click_away(qtbot, window) -> None:
    window.session.set_model("llama-3.1-8b-instruct")
    window.session.update_settings(context=8192)
    tab = window.paths_tab
    qtbot.waitUntil(lambda: bool(tab.smaller), timeout=20000)
    text = tab.suggestions.text()
    assert "Smaller models fast enough:" in text
    first = tab.smaller[0]
    assert first.model_id.startswith("llama-3.2-") and first.change in text
    # the link, clicked
    tab.suggestions.linkActivated.emit(f"apply:{len(tab.ideas)}")
    qtbot.waitUntil(lambda: window.session.spec.id == first.model_id, timeout=10000)
    plan = window.session.plan
    qtbot.waitUntil(lambda: window.session.plan is not plan or plan.model_id == first.model_id)
    rec = next(p for p in window.session.plan.paths if p.path is window.session.plan.recommended)
    assert rec.quant == first.quant and rec.throughput.tok_s >= 8.0
    assert "instead of" in window.statusBar().currentMessage()


def test_the_cpu_loading_flag_is_said_and_both_figures_shown(qtbot, window) -> None:
    window.session.set_model("gpt-oss-20b")
    window.session.update_settings(context=32768)
    qtbot.waitUntil(
        lambda: window.session.plan is not None and window.session.plan.model_id == "gpt-oss-20b"
    )
    tab = window.paths_tab
    qtbot.waitUntil(lambda: "--load-mode none" in tab.summary.text(), timeout=10000)
    row = next(r for r, p in enumerate(window.session.plan.paths) if p.path is PathName.CPU)
    tips = [tab.table.item(row, c).toolTip() for c in range(tab.table.columnCount())]
    tip = next(t for t in tips if "with the file mapped" in t)
    assert "as planned (--load-mode none)" in tip
