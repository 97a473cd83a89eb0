"""The report as one self-contained HTML file: charts embedded as base64 PNG, printable.

Every string that comes from outside (model and device names, sources, commands) goes
through `html.escape`, so a model named `<script>` from a GGUF header stays text.
The same markup, with a simpler style sheet and named image resources, feeds Qt's
rich-text engine for the PDF and the window's report viewer.
"""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from rigspark_gui.catalog.durable import write_text_atomic
from rigspark_gui.report.model import PlanReport
from rigspark_gui.report.sections import (
    Block,
    Chart,
    Code,
    Heading,
    Para,
    Table,
    byline,
    report_blocks,
)
from rigspark_gui.report.table_fit import Columns, TableFit, fit_columns, keep_together

BROWSER_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif;
       color: #222; max-width: 1200px; margin: 2em auto; padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; margin: 1em 0 0.3em; }
.byline { color: #666; margin-top: 0; }
.summary { font-weight: bold; background: #eef4fb; padding: 0.6em 0.8em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num, th.num { text-align: right; white-space: nowrap; }
img { max-width: 100%; height: auto; border: 1px solid #ddd; }
pre { background: #f6f6f6; border: 1px solid #ddd; padding: 0.6em;
      white-space: pre-wrap; word-break: break-all; font-size: 0.88em; }
ul.notes li { margin: 0.2em 0; }
@media print {
  body { max-width: none; margin: 0; font-size: 10pt; }
  h2 { page-break-after: avoid; }
  table, pre, img { page-break-inside: avoid; }
  .summary { background: none; border: 1px solid #999; }
}
"""

# Qt's rich text supports a subset of CSS 2.1: keep to what it draws.
QT_CSS = """
body { color: #222; font-size: 9pt; }
h1 { font-size: 16pt; }
h2 { font-size: 12pt; margin-top: 14px; }
h3 { font-size: 10pt; margin-top: 8px; }
.byline { color: #666; }
.summary { font-weight: bold; background-color: #eef4fb; }
th { background-color: #f2f2f2; font-weight: bold; }
td, th { padding: 2px; }
pre { background-color: #f6f6f6; font-size: 8pt; white-space: pre-wrap; }
"""


def _cell(tag: str, text: str, numeric: bool, width: int | None = None, style: str = "") -> str:
    cls = ' class="num" align="right"' if numeric else ""
    size = f' width="{width}"' if width else ""
    css = f' style="{style}"' if style else ""
    return f"<{tag}{cls}{size}{css}>{escape(text)}</{tag}>"


def _table(t: Table, fit: TableFit | None = None) -> str:
    """A table; with `fit` (Qt's engine), what belongs together kept on one line and
    the columns sized (the type made smaller if need be) so that no word breaks."""
    headers, rows = t.headers, t.rows
    cols, padding, style = Columns(), 3, ""
    if fit is not None:
        headers = tuple(keep_together(h) for h in headers)
        rows = tuple(tuple(keep_together(c) for c in row) for row in rows)
        cols, padding = fit_columns(headers, rows, fit), fit.padding
        style = f"font-size: {cols.points:g}pt" if cols.points else ""
    widths = cols.widths or (None,) * len(headers)
    head = "".join(_cell("th", h, i in t.numeric, widths[i], style) for i, h in enumerate(headers))
    body = "".join(
        "<tr>"
        + "".join(_cell("td", c, i in t.numeric, style=style) for i, c in enumerate(row))
        + "</tr>\n"
        for row in rows
    )
    ident = f' id="table-{escape(t.name)}"' if t.name else ""
    return (
        f'<table{ident} border="1" cellspacing="0" cellpadding="{padding}">\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody></table>\n"
    )


def _block(
    b: Block, images: dict[str, str], image_width: int | None, fit: TableFit | None = None
) -> str:
    if isinstance(b, Heading):
        return f"<h{b.level}>{escape(b.text)}</h{b.level}>\n"
    if isinstance(b, Para):
        if b.strong:
            return f'<p class="summary">{escape(b.text)}</p>\n'
        return f"<p>{escape(b.text)}</p>\n"
    if isinstance(b, Table):
        return _table(b, fit)
    if isinstance(b, Chart):
        src = images.get(b.key)
        if src is None:
            return f"<p><i>{escape(b.alt)}: chart not rendered</i></p>\n"
        width = f' width="{image_width}"' if image_width else ""
        return f'<p><img src="{escape(src)}" alt="{escape(b.alt)}"{width}></p>\n'
    if isinstance(b, Code):
        notes = "".join(f"<li>{escape(n)}</li>" for n in b.notes)
        return f"<h3>{escape(b.title)}</h3>\n<pre>{escape(b.text)}</pre>\n" + (
            f'<ul class="notes">{notes}</ul>\n' if notes else ""
        )
    items = "".join(f"<li>{escape(i)}</li>\n" for i in b.items)
    return f'<ul class="notes">\n{items}</ul>\n'


def render_html(
    report: PlanReport,
    images: dict[str, str],
    *,
    qt_subset: bool = False,
    image_width: int | None = None,
    fit: TableFit | None = None,
) -> str:
    """The report as HTML. `images` maps a chart key ("fit", "kv") to its img src:
    a data: URI for the file, a resource name for Qt's rich-text engine. `fit`: how
    Qt measures text and the width tables must fit in (Qt's engine only)."""
    css = QT_CSS if qt_subset else BROWSER_CSS
    body = "".join(_block(b, images, image_width, fit) for b in report_blocks(report))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(report.title)}</title>\n<style>{css}</style>\n</head>\n<body>\n"
        f"<h1>{escape(report.title)}</h1>\n"
        f'<p class="byline">{escape(byline(report))}</p>\n'
        f"{body}</body>\n</html>\n"
    )


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def report_html(report: PlanReport, charts: dict[str, bytes] | None = None) -> str:
    """The self-contained file's text; charts are rendered unless given."""
    if charts is None:
        from rigspark_gui.report.charts import render_charts

        charts = render_charts(report)
    return render_html(report, {k: data_uri(v) for k, v in charts.items()})


def write_html(report: PlanReport, path: Path) -> None:
    write_text_atomic(Path(path), report_html(report))
