"""The report as Markdown, with the chart PNGs written beside it.

Names from files (a GGUF's model name, a rig's GPU names) may hold Markdown: every text
is escaped so `*_[x](y)` or `<script>` show as typed and never become emphasis, links or
raw HTML. Commands sit in fences longer than any backtick run they contain.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from urllib.parse import quote

from rigspark_gui.catalog.durable import WriteError, write_atomic, write_text_atomic
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

# CommonMark's backslash-escapable punctuation that can start markup anywhere in a line
# ("$" and "~" too, for renderers with math and strikethrough); "(" and ")" are safe
# once "[" and "]" are escaped, since no link can form
_INLINE = re.compile(r"([\\`*{}\[\]<>#|!$~&])")
# "_" only where it could open or close emphasis (not inside a word like q8_0)
_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
# what makes a line a list item, heading or quote when it starts one
_LINE_START = re.compile(r"^(\s*)([-+=](?=\s|$)|\d+(?=[.)](?:\s|$)))")


def md_escape(text: str) -> str:
    text = " ".join(text.split())  # a newline would end a table row or a paragraph
    text = _INLINE.sub(r"\\\1", text)
    text = _UNDERSCORE.sub(r"\\_", text)
    return _LINE_START.sub(_escape_line_start, text)


def _escape_line_start(m: re.Match[str]) -> str:
    indent, mark = m.group(1), m.group(2)
    if mark[0].isdigit():
        return indent + mark + "\\"  # "1. x" -> "1\. x": a digit cannot be escaped
    return indent + "\\" + mark


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _table(t: Table) -> str:
    def row(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(md_escape(c) or " " for c in cells) + " |"

    rule = "|" + "|".join("---:" if i in t.numeric else "---" for i in range(len(t.headers))) + "|"
    return "\n".join([row(t.headers), rule, *(row(r) for r in t.rows)]) + "\n"


def _block(b: Block, images: dict[str, str]) -> str:
    if isinstance(b, Heading):
        return f"{'#' * b.level} {md_escape(b.text)}\n"
    if isinstance(b, Para):
        return f"**{md_escape(b.text)}**\n" if b.strong else f"{md_escape(b.text)}\n"
    if isinstance(b, Table):
        return _table(b)
    if isinstance(b, Chart):
        name = images.get(b.key)
        if name is None:
            return f"*{md_escape(b.alt)}: chart not rendered*\n"
        return f"![{md_escape(b.alt)}](<{quote(name)}>)\n"
    if isinstance(b, Code):
        fence = _fence(b.text)
        notes = "".join(f"\n- {md_escape(n)}" for n in b.notes)
        return f"### {md_escape(b.title)}\n\n{fence}sh\n{b.text}\n{fence}\n{notes}".rstrip() + "\n"
    return "".join(f"- {md_escape(i)}\n" for i in b.items)


def render_markdown(report: PlanReport, images: dict[str, str]) -> str:
    """`images` maps a chart key to the PNG's file name beside the Markdown file."""
    parts = [f"# {md_escape(report.title)}\n", f"*{md_escape(byline(report))}*\n"]
    parts += [_block(b, images) for b in report_blocks(report)]
    return "\n".join(parts)


def chart_names(path: Path) -> dict[str, str]:
    return {key: f"{path.stem}-{key}.png" for key in ("fit", "kv")}


def write_markdown(report: PlanReport, path: Path, charts: dict[str, bytes] | None = None) -> None:
    """report.md plus report-fit.png and report-kv.png beside it; on a failure the files
    this call wrote are removed again, so no half-written report is left."""
    path = Path(path)
    if charts is None:
        from rigspark_gui.report.charts import render_charts

        charts = render_charts(report)
    names = chart_names(path)
    written: list[Path] = []
    try:
        for key, png in charts.items():
            target = path.with_name(names[key])
            write_atomic(target, png)
            written.append(target)
        write_text_atomic(path, render_markdown(report, names))
    except WriteError:
        for p in written:
            with contextlib.suppress(OSError):
                p.unlink()
        raise
