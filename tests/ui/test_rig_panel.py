"""The rig panel, driven as a user would: picker keys, buttons, spin boxes, files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QAbstractSpinBox, QFileDialog, QLabel, QTreeWidgetItem
from pytestqt.qtbot import QtBot

from rigspark_gui.catalog.device_overhead import rig_with_overhead
from rigspark_gui.catalog.gpu_database import GpuDatabase, load_gpu_database
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.core.rig import GIB, MIB, Basis, Cpu, Gpu, Provenance, Rig, Vendor
from rigspark_gui.resources import data_file
from rigspark_gui.ui import dialogs
from rigspark_gui.ui import rig_panel as rig_panel_module
from rigspark_gui.ui.rig_panel import MAX_RECENT, RigPanel
from rigspark_gui.ui.rig_panel_widgets import MNEMONICS
from rigspark_gui.ui.rig_rows import COL_BANDWIDTH, COL_DEVICE, COL_RESERVE

pytestmark = [
    pytest.mark.gui,
    # Qt's offscreen platform plugin does not implement QPlatformWindow::propagateSizeHints
    # and warns whenever a shown top-level window with a layout gets size constraints.
    pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)"),
]

NVML = Provenance(basis=Basis.MEASURED, source="NVML")
PSUTIL = Provenance(basis=Basis.MEASURED, source="psutil")


@pytest.fixture(scope="module")
def database() -> GpuDatabase:
    return load_gpu_database(data_file("gpus.json"))


@pytest.fixture(autouse=True)
def headless(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dialogs.ShownMessage]]:
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    dialogs.shown.clear()
    yield dialogs.shown
    dialogs.shown.clear()


@pytest.fixture
def settings(tmp_path: Path) -> QSettings:
    # A file of its own: tests never read or write the user's real settings.
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


def nvidia(name: str, index: int, total_mib: int, free_mib: int) -> Gpu:
    return Gpu(
        name=name,
        vendor=Vendor.NVIDIA,
        index=index,
        memory_total_bytes=total_mib * MIB,
        memory_free_bytes=free_mib * MIB,
        provenance={"memory_total_bytes": NVML, "memory_free_bytes": NVML},
    )


def detected_rig(database: GpuDatabase) -> Rig:
    gpus = (
        nvidia("NVIDIA GeForce RTX 3090", 0, 24576, 24135),
        nvidia("NVIDIA GeForce RTX 3090", 1, 24576, 24135),
        nvidia("NVIDIA GeForce RTX 4060", 2, 8188, 7310),
    )
    # as detection hands it over: each GPU's backend context as its reserve
    return rig_with_overhead(
        Rig(
            name="This machine",
            gpus=tuple(database.fill(g) for g in gpus),
            ram_total_bytes=64 * GIB,
            ram_available_bytes=58 * GIB,
            cpu=Cpu(
                name="AMD Ryzen 9 5950X 16-Core Processor", cores=16, provenance={"cores": PSUTIL}
            ),
            provenance={"ram_total_bytes": PSUTIL, "ram_available_bytes": PSUTIL},
        )
    )


@pytest.fixture
def panel(qtbot: QtBot, database: GpuDatabase, settings: QSettings) -> RigPanel:
    widget = RigPanel(database, settings)
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    with qtbot.waitSignal(widget.rig_changed, timeout=1000):
        widget.set_detected(detected_rig(database))
    return widget


def row(panel: RigPanel, index: int) -> QTreeWidgetItem:
    item = panel.device_tree.topLevelItem(index)
    assert item is not None, f"no row {index}"
    return item


def row_texts(panel: RigPanel, column: int) -> list[str]:
    return [row(panel, i).text(column) for i in range(panel.device_tree.topLevelItemCount())]


def select_row(panel: RigPanel, index: int) -> None:
    panel.device_tree.setCurrentItem(row(panel, index))


def type_into_spin(qtbot: QtBot, spin: QAbstractSpinBox, text: str) -> None:
    spin.setFocus()
    spin.selectAll()
    qtbot.keyClicks(spin, text)
    qtbot.keyClick(spin, Qt.Key.Key_Return)


def test_detected_rig_lists_every_device_with_its_basis(panel: RigPanel) -> None:
    assert not panel.is_edited()
    assert not panel.edited_badge.isVisible()
    assert row_texts(panel, COL_DEVICE) == [
        "GPU 0 · RTX 3090",
        "GPU 1 · RTX 3090",
        "GPU 2 · RTX 4060",
        "CPU · Ryzen 9 5950X",
    ]
    memory = row(panel, 0)
    assert memory.text(1) == "24 GiB · measured"
    assert memory.text(COL_BANDWIDTH) == "936 GB/s · spec"
    assert "25,769,803,776 bytes" in memory.toolTip(1)
    assert "Basis: spec" in memory.toolTip(COL_BANDWIDTH)
    assert "techpowerup" in memory.toolTip(COL_BANDWIDTH).lower()
    cpu = row(panel, 3)
    assert cpu.text(1) == "64 GiB (58 usable) · measured"
    assert cpu.text(COL_BANDWIDTH) == "unknown"
    assert cpu.text(3) == "16 cores · measured"
    assert not panel.notes_label.isVisible()


def test_edit_a_rig_then_reset(qtbot: QtBot, panel: RigPanel) -> None:
    detected = panel.rig()

    # Add an RTX 4090 by typing into the picker and pressing Enter.
    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    picker = panel.picker
    assert picker is not None and picker.isVisible()
    qtbot.keyClicks(picker.search_edit, "4090")
    # the board itself first, before its variants (4090 D, laptop)
    assert picker.visible_names()[0] == "NVIDIA GeForce RTX 4090"
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as added:
        qtbot.keyClick(picker.search_edit, Qt.Key.Key_Return)
    rig: Rig = added.args[0]
    assert [g.name for g in rig.gpus][-1] == "NVIDIA GeForce RTX 4090"
    new = rig.gpus[-1]
    assert new.index == 3 and new.memory_total_bytes == 24 * GIB
    assert new.basis_of("bandwidth_gbps").basis is Basis.SPEC
    assert rig.edited and panel.is_edited()
    assert panel.edited_badge.isVisible()
    assert "edited" in panel.edited_badge.text().lower()
    assert "GPU 3 · RTX 4090" in row_texts(panel, COL_DEVICE)
    assert row(panel, 3).text(COL_BANDWIDTH) == "1008 GB/s · spec"

    # Remove the first RTX 3090: the rest are renumbered in order.
    select_row(panel, 0)
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as removed:
        qtbot.mouseClick(panel.remove_button, Qt.MouseButton.LeftButton)
    rig = removed.args[0]
    assert [(g.index, g.name) for g in rig.gpus] == [
        (0, "NVIDIA GeForce RTX 3090"),
        (1, "NVIDIA GeForce RTX 4060"),
        (2, "NVIDIA GeForce RTX 4090"),
    ]

    # RAM 64 -> 128 GiB; what was in use at detection stays in use.
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as ram:
        type_into_spin(qtbot, panel.ram_spin, "128")
    rig = ram.args[0]
    assert rig.ram_total_bytes == 128 * GIB
    assert rig.ram_available_bytes == 122 * GIB
    assert rig.provenance["ram_total_bytes"].basis is Basis.USER
    assert row_texts(panel, 1)[-1] == "128 GiB (122 usable) · user"

    # Keep 1 GiB free on the RTX 4060 that drives the display.
    select_row(panel, 1)
    assert panel.reserve_spin.isEnabled()
    assert panel.reserve_label.text() == "GPU 1 &reserve:"
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as reserve:
        type_into_spin(qtbot, panel.reserve_spin, "1024")
    rig = reserve.args[0]
    assert rig.gpus[1].reserve_bytes == 1024 * MIB
    assert rig.gpus[1].basis_of("reserve_bytes").basis is Basis.USER
    assert rig.gpus[0].reserve_bytes == 256 * MIB  # the RTX 3090's CUDA context
    assert row(panel, 1).text(COL_RESERVE) == "1024 MiB · user"

    # The CPU row has no reserve to edit and no GPU to remove.
    select_row(panel, 3)
    assert not panel.reserve_spin.isEnabled()
    assert not panel.remove_button.isEnabled()

    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as reset:
        qtbot.mouseClick(panel.reset_button, Qt.MouseButton.LeftButton)
    assert reset.args[0] == detected
    assert not panel.is_edited()
    assert not panel.edited_badge.isVisible()
    assert not panel.reset_button.isEnabled()


def test_picker_adds_several_and_ignores_enter_without_a_match(
    qtbot: QtBot, panel: RigPanel
) -> None:
    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    picker = panel.picker
    assert picker is not None
    qtbot.keyClicks(picker.search_edit, "no such board")
    assert picker.visible_names() == []
    assert "No GPU" in picker.match_label.text()
    with qtbot.assertNotEmitted(panel.rig_changed):
        qtbot.keyClick(picker.search_edit, Qt.Key.Key_Return)
    assert picker.isVisible()

    picker.search_edit.clear()
    qtbot.keyClicks(picker.search_edit, "h100 sxm")
    assert picker.visible_names() == ["NVIDIA H100 80GB HBM3"]
    picker.count_spin.setValue(4)
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as added:
        qtbot.mouseClick(picker._ok, Qt.MouseButton.LeftButton)
    names = [g.name for g in added.args[0].gpus]
    assert names.count("NVIDIA H100 80GB HBM3") == 4
    assert len(names) == 7


def test_save_and_reopen_gives_the_same_rig(
    qtbot: QtBot,
    panel: RigPanel,
    database: GpuDatabase,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    panel.add_gpus(database.gpus[0], 2)
    panel.set_ram_total_bytes(96 * GIB)
    edited = panel.rig()
    target = tmp_path / "what-if"
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), "Rig files (*.json)")
    )
    qtbot.mouseClick(panel.save_button, Qt.MouseButton.LeftButton)
    saved = target.with_suffix(".json")
    assert saved.is_file(), dialogs.shown
    # the detected machine's name would mislead once it is a file: named after the file
    edited = replace(edited, name="what-if")
    assert load_rig(saved, database) == edited

    with qtbot.waitSignal(panel.rig_changed, timeout=1000):
        panel.reset_to_detected()
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(saved), ""))
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as opened:
        qtbot.mouseClick(panel.open_button, Qt.MouseButton.LeftButton)
    assert opened.args[0] == edited == panel.rig()
    assert panel.is_edited()
    assert dialogs.shown == []

    # Both files touched are remembered, newest first, and the menu opens them.
    assert panel.recent_files() == [saved.resolve()]
    actions = [a for a in panel.recent_menu.actions() if a.data()]
    assert [a.text() for a in actions] == ["&1 what-if.json"]
    panel.reset_to_detected()
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as again:
        actions[0].trigger()
    assert again.args[0] == edited


def test_malformed_rig_file_is_reported_and_changes_nothing(
    qtbot: QtBot,
    panel: RigPanel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"gpus": [', encoding="utf-8")
    negative = tmp_path / "negative.json"
    negative.write_text(json.dumps({"ram_total_bytes": -1}), encoding="utf-8")
    before = panel.rig()
    for path in (bad, negative):
        monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, p=path, **k: (str(p), ""))
        with qtbot.assertNotEmitted(panel.rig_changed):
            qtbot.mouseClick(panel.open_button, Qt.MouseButton.LeftButton)
    assert [(m.kind, m.title) for m in dialogs.shown] == [("error", "Cannot open rig")] * 2
    assert "broken.json is not valid JSON" in dialogs.shown[0].message
    assert "ram_total_bytes" in dialogs.shown[1].message
    assert panel.rig() == before
    assert not panel.is_edited()
    # A bad file is still remembered only if it exists; nothing was opened, nothing added.
    assert panel.recent_files() == []


def test_missing_recent_file_is_reported_and_forgotten(
    panel: RigPanel, settings: QSettings, tmp_path: Path
) -> None:
    gone = tmp_path / "gone.json"
    settings.setValue(rig_panel_module.RECENT_KEY, [str(gone)])
    assert panel.open_rig_file(gone) is False
    assert dialogs.shown[0].title == "Cannot open rig"
    assert panel.recent_files() == []


def test_unwritable_save_path_is_reported(panel: RigPanel, tmp_path: Path) -> None:
    assert panel.save_rig_file(tmp_path / "no-such-folder" / "rig.json") is False
    assert dialogs.shown[0].title == "Cannot save rig"
    assert "no-such-folder" in dialogs.shown[0].message


def test_unknown_gpu_from_a_rig_file_is_kept_with_a_warning(
    qtbot: QtBot, panel: RigPanel, tmp_path: Path
) -> None:
    path = tmp_path / "future.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "name": "future box",
                "gpus": [{"name": "Acme Hyperion X1"}, {"name": "NVIDIA GeForce RTX 4090"}],
                "ram_total_bytes": 32 * GIB,
            }
        ),
        encoding="utf-8",
    )
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as opened:
        assert panel.open_rig_file(path)
    rig: Rig = opened.args[0]
    assert [g.name for g in rig.gpus] == ["Acme Hyperion X1", "NVIDIA GeForce RTX 4090"]
    unknown = rig.gpus[0]
    assert unknown.memory_total_bytes is None
    assert unknown.basis_of("bandwidth_gbps").basis is Basis.UNKNOWN
    assert panel.notes_label.isVisible()
    assert "Acme Hyperion X1" in panel.notes_label.text()
    assert "not in the GPU database" in panel.notes_label.text()
    assert "Warning" in panel.notes_label.text()
    first = row(panel, 0)
    assert first.text(COL_DEVICE).startswith("⚠ GPU 0 · Acme Hyperion X1")
    assert first.text(1) == "unknown"
    assert "not in the GPU database" in first.toolTip(COL_BANDWIDTH)

    # Removing the board removes the warning about it.
    select_row(panel, 0)
    qtbot.keyClick(panel.device_tree, Qt.Key.Key_Delete)
    assert [g.name for g in panel.rig().gpus] == ["NVIDIA GeForce RTX 4090"]
    assert not panel.notes_label.isVisible()


def test_detection_progress_and_edits_survive_redetection(
    qtbot: QtBot, panel: RigPanel, database: GpuDatabase
) -> None:
    with qtbot.waitSignal(panel.redetect_requested, timeout=1000):
        qtbot.mouseClick(panel.redetect_button, Qt.MouseButton.LeftButton)
    panel.set_detecting(True)
    assert panel.progress_bar.isVisible()
    assert panel.progress_bar.maximum() == 0  # indeterminate
    assert not panel.redetect_button.isEnabled()

    panel.set_ram_total_bytes(32 * GIB)
    edited = panel.rig()
    fresh = replace(detected_rig(database), ram_available_bytes=50 * GIB)
    with qtbot.assertNotEmitted(panel.rig_changed):
        panel.set_detected(fresh)
    panel.set_detecting(False)
    assert not panel.progress_bar.isVisible()
    assert panel.redetect_button.isEnabled()
    assert panel.rig() == edited
    assert "edits are kept" in panel.status_label.text()
    with qtbot.waitSignal(panel.rig_changed, timeout=1000) as reset:
        panel.reset_to_detected()
    assert reset.args[0] == fresh


def test_recent_rigs_are_capped(panel: RigPanel, tmp_path: Path) -> None:
    for i in range(MAX_RECENT + 3):
        assert panel.save_rig_file(tmp_path / f"rig{i}.json")
    recent = panel.recent_files()
    assert len(recent) == MAX_RECENT
    assert recent[0].name == f"rig{MAX_RECENT + 2}.json"


def test_controls_are_keyboard_reachable(panel: RigPanel) -> None:
    for button in (
        panel.add_button,
        panel.remove_button,
        panel.reset_button,
        panel.redetect_button,
        panel.open_button,
        panel.save_button,
    ):
        assert "&" in button.text(), button.text()
        assert button.toolTip()
        assert button.focusPolicy() & Qt.FocusPolicy.TabFocus
    assert panel.device_tree.focusPolicy() == Qt.FocusPolicy.StrongFocus
    # Each Alt+letter in the panel is used once, so none of them is ambiguous.
    labels = [w.text() for w in panel.findChildren(QLabel)] + [
        b.text()
        for b in (
            panel.add_button,
            panel.remove_button,
            panel.reset_button,
            panel.redetect_button,
            panel.open_button,
            panel.save_button,
        )
    ]
    letters = [t[t.index("&") + 1].upper() for t in labels if "&" in t]
    assert len(letters) == len(set(letters)) == len(MNEMONICS)
    assert set(letters) == set(MNEMONICS)
    header = panel.device_tree.headerItem()
    assert all(header.toolTip(c) for c in range(panel.device_tree.columnCount()))


def test_a_vms_vcpus_show_the_cores_worth_they_were_timed_at(
    panel: RigPanel, database: GpuDatabase
) -> None:
    from dataclasses import replace

    from rigspark_gui.core.rig import Basis, Provenance

    detected = detected_rig(database)
    vm_cpu = Cpu(name="AMD EPYC", cores=2, features=("avx2", "hypervisor"))
    panel.set_detected(replace(detected, gpus=(), cpu=vm_cpu))
    cpu = row(panel, 0)
    assert cpu.text(3).startswith("2 vCPUs")
    assert "not measured yet" in cpu.toolTip(3)

    timed = Provenance(basis=Basis.MEASURED, source="2 threads together did 1 cores' worth")
    pairs = replace(vm_cpu, compute_cores=1.0, provenance={"compute_cores": timed})
    panel.set_detected(replace(detected, gpus=(), cpu=pairs))
    cpu = row(panel, 0)
    assert cpu.text(3).startswith("2 vCPUs ≈ 1 core")
    assert "1 core's worth of vector work" in cpu.toolTip(3)
    assert "hyperthreads" in cpu.toolTip(3)
