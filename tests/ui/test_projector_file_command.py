"""Projector ▾ ▸ Choose file…: the Layers tab's llama-server command loads that file by
its path (`--mmproj PATH`), as `rigspark-plan --mmproj FILE` does."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from rigspark_gui.ui import background, dialogs
from tests.ui.test_main_window import pick
from tests.ui.test_projector_controls import FOR_8B, _choose

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

from mmproj_synth import write_mmproj  # noqa: E402


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    dialogs.shown.clear()


def test_the_chosen_file_is_in_the_layers_tab_command(qtbot, window, tmp_path, monkeypatch) -> None:
    path = tmp_path / "vision files" / "mmproj-small-f16.gguf"
    path.parent.mkdir()
    write_mmproj(FOR_8B, path)
    pick(qtbot, window, "llama 3.1 8b")
    window.tabs.setCurrentWidget(window.layers_tab)
    assert "--mmproj" not in window.layers_tab.command_text.toPlainText()
    _choose(qtbot, window, monkeypatch, path)
    assert dialogs.shown == []
    text = window.layers_tab.command_text.toPlainText()
    line = next(x for x in text.splitlines() if "llama-server" in x)
    argv = shlex.split(line)
    assert argv[argv.index("--mmproj") + 1] == str(path)
