"""Inputs that understand people (issue: a window a newcomer understands): token counts
typed as people write them, a context that comes back when the model allows it, a
prompt longer than the context said, rig edits that cannot be impossible, K/V linked
as shown."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings, Qt

from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.units import parse_token_count
from rigspark_gui.ui.main_window import MainWindow
from tests.ui.conftest import rig_2x3090


@pytest.fixture
def window(window):
    window.session.set_model("llama-3.1-8b-instruct")
    return window


@pytest.mark.parametrize(
    ("text", "tokens"),
    [("32768", 32768), ("32k", 32768), ("128K", 131072), ("1M", 1 << 20), ("1.5k", 1536),
     (" 8 k ", 8192), ("4096 tokens", 4096), ("16,384", 16384)],
)  # fmt: skip
def test_token_counts_as_people_type_them(text: str, tokens: int) -> None:
    assert parse_token_count(text) == tokens


@pytest.mark.parametrize("text", ["", "k", "lots", "-5", "1.3", "2x"])
def test_what_is_not_a_token_count(text: str) -> None:
    assert parse_token_count(text) is None


def test_typing_32k_in_the_context_field_means_32768(qtbot, window) -> None:
    spin = window.controls.context_spin
    spin.selectAll()
    qtbot.keyClicks(spin, "32k")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    assert window.session.settings.context == 32768
    assert spin.value() == 32768


def test_a_clamped_context_comes_back_with_a_model_that_allows_it(qtbot, window) -> None:
    window.session.update_settings(context=131072)
    window.session.set_model("qwen3-14b")  # a 40K model
    assert window.session.settings.context == 40960
    window.session.set_model("llama-3.1-8b-instruct")
    assert window.session.settings.context == 131072


def test_a_prompt_longer_than_the_context_is_said(qtbot, window) -> None:
    window.session.update_settings(context=512, prompt_tokens=1024)
    assert "longer than the context" in window.paths_tab.summary.text()
    window.session.update_settings(prompt_tokens=256)
    assert "longer than the context" not in window.paths_tab.summary.text()


def test_a_gpu_reserve_cannot_exceed_the_card(qtbot, window) -> None:
    panel = window.rig_panel
    panel.device_tree.setCurrentItem(panel.device_tree.topLevelItem(0))
    spin = panel.reserve_spin
    assert spin.maximum() == 24 * 1024  # the 24 GiB card, in MiB
    spin.setValue(30000)
    assert window.session.rig.gpus[0].reserve_bytes <= 24 << 30


def test_ram_cannot_be_set_to_nothing(qtbot, window) -> None:
    panel = window.rig_panel
    before = window.session.rig.ram_total_bytes
    panel.ram_spin.setValue(0.0)
    assert window.session.rig.ram_total_bytes == before
    assert "at least" in panel.status_label.text()
    assert panel.ram_spin.value() == pytest.approx(before / (1 << 30))


def test_link_kv_at_start_locks_v_to_k(qtbot, window) -> None:
    c = window.controls
    assert c.kv_link.isChecked() and not c.kv_v.isEnabled()
    c.kv_k.setCurrentIndex(c.kv_k.findData("q8_0"))
    s = window.session.settings
    assert s.kv_k == s.kv_v == KvCacheType.Q8_0


def test_mixed_kv_types_come_back_unlinked(qtbot, tmp_path) -> None:
    path = str(tmp_path / "kv.ini")
    w = MainWindow(rig=rig_2x3090(), detect_on_start=False,
                   settings=QSettings(path, QSettings.Format.IniFormat))  # fmt: skip
    qtbot.addWidget(w)
    w.session.update_settings(kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q4_0, flash_attn=True)
    w.close()
    again = MainWindow(rig=rig_2x3090(), detect_on_start=False,
                       settings=QSettings(path, QSettings.Format.IniFormat))  # fmt: skip
    qtbot.addWidget(again)
    c = again.controls
    assert not c.kv_link.isChecked() and c.kv_v.isEnabled()
    assert c.kv_v.currentData() == "q4_0" and c.kv_k.currentData() == "q8_0"
