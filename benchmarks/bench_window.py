"""Control change to repainted Paths tab (not a test).

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/bench_window.py
Steps the context spin box through 40 values on a 2x RTX 3090 rig with Llama 3.3 70B and
times each change through re-planning, the table and both charts, until the event loop
has painted the window (offscreen raster, 1500x900).
Then picks 24 catalog models in the model picker, each for the first time (its layouts
synthesized on the spot), and times each pick the same way.
Target: 16 ms (one frame at 60 Hz).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from rigspark_gui.catalog.gpu_database import load_gpu_database  # noqa: E402
from rigspark_gui.catalog.rig_file import load_rig  # noqa: E402
from rigspark_gui.resources import data_file  # noqa: E402
from rigspark_gui.ui import background, dialogs  # noqa: E402
from rigspark_gui.ui.main_window import MainWindow  # noqa: E402
from rigspark_gui.ui.model_picker import ID_ROLE  # noqa: E402


def main() -> None:
    app = QApplication.instance() or QApplication(sys.argv)
    dialogs.HEADLESS = True
    background.POOL = background.SyncPool()
    settings = QSettings(str(ROOT / ".bench-settings.ini"), QSettings.Format.IniFormat)
    db = load_gpu_database(data_file("gpus.json"), lenient=True)
    rig = load_rig(ROOT / "examples" / "rig-2x3090.json", db)
    w = MainWindow(rig=rig, detect_on_start=False, settings=settings)
    w.resize(1500, 900)
    w.session.set_model("llama-3.3-70b-instruct")
    w.tabs.setCurrentWidget(w.paths_tab)
    w.show()
    app.processEvents()
    times = []
    for i in range(40):
        t = time.perf_counter()
        w.controls.context_spin.setValue(4096 + 1024 * i)
        app.processEvents()  # runs the queued paint of every changed widget
        times.append((time.perf_counter() - t) * 1000)
    picker = w.controls.model_picker
    rows = [
        r
        for r in range(picker.count())
        if picker.itemData(r, ID_ROLE) not in (None, "llama-3.3-70b-instruct")
    ]
    picks = []
    for r in rows[:: max(len(rows) // 24, 1)][:24]:
        t = time.perf_counter()
        picker.setCurrentIndex(r)
        picker.activated.emit(r)
        app.processEvents()
        picks.append((time.perf_counter() - t) * 1000)
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    for what, values in (
        ("context change -> repainted Paths tab", times),
        (f"pick a model, first time ({len(picks)} models)", picks),
    ):
        print(
            f"{what}: median {statistics.median(values):.1f} ms, "
            f"p90 {sorted(values)[int(len(values) * 0.9)]:.1f} ms, best {min(values):.1f} ms"
        )
    settings.clear()
    Path(settings.fileName()).unlink(missing_ok=True)
    os._exit(0)


if __name__ == "__main__":
    main()
