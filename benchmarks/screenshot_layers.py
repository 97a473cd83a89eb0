"""Render the Layers tab offscreen to docs/screenshots/layers.png.

2x RTX 3090, Llama-3.3-70B Q4_K_M at 8K context, with one hand move (layer 40 to the CPU).
Run: QT_QPA_PLATFORM=offscreen python benchmarks/screenshot_layers.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtWidgets import QApplication  # noqa: E402

from rigspark_gui.catalog.models import load_catalog  # noqa: E402
from rigspark_gui.catalog.perf import load_perf  # noqa: E402
from rigspark_gui.core.rig import Cpu, Gpu, Rig, Vendor  # noqa: E402
from rigspark_gui.core.settings import PlanSettings  # noqa: E402
from rigspark_gui.ui.layers_tab import LayersTab  # noqa: E402

GIB = 1 << 30


def main() -> None:
    app = QApplication.instance() or QApplication([])
    entry = next(e for e in load_catalog().entries if e.id == "llama-3.3-70b-instruct")
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
    rig = Rig(
        name="2x RTX 3090",
        gpus=gpus,
        ram_total_bytes=64 * GIB,
        ram_available_bytes=60 * GIB,
        cpu=Cpu(name="AMD Ryzen 9 5950X", cores=16, memory_bandwidth_gbps=51.2),
    )
    tab = LayersTab()
    tab.resize(1280, 860)
    tab.set_context(entry.to_spec(), rig, PlanSettings(context=8192), load_perf(), "Q4_K_M")
    p = tab.document.placement
    assert p is not None
    moved = "blk.40" if p.unit("blk.40").device != "cpu" else "blk.79"
    tab.document.move_units([moved], "cpu")
    tab.show()
    app.processEvents()
    out = ROOT / "docs" / "screenshots" / "layers.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not tab.grab().save(str(out)):
        raise SystemExit(f"could not write {out}")
    print(out)


if __name__ == "__main__":
    main()
