"""A GPU on the Vulkan backend (Intel's): nobody has published what its context takes, so
the shipped table has no figure for it and the rig panel's Overhead reads `unknown`, the
default the plan assumes named in the tooltip only."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings
from pytestqt.qtbot import QtBot

from rigspark_gui.catalog.device_overhead import rig_with_overhead, shipped_device_overhead
from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.core.device_overhead import device_overheads, gpu_backend
from rigspark_gui.core.rig import DEFAULT_GPU_RESERVE_BYTES, GIB, Basis, Gpu, Rig, Vendor
from rigspark_gui.resources import data_file
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.rig_panel import RigPanel
from rigspark_gui.ui.rig_rows import COL_RESERVE

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)"),
]


def _rig() -> Rig:
    arc = Gpu(name="Intel Arc A770", vendor=Vendor.INTEL, memory_total_bytes=16 * GIB)
    nvidia = Gpu(name="NVIDIA GeForce RTX 3090", vendor=Vendor.NVIDIA, memory_total_bytes=24 * GIB)
    return rig_with_overhead(Rig(name="mixed", gpus=(arc, nvidia), ram_total_bytes=64 * GIB))


def test_the_table_has_no_vulkan_figure_and_says_why() -> None:
    table = shipped_device_overhead()
    vulkan = [c for c in table.contexts if c.backend == "vulkan"]
    assert vulkan and all(c.bytes is None for c in vulkan)
    assert all(c.source for c in vulkan)
    rig = _rig()
    assert gpu_backend(rig.gpus[0]) == "vulkan"
    arc, nvidia = device_overheads(rig)
    assert arc.basis is Basis.UNKNOWN and "Vulkan context size unknown" in arc.source
    assert arc.bytes == DEFAULT_GPU_RESERVE_BYTES
    assert nvidia.basis is Basis.SPEC


def test_the_rig_panel_reads_unknown_for_the_vulkan_gpu(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    panel = RigPanel(load_gpu_database(data_file("gpus.json")), settings)
    qtbot.addWidget(panel)
    with qtbot.waitSignal(panel.rig_changed, timeout=1000):
        panel.set_detected(_rig())
    arc, nvidia = panel.device_tree.topLevelItem(0), panel.device_tree.topLevelItem(1)
    assert arc is not None and nvidia is not None
    assert arc.text(COL_RESERVE) == "unknown"
    tip = arc.toolTip(COL_RESERVE).replace("\n", " ")
    assert "Vulkan context size unknown" in tip and f"{DEFAULT_GPU_RESERVE_BYTES:,} bytes" in tip
    assert nvidia.text(COL_RESERVE).endswith("· spec")
