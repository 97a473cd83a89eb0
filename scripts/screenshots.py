"""Render every tab of the window offscreen into docs/screenshots/ (for the README).

Run: QT_QPA_PLATFORM=offscreen .venv/bin/python scripts/screenshots.py [--every-tab DIR]
A 2x RTX 3090 workstation planning Llama 3.3 70B at 32K context.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# the shipped speed prior only: no on-machine calibration or cached bandwidth of this host
os.environ["RIGSPARK_CACHE_DIR"] = tempfile.mkdtemp(prefix="rigspark-screens-")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEvent, QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from rigspark_gui.catalog.gpu_database import load_gpu_database  # noqa: E402
from rigspark_gui.catalog.rig_file import load_rig  # noqa: E402
from rigspark_gui.core.rig import Cpu, Rig  # noqa: E402
from rigspark_gui.resources import data_file  # noqa: E402
from rigspark_gui.ui import background, dialogs  # noqa: E402
from rigspark_gui.ui.main_window import MainWindow  # noqa: E402


def settle(app: QApplication) -> None:
    """One turn of the event loop, deferred deletes included (processEvents alone
    leaves a rebuilt tab's old widgets on screen, where the real loop deletes them)."""
    app.processEvents()
    app.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def main() -> None:
    app = QApplication.instance() or QApplication(sys.argv)
    dialogs.HEADLESS = True
    background.POOL = background.SyncPool()
    out = ROOT / "docs" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    settings = QSettings(str(out / ".screenshot-settings.ini"), QSettings.Format.IniFormat)
    settings.clear()
    db = load_gpu_database(data_file("gpus.json"), lenient=True)
    rig = load_rig(ROOT / "examples" / "rig-2x3090.json", db)
    w = MainWindow(rig=rig, detect_on_start=False, settings=settings)
    w.resize(1500, 900)
    w.session.set_model("llama-3.3-70b-instruct")
    w.session.update_settings(context=32768)
    w.show()
    w.what_if.suggest_now()  # the ladders and what-would-it-take line, as the window does
    for name, tab in (
        ("paths", w.paths_tab),
        ("kv", w.kv_tab),
        ("layers", w.layers_tab),
        ("catalog", w.catalog_tab),
    ):
        w.tabs.setCurrentWidget(tab)
        for _ in range(5):
            settle(app)
        w.grab().save(str(out / f"{name}.png"))
    # the smallest size the window is made for, a laptop and a large screen: the Paths
    # tab in docs/screenshots/window-WxH.png; with --every-tab DIR, every tab in DIR too
    every = Path(sys.argv[sys.argv.index("--every-tab") + 1]) if "--every-tab" in sys.argv else None
    for width, height in ((1024, 700), (1600, 1000), (1920, 1080)):
        w.resize(width, height)
        tabs = [("", w.paths_tab, out)]
        if every is not None:
            every.mkdir(parents=True, exist_ok=True)
            tabs += [(f"-{n}", getattr(w, f"{n}_tab"), every) for n in ("kv", "layers", "catalog")]
        for name, tab, folder in tabs:
            w.tabs.setCurrentWidget(tab)
            for _ in range(10):
                settle(app)
            w.grab().save(str(folder / f"window-{width}x{height}{name}.png"))
    # a new plan as llama.cpp runs it by default (context, flash attention and slots
    # auto): RigSpark's plan beside what llama.cpp's fit alone would do
    w.session.set_model("llama-3.1-8b-instruct")
    w.session.update_settings(context="auto")
    w.resize(1500, 900)
    w.what_if.suggest_now()
    w.tabs.setCurrentWidget(w.paths_tab)
    for _ in range(8):
        settle(app)
    w.grab().save(str(out / "paths-engine-defaults.png"))
    # models of 2026: Gemma 3 27B with its vision projector on GPU 0, and Qwen3.6 27B,
    # whose Gated DeltaNet layers keep a recurrent state beside the attention KV cache
    for name, model in (("layers-projector", "gemma-3-27b-it"), ("layers-qwen36", "qwen3.6-27b")):
        w.session.set_model(model)
        w.session.update_settings(context=32768)
        w.tabs.setCurrentWidget(w.layers_tab)
        for _ in range(8):
            settle(app)
        w.grab().save(str(out / f"{name}.png"))
    # the Projector popup beside the tabs: the file, its image size, kept on the CPU or not
    w.session.set_model("gemma-3-27b-it")
    w.tabs.setCurrentWidget(w.paths_tab)
    w.controls.projector.open_panel()
    for _ in range(8):
        settle(app)
    w.controls.projector.panel.grab().save(str(out / "projector-panel.png"))
    w.controls.projector.panel.hide()
    w.close()
    # Auto on a desktop with no GPU: the speed it reaches decides the quantization
    desktop = Rig(
        name="Desktop, no GPU",
        ram_total_bytes=32 << 30,
        ram_available_bytes=28 << 30,
        cpu=Cpu(
            name="AMD Ryzen 7 7700",
            cores=8,
            memory_bandwidth_gbps=60.0,
            features=("avx2", "avx512"),
        ),
    )
    settings.clear()
    w = MainWindow(rig=desktop, detect_on_start=False, settings=settings)
    w.resize(1500, 900)
    w.session.set_model("llama-3.1-8b-instruct")
    w.session.update_settings(context=8192)
    w.show()
    w.tabs.setCurrentWidget(w.paths_tab)
    for _ in range(5):
        settle(app)
    w.grab().save(str(out / "paths-cpu-auto.png"))
    # the Weights popup: how llama.cpp loads what the CPU holds, with both figures
    w.session.set_model("gpt-oss-20b")
    w.session.update_settings(context=32768)
    w.controls.loading.open_panel()
    for _ in range(8):
        settle(app)
    w.controls.loading.panel.grab().save(str(out / "weights-panel.png"))
    w.controls.loading.panel.hide()
    w.close()
    # two machines over 10 GbE: llama.cpp RPC, the lanes grouped by host
    settings.clear()
    hosts = load_rig(ROOT / "examples" / "rig-two-hosts-3090.json", db)
    w = MainWindow(rig=hosts, detect_on_start=False, settings=settings)
    w.resize(1500, 900)
    w.session.set_model("llama-3.3-70b-instruct")
    w.session.update_settings(context=8192, quant="Q4_K_M")
    w.show()
    for name, tab in (("paths-multi-host", w.paths_tab), ("layers-hosts", w.layers_tab)):
        w.tabs.setCurrentWidget(tab)
        for _ in range(8):
            settle(app)
        w.grab().save(str(out / f"{name}.png"))
    w.close()
    # a vLLM server: two 8x H100 nodes serving Llama 3.1 405B (TP 8 x PP 2)
    settings.clear()
    nodes = load_rig(ROOT / "examples" / "rig-2x8xh100.json", db)
    w = MainWindow(rig=nodes, detect_on_start=False, settings=settings)
    w.resize(1500, 900)
    w.session.set_model("llama-3.1-405b-instruct")
    w.session.update_settings(backend="vllm", context=32768)
    w.show()
    w.tabs.setCurrentWidget(w.serving_tab)
    for _ in range(8):
        settle(app)
    w.grab().save(str(out / "serving.png"))
    w.close()
    settings.clear()
    Path(settings.fileName()).unlink(missing_ok=True)
    os._exit(0)  # skip interpreter teardown of Qt objects: nothing left to save


if __name__ == "__main__":
    main()
