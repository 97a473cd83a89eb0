"""Render resources/rigspark.svg to the 256 px PNG the bundle and icon themes use.

Run: .venv/bin/python packaging/render_icon.py  (make bundle runs it before building).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rigspark_gui.identity import ICON_FILE, ICON_PNG_FILE  # noqa: E402

SIZE_PX = 256


def render(svg: Path, png: Path, size_px: int = SIZE_PX) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    _app = QGuiApplication.instance() or QGuiApplication([])
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"render_icon: cannot read {svg}")
    image = QImage(size_px, size_px, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    if not image.save(str(png)):  # the format follows the .png suffix
        raise SystemExit(f"render_icon: cannot write {png}")


if __name__ == "__main__":
    render(ROOT / "resources" / ICON_FILE, ROOT / "resources" / ICON_PNG_FILE)
    print(f"render_icon: wrote resources/{ICON_PNG_FILE} ({SIZE_PX} px)")
