"""Shared window fixtures for the GUI tests: a two-RTX-3090 rig and a window on it that
never detects hardware and keeps its settings in a temporary file."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSettings

from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.ui.main_window import MainWindow


def rig_2x3090() -> Rig:
    gpus = tuple(
        Gpu(
            name="NVIDIA GeForce RTX 3090",
            vendor=Vendor.NVIDIA,
            index=i,
            memory_total_bytes=24 * GIB,
            bandwidth_gbps=936.2,
            fp16_tflops=71.0,
        )
        for i in range(2)
    )
    return Rig(
        name="2x3090",
        gpus=gpus,
        ram_total_bytes=64 * GIB,
        ram_available_bytes=60 * GIB,
        cpu=Cpu(name="CPU", memory_bandwidth_gbps=51.2),
    )


@pytest.fixture
def window(qtbot, tmp_path):
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=rig_2x3090(), detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    w.show()
    return w
