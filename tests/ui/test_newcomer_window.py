"""The window as a newcomer finds it, driven with clicks and keys: an Undo that cannot
bring an old rig back over an opened one, a completion chosen with the arrow keys,
the Serving entry while no server is planned, window shortcuts from any text field,
labels that say where the rig comes from, and help that needs no files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QObject, QSettings, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QFileDialog

from rigspark_gui.core.rig import GIB, Cpu, Rig
from rigspark_gui.core.settings import Backend
from rigspark_gui.ui import background, dialogs
from rigspark_gui.ui.main_window import MainWindow
from rigspark_gui.ui.model_picker import ID_ROLE
from rigspark_gui.ui.rig_document import NO_DRIVER_NOTE

from .conftest import rig_2x3090

CTRL = Qt.KeyboardModifier.ControlModifier


@pytest.fixture(autouse=True)
def _headless(monkeypatch):
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    dialogs.shown.clear()


def rig_file(tmp_path: Path, name: str = "node", gpus: tuple[str, ...] = ("RTX 4090",)) -> Path:
    path = tmp_path / f"{name}.json"
    body = {
        "schema_version": 1,
        "name": name,
        "ram_total_bytes": 64 << 30,
        "gpus": [{"name": f"NVIDIA GeForce {g}"} for g in gpus],
        "notes": [NO_DRIVER_NOTE],  # saved from a computer without an NVIDIA driver
    }
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def choose_open(monkeypatch, path: Path) -> None:
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a: (str(path), "")))


def suggestions_for_70b(qtbot, window):
    """Llama 3.3 70B at 32K on 2x RTX 3090: the Paths tab suggests a change or three."""
    window.session.set_model("llama-3.3-70b-instruct")
    window.session.update_settings(context=32768)
    tab = window.paths_tab
    qtbot.waitUntil(lambda: bool(tab.ideas), timeout=10000)
    return tab


def click_suggestion(tab, pick) -> object:
    idea = next(i for i in tab.ideas if pick(i))
    tab.suggestions.linkActivated.emit(f"apply:{tab.ideas.index(idea)}")  # the link, clicked
    return idea


def press(qtbot, key: Qt.Key, modifier=CTRL) -> None:
    """A key press where the user's focus is (the window if nothing has it)."""
    target = QApplication.focusWidget() or QApplication.activeWindow()
    qtbot.keyClick(target, key, modifier)


# ------------------------------------------------------------------- 1. one undo history


def test_opening_a_rig_retires_the_undo_of_an_applied_suggestion(
    qtbot, window, monkeypatch, tmp_path
) -> None:
    tab = suggestions_for_70b(qtbot, window)
    click_suggestion(tab, lambda i: i.rig_change == "add_gpu")
    assert len(window.session.rig.gpus) == 3
    qtbot.waitUntil(lambda: "Undo" in tab.suggestions.text())
    assert window.undo_action.isEnabled()

    opened = rig_file(tmp_path)
    choose_open(monkeypatch, opened)
    window.paths_tab.table.setFocus()
    press(qtbot, Qt.Key.Key_O)  # File ▸ Open rig…
    node = window.session.rig
    assert node.name == "node" and [g.name for g in node.gpus] == ["NVIDIA GeForce RTX 4090"]

    assert "Undo" not in tab.suggestions.text() and "Applied" not in tab.suggestions.text()
    assert not window.undo_action.isEnabled() and not window.redo_action.isEnabled()
    # the old link, clicked anyway (still on screen a moment), and Ctrl+Z: the opened rig stays
    tab.suggestions.linkActivated.emit("undo")
    press(qtbot, Qt.Key.Key_Z)
    window.undo_action.trigger()
    assert window.session.rig == node == window.rig_panel.rig()
    assert window.rig_panel.source_label.text() == "From node.json"
    assert "before the suggestion" not in window.rig_panel.status_label.text()


