"""What each entry point imports, checked in a fresh interpreter (not timed): the CLI's
commands stay off Qt, charts, numpy and gguf, and the window's first paint happens
before the chart modules (pyqtgraph, numpy) or the hardware probes are imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("PySide6", "pyqtgraph", "numpy", "gguf")


def _run(code: str, home: Path | None = None) -> dict[str, object]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    if home is not None:  # settings and caches a test writes stay in its own folder
        env.update(
            HOME=str(home),
            XDG_CACHE_HOME=str(home / "cache"),
            RIGSPARK_CACHE_DIR=str(home / "cache" / "rigspark"),
        )
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--model", "llama-3.1-8b-instruct", "--rig", "examples/rig-2x3090.json"],
        ["place", "--model", "llama-3.1-8b-instruct", "--rig", "examples/rig-2x3090.json"],
        ["rank", "--rig", "examples/rig-2x3090.json"],
        ["models"],
    ],
    ids=lambda a: a[0],
)
def test_cli_commands_import_no_qt_charts_numpy_or_gguf(argv: list[str], tmp_path: Path) -> None:
    """The first run validates the files it reads with pydantic; the next one finds their
    records kept (catalog/validated.py) and loads no pydantic at all."""
    code = f"""
        import contextlib, io, json, sys
        from rigspark_gui.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            main({[*argv, "--json"]!r})
        heavy = {list(HEAVY)!r} + ["rigspark_gui.calibrate.synth", "rigspark_gui.ui", "pydantic",
                                   "huggingface_hub", "rigspark_gui.catalog.remote",
                                   # writers, runners and local stores load on use
                                   "subprocess", "tempfile", "shutil",
                                   "rigspark_gui.catalog.local_models"]
        print(json.dumps({{"loaded": [m for m in heavy if m in sys.modules]}}))
        """
    first = _run(code, home=tmp_path)
    assert "pydantic" in first["loaded"]  # nothing kept yet: every file is validated
    assert _run(code, home=tmp_path)["loaded"] == []


def test_the_window_paints_before_charts_or_probes_are_imported(tmp_path: Path) -> None:
    """On a second start (the files' records kept by the first), nothing heavy loads
    before the window is painted."""
    code = """
        import json, os, sys
        from PySide6.QtCore import QEvent, QObject, QSettings, QTimer
        from PySide6.QtWidgets import QApplication
        from rigspark_gui.ui.main_window import MainWindow

        app = QApplication([])
        later = ["pyqtgraph", "numpy", "gguf", "rigspark_gui.ui.charts", "psutil", "pydantic",
                 "pynvml", "rigspark_gui.hardware.detect"]
        at_import = [m for m in later if m in sys.modules]
        settings = QSettings(os.devnull, QSettings.Format.IniFormat)
        w = MainWindow(settings=settings)  # detects on start, as a user's window does

        class FirstPaint(QObject):
            first = None

            def eventFilter(self, obj, event):
                if obj is w and event.type() == QEvent.Type.Paint and self.first is None:
                    self.first = [m for m in later if m in sys.modules]
                return False

        def done():
            charts = w.paths_tab.fit_chart
            print(json.dumps({"at_import": at_import, "at_first_paint": spy.first,
                              "summary": w.paths_tab.summary.text(),
                              "chart_rows": len(charts.spec.rows) if charts.spec else 0,
                              "charts_loaded": "pyqtgraph" in sys.modules}))
            os._exit(0)

        # detection fills the rig in after the first paint, then the plan and charts
        w.rig_panel.rig_changed.connect(lambda *_: QTimer.singleShot(50, done))
        QTimer.singleShot(60000, done)
        spy = FirstPaint()
        w.installEventFilter(spy)
        w.show()
        app.exec()
        """
    _run(code, home=tmp_path)
    out = _run(code, home=tmp_path)
    assert out["at_import"] == []
    assert out["at_first_paint"] == []
    assert "runs on the" in out["summary"] or "does not fit" in out["summary"]
    assert out["charts_loaded"] and out["chart_rows"] > 0
