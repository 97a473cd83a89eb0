"""The report as a QTextDocument: the PDF's content and what the window's viewer shows."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QImage, QTextDocument

from rigspark_gui.report.charts import ensure_gui_app
from rigspark_gui.report.html import render_html
from rigspark_gui.report.model import PlanReport, ReportError


def report_document(
    report: PlanReport, charts: dict[str, bytes], *, image_width: int | None = None
) -> QTextDocument:
    """A QTextDocument of the report with the charts as named resources (the PDF's
    content, and what the window's report viewer shows)."""
    ensure_gui_app()
    doc = QTextDocument()
    names = {}
    for key, png in charts.items():
        image = QImage.fromData(png, "PNG")  # type: ignore[arg-type]  # stubs say bytes
        if image.isNull():
            raise ReportError(f"the {key} chart is not a readable PNG")
        name = f"chart-{key}.png"
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), image)
        names[key] = name
    doc.setHtml(render_html(report, names, qt_subset=True, image_width=image_width))
    return doc