def test_rig_edits_and_suggestions_share_one_history(qtbot, window) -> None:
    tab = suggestions_for_70b(qtbot, window)
    before = window.session.rig
    click_suggestion(tab, lambda i: i.rig_change == "add_gpu")
    with_gpu = window.session.rig
    qtbot.waitUntil(lambda: "Undo" in tab.suggestions.text())

    # an edit in the rig panel is the next undo now: the link stands for nothing
    spin = window.rig_panel.ram_spin
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, "128")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    assert window.session.rig.ram_total_bytes == 128 * GIB
    assert "Undo" not in tab.suggestions.text()
    assert window.undo_action.text().replace("&", "") == "Undo RAM 128 GiB"

    window.paths_tab.table.setFocus()
    press(qtbot, Qt.Key.Key_Z)  # the RAM edit
    assert window.session.rig == with_gpu
    assert "Undo" in tab.suggestions.text()  # the suggestion is next again
    press(qtbot, Qt.Key.Key_Z)  # the suggestion
    assert window.session.rig == before
    press(qtbot, Qt.Key.Key_Z, CTRL | Qt.KeyboardModifier.ShiftModifier)  # redo
    assert window.session.rig == with_gpu


def test_a_settings_change_retires_an_applied_settings_suggestion(qtbot, window) -> None:
    tab = suggestions_for_70b(qtbot, window)
    click_suggestion(tab, lambda i: "context" in i.settings)
    assert window.session.settings.context == 16384
    qtbot.waitUntil(lambda: "Undo" in tab.suggestions.text())
    qtbot.mouseClick(window.controls.preset_buttons["8K"], Qt.MouseButton.LeftButton)
    assert window.session.settings.context == 8192
    assert "Undo" not in tab.suggestions.text() and not window.undo_action.isEnabled()
    tab.suggestions.linkActivated.emit("undo")
    assert window.session.settings.context == 8192  # the user's choice stays


# ------------------------------------------------------------------- 4. the model picker


def test_a_completion_chosen_with_the_keys_plans_it_with_no_error(qtbot, window) -> None:
    picker = window.controls.model_picker
    picker.setFocus()
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), "qwen3 32")
    popup = picker.completer().popup()
    assert popup.isVisible()
    # the open list takes the keys (Qt gives it the keyboard while it is shown)
    qtbot.keyClick(popup, Qt.Key.Key_Down)
    qtbot.keyClick(popup, Qt.Key.Key_Return)
    assert window.session.spec.id == "qwen3-32b"
    assert window.statusBar().currentMessage() == ""
    assert window.problem.isHidden()


def test_a_name_that_is_no_model_is_said_in_the_window_s_words(qtbot, window) -> None:
    picker = window.controls.model_picker
    picker.setFocus()
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), "zyzzyva 9000")
    qtbot.keyClick(picker.lineEdit(), Qt.Key.Key_Return)
    message = window.statusBar().currentMessage()
    assert message.startswith("Unknown model 'zyzzyva 9000'")
    assert "rigspark-plan" not in message and "`" not in message and "\n" not in message
    assert "Import model" in message


# ------------------------------------------------------------------- 6. View ▸ Serving


def test_view_serving_is_off_with_its_reason_until_a_server_is_planned(qtbot, window) -> None:
    window.session.set_model("llama-3.1-8b-instruct")
    assert window.session.settings.backend is Backend.LLAMA_CPP
    serving = window.view_actions[window.tabs.indexOf(window.serving_tab)]
    assert serving.text() == "Serving" and not serving.isEnabled()
    assert "vLLM or SGLang" in serving.toolTip()
    window.paths_tab.table.setFocus()
    press(qtbot, Qt.Key.Key_5)
    assert window.tabs.currentWidget() is window.paths_tab
    # the page itself, whatever shows it, holds a sentence and no chart
    tab = window.serving_tab
    assert tab.chart_slot.isHidden() and not tab.chart_slot.ready
    assert "vLLM or SGLang" in tab.no_chart.text()

    combo = window.controls.backend
    combo.setCurrentIndex(combo.findData(Backend.VLLM.value))
    assert serving.isEnabled()
    press(qtbot, Qt.Key.Key_5)
    assert window.tabs.currentWidget() is tab
    assert tab.chart_slot.isVisible() and not tab.no_chart.isVisible()

    combo.setCurrentIndex(combo.findData(Backend.LLAMA_CPP.value))
    assert not serving.isEnabled() and window.tabs.currentWidget() is not tab
    assert tab.chart_slot.isHidden() and "vLLM or SGLang" in tab.no_chart.text()


