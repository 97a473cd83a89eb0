"""Render the rig panel offscreen to docs/screenshots/: 2x RTX 3090 + RTX 4060
(rig_panel.png) and an Apple silicon Mac (rig_panel_mac.png), each as detection hands it
over (every GPU's own overhead from data/device_overhead.json).

Run: python benchmarks/screenshot_rig_panel.py [OUT.png]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication

from rigspark_gui.catalog.device_overhead import rig_with_overhead
from rigspark_gui.catalog.gpu_database import load_gpu_database
from rigspark_gui.core.rig import GIB, MIB, Basis, Cpu, Gpu, Provenance, Rig, Vendor
from rigspark_gui.resources import data_file
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.rig_panel import RigPanel

ROOT = Path(__file__).resolve().parent.parent
NVML = Provenance(basis=Basis.MEASURED, source="NVML")
PSUTIL = Provenance(basis=Basis.MEASURED, source="psutil")


def nvidia(name: str, index: int, total_mib: int, free_mib: int, display: bool) -> Gpu:
    return Gpu(
        name=name,
        vendor=Vendor.NVIDIA,
        index=index,
        memory_total_bytes=total_mib * MIB,
        memory_free_bytes=free_mib * MIB,
        display_attached=display,
        provenance={"memory_total_bytes": NVML, "memory_free_bytes": NVML, "vendor": NVML},
    )


def sample_rig() -> Rig:
    """What detection reports on a workstation with two 3090s and a 4060 driving the display."""
    database = load_gpu_database(data_file("gpus.json"))
    gpus = (
        nvidia("NVIDIA GeForce RTX 3090", 0, 24576, 24135, False),
        nvidia("NVIDIA GeForce RTX 3090", 1, 24576, 24135, False),
        nvidia("NVIDIA GeForce RTX 4060", 2, 8188, 7310, True),
    )
    rig = Rig(
        name="This machine",
        gpus=tuple(database.fill(g) for g in gpus),
        ram_total_bytes=64 * GIB,
        ram_available_bytes=58 * GIB,
        cpu=Cpu(
            name="AMD Ryzen 9 5950X 16-Core Processor",
            cores=16,
            threads=32,
            provenance={"cores": PSUTIL, "threads": PSUTIL},
        ),
        provenance={"ram_total_bytes": PSUTIL, "ram_available_bytes": PSUTIL},
    )
    return rig_with_overhead(rig)


def mac_rig() -> Rig:
    """What detection reports on a 64 GB M2 Max (sysctl answered by a stand-in)."""
    from rigspark_gui.hardware.apple import probe_apple

    def sysctl(args: object, timeout_s: float) -> str:
        return "0\n" if "iogpu.wired_limit_mb" in list(args) else "Apple M2 Max\n68719476736\n"

    mac = probe_apple(sysctl)
    assert mac.gpu is not None
    database = load_gpu_database(data_file("gpus.json"))
    rig = Rig(
        name="This machine",
        gpus=(database.fill(mac.gpu),),
        ram_total_bytes=64 * GIB,
        ram_available_bytes=52 * GIB,
        unified_memory=True,
        cpu=Cpu(name="Apple M2 Max", cores=12, provenance={"cores": PSUTIL}),
        notes=mac.notes,
        provenance={"ram_total_bytes": PSUTIL, "ram_available_bytes": PSUTIL},
    )
    return rig_with_overhead(rig)


def render(app: QApplication, rig: Rig, out: Path, edit: bool) -> bool:
    dialogs.HEADLESS = True
    settings = QSettings(str(out.with_suffix(".ini")), QSettings.Format.IniFormat)
    panel = RigPanel(load_gpu_database(data_file("gpus.json")), settings)
    panel.set_detected(rig)
    if edit:
        # Show an edit so the badge and a user figure appear in the picture.
        panel.set_gpu_reserve_bytes(2, 1024 * MIB)
        display_gpu = panel.device_tree.topLevelItem(2)
        if display_gpu is not None:
            panel.device_tree.setCurrentItem(display_gpu)
    panel.show()
    app.processEvents()
    # The list's columns size themselves once shown; then the hint covers them all.
    panel.resize(panel.sizeHint().width(), 440)
    app.processEvents()
    out.parent.mkdir(parents=True, exist_ok=True)
    ok = panel.grab().save(str(out))
    out.with_suffix(".ini").unlink(missing_ok=True)
    print(f"{'wrote' if ok else 'FAILED to write'} {out}")
    return ok


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "screenshots" / "rig_panel.png"
    app = QApplication.instance() or QApplication(argv)
    assert isinstance(app, QApplication)
    ok = render(app, sample_rig(), out, edit=True)
    ok = render(app, mac_rig(), out.with_name(f"{out.stem}_mac.png"), edit=False) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
