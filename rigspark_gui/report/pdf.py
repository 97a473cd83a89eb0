"""The report as a paginated PDF through Qt's own QPdfWriter and QTextDocument.

No browser: the report's HTML (Qt's rich-text subset) is laid out by QTextDocument,
which breaks it into A4 pages, with the charts as image resources. The PDF is written
to memory first and then to disk atomically, so a failure leaves no partial file.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMarginsF, QSizeF
from PySide6.QtGui import QPageLayout, QPageSize, QPdfWriter, QTextDocument

from rigspark_gui.catalog.durable import write_atomic
from rigspark_gui.report.charts import ensure_gui_app, render_charts
from rigspark_gui.report.document import report_document
from rigspark_gui.report.model import PlanReport, ReportError

RESOLUTION_DPI = 96  # one layout pixel = one screen pixel, so chart widths read naturally
MARGIN_MM = 14.0


def _page_layout() -> QPageLayout:
    return QPageLayout(
        QPageSize(QPageSize.PageSizeId.A4),
        QPageLayout.Orientation.Portrait,
        QMarginsF(MARGIN_MM, MARGIN_MM, MARGIN_MM, MARGIN_MM),
        QPageLayout.Unit.Millimeter,
    )


def pdf_document(report: PlanReport, charts: dict[str, bytes]) -> QTextDocument:
    """The report laid out on the PDF's pages (A4, its tables sized to the page)."""
    ensure_gui_app()
    page = _page_layout().paintRectPixels(RESOLUTION_DPI)
    doc = report_document(report, charts, image_width=page.width() - 8)
    doc.setPageSize(QSizeF(page.width(), page.height()))
    return doc


def report_pdf(report: PlanReport, charts: dict[str, bytes] | None = None) -> bytes:
    """The PDF's bytes."""
    ensure_gui_app()
    if charts is None:
        charts = render_charts(report)
    data = QByteArray()
    buf = QBuffer(data)
    if not buf.open(QIODevice.OpenModeFlag.WriteOnly):
        raise ReportError("could not open a buffer for the PDF")
    writer = QPdfWriter(buf)
    writer.setResolution(RESOLUTION_DPI)
    writer.setTitle(report.title)
    writer.setCreator(f"{report.app_name} {report.app_version}")
    writer.setPageLayout(_page_layout())
    doc = pdf_document(report, charts)
    doc.print_(writer)
    del writer  # finishes the file into the buffer
    buf.close()
    pdf = bytes(data.data())
    if not pdf.startswith(b"%PDF") or b"%%EOF" not in pdf[-64:]:
        raise ReportError("Qt's PDF writer produced no complete document")
    return pdf


def write_pdf(report: PlanReport, path: Path) -> None:
    write_atomic(Path(path), report_pdf(report))