# ------------------------------------------------------------------- 7. shortcuts anywhere


class ClaimsCtrlE(QObject):
    """A text field as X11 makes it: Ctrl+E is its "end of line" (emacs bindings), so it
    claims the key before any shortcut sees it. Offscreen Qt has no such binding."""

    def eventFilter(self, watched, event) -> bool:
        if (
            event.type() == QEvent.Type.ShortcutOverride
            and isinstance(event, QKeyEvent)
            and event.key() == Qt.Key.Key_E
            and event.modifiers() == CTRL
        ):
            event.accept()
        return False


def test_ctrl_e_exports_from_the_model_picker_and_the_catalog_filter(
    qtbot, window, monkeypatch
) -> None:
    window.session.set_model("llama-3.1-8b-instruct")
    asked: list[str] = []

    def cancelled(parent, caption, *rest):
        asked.append(caption)
        return "", ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(cancelled))
    x11 = ClaimsCtrlE()
    picker = window.controls.model_picker
    catalog_filter = window.catalog_tab.filter
    for field in (picker, picker.lineEdit(), catalog_filter):
        field.installEventFilter(x11)

    picker.setFocus()
    assert QApplication.focusWidget() is picker
    press(qtbot, Qt.Key.Key_E)
    assert asked == ["Export plan report"]

    press(qtbot, Qt.Key.Key_4)  # View ▸ Catalog, from the picker too
    assert window.tabs.currentWidget() is window.catalog_tab
    catalog_filter.setFocus()
    qtbot.keyClicks(catalog_filter, "llama")
    press(qtbot, Qt.Key.Key_E)
    assert asked == ["Export plan report"] * 2
    assert catalog_filter.text() == "llama"  # nothing typed next lands in the filter


def test_text_fields_keep_their_own_editing_keys(window) -> None:
    keeper = window.shortcut_keeper
    for key in (Qt.Key.Key_A, Qt.Key.Key_C, Qt.Key.Key_V, Qt.Key.Key_Z):
        assert not keeper.keeps(QKeyEvent(QEvent.Type.ShortcutOverride, key, CTRL))
    assert keeper.keeps(QKeyEvent(QEvent.Type.ShortcutOverride, Qt.Key.Key_E, CTRL))


# ------------------------------------------------------------------- 10. true labels


def test_an_opened_rig_is_from_its_file_until_edited_and_after_a_restart(
    qtbot, tmp_path, monkeypatch
) -> None:
    ini = str(tmp_path / "settings.ini")
    w = MainWindow(
        rig=rig_2x3090(), detect_on_start=False, settings=QSettings(ini, QSettings.Format.IniFormat)
    )
    qtbot.addWidget(w)
    w.show()
    panel = w.rig_panel
    assert panel.source_label.text() == "Detected on this computer"
    assert not panel.edited_badge.isVisible()

    choose_open(monkeypatch, rig_file(tmp_path))
    qtbot.mouseClick(panel.open_button, Qt.MouseButton.LeftButton)
    assert panel.source_label.text() == "From node.json"
    assert panel.source_label.toolTip() == str(tmp_path / "node.json")
    assert not panel.edited_badge.isVisible() and "Edited" not in panel.edited_badge.text()

    w.close()  # and start again, with no edit
    again = MainWindow(
        rig=None, detect_on_start=False, settings=QSettings(ini, QSettings.Format.IniFormat)
    )
    qtbot.addWidget(again)
    again.show()
    panel = again.rig_panel
    assert panel.rig().name == "node"
    assert panel.source_label.text() == "From node.json"
    assert not panel.edited_badge.isVisible()
    panel.set_detected(replace(rig_2x3090(), name="This machine"))  # detection, later
    assert panel.rig().name == "node" and panel.source_label.text() == "From node.json"
    assert not panel.edited_badge.isVisible()
    assert "node.json is kept" in panel.status_label.text()

    # the user's own edit makes it a what-if
    spin = panel.ram_spin
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, "96")
    qtbot.keyClick(spin, Qt.Key.Key_Return)
    assert panel.edited_badge.isVisible() and panel.edited_badge.text() == "Edited · what-if"
    assert panel.source_label.text() == "From node.json, edited"


