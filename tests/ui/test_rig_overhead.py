"""The rig panel names each device's own overhead with its source, and Apple's working
set; the figure it shows is the one the plan subtracts."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QTreeWidgetItem
from pytestqt.qtbot import QtBot

from rigspark_gui.catalog.device_overhead import rig_with_overhead, shipped_device_overhead
from rigspark_gui.catalog.gpu_database import GpuDatabase, load_gpu_database
from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.cli_speed import speed_model
from rigspark_gui.core.device_overhead import apple_working_set, device_overheads
from rigspark_gui.core.placement.devices import device_capacity
from rigspark_gui.core.plan import plan
from rigspark_gui.core.rig import GIB, MIB, Basis, Cpu, Gpu, Provenance, Rig, Vendor
from rigspark_gui.core.settings import make_settings
from rigspark_gui.resources import data_file
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.rig_panel import RigPanel
from rigspark_gui.ui.rig_rows import COL_DEVICE, COL_MEMORY, COL_RESERVE, HEADERS

pytestmark = [
    pytest.mark.gui,
    pytest.mark.qt_log_ignore(r"This plugin does not support propagateSizeHints\(\)"),
]

NVML = Provenance(basis=Basis.MEASURED, source="NVML")


@pytest.fixture(scope="module")
def database() -> GpuDatabase:
    return load_gpu_database(data_file("gpus.json"))


@pytest.fixture
def panel(
    qtbot: QtBot, database: GpuDatabase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> RigPanel:
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    widget = RigPanel(database, settings)
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    gpus = tuple(
        database.fill(
            Gpu(
                name=name,
                vendor=Vendor.NVIDIA,
                index=i,
                memory_total_bytes=total * MIB,
                memory_free_bytes=free * MIB,
                provenance={"memory_total_bytes": NVML, "memory_free_bytes": NVML},
            )
        )
        for i, (name, total, free) in enumerate(
            (("NVIDIA GeForce RTX 3090", 24576, 24135), ("NVIDIA GeForce RTX 4060", 8188, 7310))
        )
    )
    detected = rig_with_overhead(
        Rig(
            name="This machine",
            gpus=gpus,
            ram_total_bytes=64 * GIB,
            ram_available_bytes=58 * GIB,
            cpu=Cpu(name="AMD Ryzen 9 5950X", cores=16),
        )
    )
    with qtbot.waitSignal(widget.rig_changed, timeout=1000):
        widget.set_detected(detected)
    return widget


def _row(panel: RigPanel, index: int) -> QTreeWidgetItem:
    item = panel.device_tree.topLevelItem(index)
    assert item is not None
    return item


def test_each_gpu_shows_its_context_with_its_source(panel: RigPanel) -> None:
    assert HEADERS[COL_RESERVE] == "Overhead"
    measured, unmeasured = _row(panel, 0), _row(panel, 1)

    assert measured.text(COL_RESERVE) == "256 MiB · spec"
    tip = measured.toolTip(COL_RESERVE)
    assert "268,435,456 bytes" in tip and "CUDA context measured on this GPU" in tip
    assert "InvokeAI#9413" in tip.replace("\n", " ")
    assert unmeasured.text(COL_RESERVE) == "555 MiB · spec"
    assert "#20595" in unmeasured.toolTip(COL_RESERVE).replace("\n", "")


def test_the_figure_shown_is_the_one_the_plan_subtracts(panel: RigPanel) -> None:
    rig = panel.rig()
    spec = load_catalog().find("llama-3.1-8b-instruct").to_spec()
    result = plan(spec, rig, make_settings(context=4096), speed_model())

    shown = {
        f"gpu:{i}": int(_row(panel, i).text(COL_RESERVE).split()[0]) * MIB
        for i in range(len(rig.gpus))
    }
    entries = {e.device: e for e in device_overheads(rig)}
    for device, figure in shown.items():
        assert entries[device].bytes == figure
        assert device_capacity(rig, device)[1] == figure
    used = [d for d in result.device_loads if d.device.startswith("gpu:") and d.weights_bytes]
    assert used, "the plan put the model on a GPU"
    for load in used:
        assert load.reserve_bytes == shown[load.device]


def test_a_user_margin_replaces_the_figure_and_says_so(qtbot: QtBot, panel: RigPanel) -> None:
    panel.device_tree.setCurrentItem(_row(panel, 1))
    assert panel.reserve_spin.value() == 555
    panel.reserve_spin.setFocus()
    panel.reserve_spin.selectAll()
    qtbot.keyClicks(panel.reserve_spin, "1024")
    with qtbot.waitSignal(panel.rig_changed, timeout=1000):
        qtbot.keyClick(panel.reserve_spin, Qt.Key.Key_Return)

    assert _row(panel, 1).text(COL_RESERVE) == "1024 MiB · user"
    assert device_overheads(panel.rig())[1].basis is Basis.USER


def test_a_what_if_mac_shows_its_working_set(
    qtbot: QtBot, panel: RigPanel, database: GpuDatabase
) -> None:
    spec = database.match("Apple M2 Max")
    assert spec is not None
    panel.add_gpus(spec)

    item = _row(panel, 2)
    assert "M2 Max" in item.text(COL_DEVICE)
    limit, sentence = apple_working_set(shipped_device_overhead(), spec.memory_bytes)
    assert limit < spec.memory_bytes  # the GPU may not wire all of the RAM
    gpu = panel.rig().gpus[2]
    assert gpu.memory_total_bytes == limit
    assert item.text(COL_MEMORY).startswith(f"{limit / GIB:.1f}".removesuffix(".0"))
    memory_tip = item.toolTip(COL_MEMORY).replace("\n", " ")
    assert "Metal working set" in memory_tip and "iogpu.wired_limit_mb" in memory_tip
    assert item.text(COL_RESERVE) == "0 MiB · spec"
    assert "ggml-metal-device.m" in item.toolTip(COL_RESERVE).replace("\n", "")
    assert sentence.split(" (")[0] in memory_tip


def test_an_added_amd_card_gets_the_rocm_figure(panel: RigPanel, database: GpuDatabase) -> None:
    spec = next(g for g in database.gpus if g.vendor is Vendor.AMD and not g.unified)
    panel.add_gpus(spec)

    item = _row(panel, 2)
    assert item.text(COL_RESERVE) == "783 MiB · spec"
    assert "ROCm" in item.toolTip(COL_RESERVE)
