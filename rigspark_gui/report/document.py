"""The report as a QTextDocument: the PDF's content and what the window's viewer shows."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QFont, QFontMetricsF, QImage, QTextDocument

from rigspark_gui.report.charts import ensure_gui_app
from rigspark_gui.report.html import render_html
from rigspark_gui.report.model import PlanReport, ReportError
from rigspark_gui.report.table_fit import TableFit

BODY_POINTS = 9.0  # html.QT_CSS: body { font-size: 9pt }


def _table_fit(doc: QTextDocument, width: float) -> TableFit:
    """Text measured in the document's own font, as its layout will draw it."""
    metrics: dict[tuple[bool, float], QFontMetricsF] = {}

    def measure(text: str, bold: bool, points: float) -> float:
        if (bold, points) not in metrics:
            font = QFont(doc.defaultFont())
            font.setPointSizeF(points)
            font.setBold(bold)
            metrics[bold, points] = QFontMetricsF(font)
        return metrics[bold, points].horizontalAdvance(text)

    return TableFit(measure, width, points=(BODY_POINTS, BODY_POINTS - 1, BODY_POINTS - 2))


def report_document(
    report: PlanReport, charts: dict[str, bytes], *, image_width: int | None = None
) -> QTextDocument:
    """A QTextDocument of the report with the charts as named resources (the PDF's
    content, and what the window's report viewer shows). `image_width`: the width the
    content is laid out for; tables are sized to fit it."""
    ensure_gui_app()
    doc = QTextDocument()
    font = QFont(doc.defaultFont())
    # no ligatures: text copied from the PDF ("config", "offload") reads as typed
    font.setFeature(QFont.Tag("liga"), 0)
    doc.setDefaultFont(font)
    names = {}
    for key, png in charts.items():
        image = QImage.fromData(png, "PNG")  # type: ignore[arg-type]  # stubs say bytes
        if image.isNull():
            raise ReportError(f"the {key} chart is not a readable PNG")
        name = f"chart-{key}.png"
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), image)
        names[key] = name
    fit = _table_fit(doc, image_width) if image_width else None
    doc.setHtml(render_html(report, names, qt_subset=True, image_width=image_width, fit=fit))
    return doc
