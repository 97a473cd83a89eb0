"""A llama.cpp command line pasted into the Layers tab carries its projector flags into
the plan: `--no-mmproj` plans text only (the Text only box follows), `--mmproj FILE`
loads that file beside a model the catalog lists no projector for, and a file that
cannot be read is one line that leaves the plan as it was."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rigspark_gui.ui import background, dialogs
from tests.ui.test_main_window import pick

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

from mmproj_synth import MmprojSynth, write_mmproj  # noqa: E402

SMALL = MmprojSynth("small", 256, 1024, 4, 2, 448, 14, 4096)  # feeds a 4096-wide model


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    dialogs.shown.clear()


def test_pasted_no_mmproj_plans_text_only(qtbot, window) -> None:
    pick(qtbot, window, "gemma 3 27b")
    assert window.session.plan.projector is not None
    window.tabs.setCurrentWidget(window.layers_tab)
    assert window.layers_tab.apply_command("llama-server -m gemma.gguf -ngl 99 --no-mmproj")
    assert window.session.settings.text_only
    assert window.controls.text_only.isChecked()
    assert window.session.plan.projector is None
    assert all(d.projector_bytes == 0 for d in window.session.plan.device_loads)
    assert "projector" not in window.layers_tab.lane("gpu:0").bar.toolTip()
    assert "--no-mmproj" in window.layers_tab.message.text()


def test_pasted_mmproj_file_is_read_for_a_model_without_one(qtbot, window, tmp_path) -> None:
    path = tmp_path / "mmproj-small-f16.gguf"
    write_mmproj(SMALL, path)
    pick(qtbot, window, "llama 3.1 8b")
    assert window.session.spec.projector is None
    window.tabs.setCurrentWidget(window.layers_tab)
    assert window.layers_tab.apply_command(f"llama-server -m llama.gguf -ngl 99 --mmproj {path}")
    plan = window.session.plan
    assert window.session.spec.projector.file_name == path.name
    assert plan.projector is not None and plan.projector.file_name == path.name
    assert sum(d.projector_bytes for d in plan.device_loads) == plan.projector.device_bytes + (
        plan.projector.host_bytes if plan.projector.device != "cpu" else 0
    )
    assert window.controls.text_only.isEnabled() and not window.controls.text_only.isChecked()
    assert path.name in window.layers_tab.message.text()


def test_an_unreadable_pasted_mmproj_is_one_line(qtbot, window, tmp_path) -> None:
    pick(qtbot, window, "llama 3.1 8b")
    before = window.session.plan
    missing = tmp_path / "nope-mmproj.gguf"
    window.tabs.setCurrentWidget(window.layers_tab)
    window.layers_tab.apply_command(f"llama-server -m llama.gguf -ngl 99 --mmproj {missing}")
    text = window.layers_tab.message.text()
    assert text.startswith("The pasted --mmproj cannot be read") and "\n" not in text
    assert window.session.spec.projector is None
    assert window.session.plan.projector is None and before.projector is None