def no_gpu_machine() -> Rig:
    return Rig(
        name="This machine",
        ram_total_bytes=32 * GIB,
        cpu=Cpu(name="CPU", memory_bandwidth_gbps=40.0),
        notes=(NO_DRIVER_NOTE,),
    )


def test_the_driver_warning_is_plain_and_only_under_this_computer(
    qtbot, window, monkeypatch, tmp_path
) -> None:
    import importlib

    probes = importlib.import_module("rigspark_gui.hardware.detect")  # the module, not detect()
    monkeypatch.setattr(probes, "detect", lambda **_k: no_gpu_machine())
    window.start_detection()  # View ▸ Re-detect hardware
    panel = window.rig_panel
    assert panel.notes_label.isVisible()
    assert panel.notes_label.text() == "⚠ Warning: no NVIDIA driver found on this computer"
    message = window.statusBar().currentMessage()
    assert "no NVIDIA driver found on this computer" in message and "NVML" not in message

    # a what-if GPU: the warning is about this computer, not the rig shown
    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(panel.picker.search_edit, "4090")
    qtbot.keyClick(panel.picker.search_edit, Qt.Key.Key_Return)
    assert len(panel.rig().gpus) == 1
    assert not panel.notes_label.isVisible() and NO_DRIVER_NOTE not in panel.rig().notes
    window.session.set_model("llama-3.1-8b-instruct")
    assert NO_DRIVER_NOTE not in window.session.plan.notes  # nor in a report of it

    # a file with GPUs, saved on a computer without the driver: not under it either
    choose_open(monkeypatch, rig_file(tmp_path))
    window.open_rig_action.trigger()
    assert panel.rig().name == "node" and not panel.notes_label.isVisible()
    assert NO_DRIVER_NOTE not in window.session.plan.notes

    panel.reset_to_detected()  # back on this computer, the warning is true again
    assert panel.notes_label.isVisible()


def test_the_note_the_window_words_is_the_one_detection_writes() -> None:
    from rigspark_gui.hardware.nvidia import NVML_NOT_FOUND_NOTE

    assert NO_DRIVER_NOTE == NVML_NOT_FOUND_NOTE


# ------------------------------------------------------------------- 12b. help in the app


def test_how_the_numbers_are_computed_is_readable_without_files(qtbot, window) -> None:
    window.paths_tab.table.setFocus()
    press(qtbot, Qt.Key.Key_F1, Qt.KeyboardModifier.NoModifier)
    box = window.help_box
    assert box.isVisible()
    text = box.text()
    for fact in ("Memory", "Speed", "Auto", "llama.cpp", "Reconcile"):
        assert fact in text
    # no file of the source tree, which an installed app does not have
    assert "docs/" not in text and ".md" not in text


def test_after_a_completion_the_open_list_still_picks(qtbot, window) -> None:
    picker = window.controls.model_picker
    picker.setFocus()
    picker.lineEdit().clear()
    qtbot.keyClicks(picker.lineEdit(), "qwen3 32")
    popup = picker.completer().popup()
    qtbot.keyClick(popup, Qt.Key.Key_Down)
    qtbot.keyClick(popup, Qt.Key.Key_Return)
    assert window.session.spec.id == "qwen3-32b"
    # then the drop-down list, as a mouse user would: its choice is planned
    row = next(
        r for r in range(picker.count()) if picker.itemData(r, ID_ROLE) == "llama-3.1-8b-instruct"
    )
    picker.showPopup()
    picker.activated.emit(row)
    assert window.session.spec.id == "llama-3.1-8b-instruct"
