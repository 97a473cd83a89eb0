"""Each format holds the plan's numbers, embeds or writes its charts, and escapes names."""

from __future__ import annotations

import base64
import errno
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from rigspark_gui.catalog import durable
from rigspark_gui.catalog.durable import WriteError
from rigspark_gui.core.units import gib, human_bytes, speed_text
from rigspark_gui.report.charts import (
    FIT_SIZE,
    KV_SIZE,
    render_charts,
    render_fit_chart,
    render_kv_chart,
)
from rigspark_gui.report.export import FORMATS, format_of, write_report, written_files
from rigspark_gui.report.html import report_html
from rigspark_gui.report.markdown import md_escape, render_markdown
from rigspark_gui.report.model import PlanReport, load_report
from rigspark_gui.report.sections import path_label

from .conftest import HOSTILE


class _Tables(HTMLParser):
    """Tables by id as rows of cell texts; image sources; every start tag seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id") or f"table-{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(a.get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> _Tables:
    p = _Tables()
    p.feed(html)
    p.close()
    return p


def image_of(png: bytes) -> QImage:
    image = QImage.fromData(png, "PNG")
    assert not image.isNull()
    return image


def variance(image: QImage) -> float:
    """Grey-level variance over a grid of samples: a blank image has none."""
    values = [
        image.pixelColor(x, y).lightness()
        for x in range(0, image.width(), 7)
        for y in range(0, image.height(), 7)
    ]
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values)


# ---------------------------------------------------------------- charts


def test_charts_have_their_size_and_are_not_blank(qapp, report: PlanReport) -> None:
    charts = render_charts(report)
    for key, size in (("fit", FIT_SIZE), ("kv", KV_SIZE)):
        image = image_of(charts[key])
        assert (image.width(), image.height()) == size
        assert variance(image) > 100, key
        colours = {image.pixel(x, y) for x in range(0, size[0], 5) for y in range(0, size[1], 5)}
        assert len(colours) > 20, key  # bars, lines and text, not one flat fill


def test_chart_size_is_what_was_asked(qapp, report: PlanReport) -> None:
    assert image_of(render_fit_chart(report.fit_chart, 640, 300)).size().toTuple() == (640, 300)
    assert image_of(render_kv_chart(report.kv_chart, 800, 400)).size().toTuple() == (800, 400)


# ---------------------------------------------------------------- HTML


def test_html_tables_hold_the_plans_numbers(qapp, report: PlanReport) -> None:
    doc = parse(report_html(report))
    paths = doc.tables["table-paths"]
    assert paths[0][:6] == ["Path", "Fit", "Quant", "Quality cost", "Required", "Usable"]
    assert len(paths) == 1 + len(report.paths)
    for row, p in zip(paths[1:], report.paths, strict=True):
        assert path_label(p) in row[0]
        assert row[2] == p.quant
        assert p.quality is not None and row[3] == p.quality.label.split(" · ", 1)[1]
        assert row[4] == gib(p.required_bytes)
        assert row[5] == gib(p.usable_bytes)
        assert row[6] == (gib(p.shortfall_bytes) if p.shortfall_bytes else "—")
        assert row[8] == speed_text(
            p.throughput.tok_s, p.throughput.low_tok_s, p.throughput.high_tok_s
        )
    assert paths[2][0].startswith("★ multi-gpu")
    assert paths[1][3].startswith("severe loss")  # one GPU holds it only at 1.75 bits

    placement = doc.tables["table-placement"]
    assert [r[0] for r in placement[1:]] == [d.device for d in report.device_loads]
    for row, d in zip(placement[1:], report.device_loads, strict=True):
        assert row[2:8] == [
            human_bytes(n)
            for n in (
                d.weights_bytes,
                d.kv_bytes,
                d.compute_bytes,
                d.reserve_bytes,
                d.total_bytes,
                d.capacity_bytes,
            )
        ]
        assert row[8] == d.verdict.value

    kv = doc.tables["table-kv"]
    assert len(kv) == 1 + len(report.kv_comparison)
    q8 = next(r for r in kv if r[:2] == ["q8_0", "q8_0"])
    row = next(r for r in report.kv_comparison if r.kv_k.value == r.kv_v.value == "q8_0")
    assert q8[3] == f"{row.bytes_per_token:,}"
    assert q8[4] == gib(row.kv_bytes, 2)
    multi = next(lim for lim in row.limits if lim.path.value == "multi-gpu")
    assert f"{multi.max_context:,}" in q8

    settings = dict(r for r in doc.tables["table-settings"][1:])
    assert settings["Context"] == "32K tokens (32,768)"
    assert settings["KV cache"] == "q8_0"
    rig = doc.tables["table-rig"]
    assert ["gpu:1", "NVIDIA GeForce RTX 3090", "memory total", "24.00 GiB", "spec [1]"] in rig
    assert any("llama-server" in t for t in doc.text)


def test_html_is_self_contained(qapp, report: PlanReport) -> None:
    html = report_html(report)
    doc = parse(html)
    assert len(doc.images) == 2
    for src in doc.images:
        assert src.startswith("data:image/png;base64,")
        image = image_of(base64.b64decode(src.split(",", 1)[1]))
        assert image.width() in (FIT_SIZE[0], KV_SIZE[0])
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", html)
    assert "@media print" in html


# ---------------------------------------------------------------- Markdown


def test_markdown_writes_text_and_charts(qapp, report: PlanReport, tmp_path) -> None:
    path = tmp_path / "plan.md"
    write_report(report, path, "md")
    text = path.read_text()
    for name in ("plan-fit.png", "plan-kv.png"):
        assert f"](<{name}>)" in text
        assert image_of((tmp_path / name).read_bytes()).width() > 0
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    multi = next(r for r in rows if "multi" in r and "GiB" in r)
    rec = next(p for p in report.paths if p.path is report.recommended)
    assert gib(rec.required_bytes) in multi and gib(rec.usable_bytes) in multi
    assert "```sh\nCUDA_DEVICE_ORDER=PCI_BUS_ID llama-server" in text


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("*_[x](y)", r"\*\_\[x\](y)"),
        ("<script>", r"\<script\>"),
        ("$(rm -rf ~)", r"\$(rm -rf \~)"),
        ("37.3 GiB", "37.3 GiB"),
        ("-ngl 81", "-ngl 81"),
        ("q8_0 a|b", r"q8_0 a\|b"),
        ("# title", r"\# title"),
        ("- item\nnext", r"\- item next"),
        ("1. first", r"1\. first"),
    ],
)
def test_markdown_escape(raw: str, escaped: str) -> None:
    assert md_escape(raw) == escaped


# ---------------------------------------------------------------- PDF


def pdf_text(path: Path) -> str:
    exe = shutil.which("pdftotext")
    if exe is None:
        pytest.skip("pdftotext (poppler-utils) is not installed: apt-get install poppler-utils")
    out = subprocess.run([exe, "-layout", str(path), "-"], capture_output=True, check=True)
    return out.stdout.decode("utf-8")


def test_pdf_holds_the_plans_numbers(qapp, report: PlanReport, tmp_path) -> None:
    path = tmp_path / "plan.pdf"
    write_report(report, path, "pdf")
    data = path.read_bytes()
    assert data.startswith(b"%PDF")
    assert len(re.findall(rb"/Type\s*/Page\b", data)) >= 3  # paginated
    assert data.count(b"/Subtype /Image") >= 2  # both charts
    text = pdf_text(path)
    assert report.title.split(" on ")[0] in text
    for p in report.paths:
        assert gib(p.required_bytes) in text
        assert gib(p.usable_bytes) in text
    for d in report.device_loads:
        assert human_bytes(d.total_bytes) in text
    assert "llama-server" in text
    assert "Sources and assumptions" in text


# ---------------------------------------------------------------- markup in names


def test_hostile_names_are_escaped_everywhere(qapp, hostile_report: PlanReport, tmp_path) -> None:
    html = report_html(hostile_report)
    assert "<script>" not in html
    doc = parse(html)
    assert "script" not in doc.tags
    assert HOSTILE in "".join(doc.text)
    assert sum(HOSTILE in cell for t in doc.tables.values() for r in t for cell in r) >= 3

    md = render_markdown(hostile_report, {"fit": "f.png", "kv": "k.png"})
    assert "<script>" not in md
    assert "[x](y)" not in md
    outside_fences = md.split("```")[0]
    assert not re.search(r"(?<!\\)\$\(", outside_fences)  # "$" escaped outside code
    assert md_escape(HOSTILE) in md

    write_report(hostile_report, tmp_path / "h.json", "json")
    loaded = load_report(tmp_path / "h.json")
    assert loaded == hostile_report and loaded.model.name == HOSTILE

    write_report(hostile_report, tmp_path / "h.pdf", "pdf")
    text = " ".join(pdf_text(tmp_path / "h.pdf").split())
    assert "<script>alert(1)</script>" in text  # shown as text, not taken as markup


def test_launch_commands_keep_shell_quoting(qapp, hostile_report: PlanReport) -> None:
    md = render_markdown(hostile_report, {})
    for c in hostile_report.launch_commands:
        if c.supported:
            assert c.text in md  # verbatim inside a fence


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize("fmt", FORMATS)
def test_unwritable_path_raises_and_leaves_nothing(qapp, report, tmp_path, fmt: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for target in (tmp_path / "missing" / f"r.{fmt}", blocker / f"r.{fmt}"):
        with pytest.raises(WriteError, match="cannot write"):
            write_report(report, target, fmt)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_full_disk_raises_and_leaves_nothing(qapp, report, tmp_path, monkeypatch, fmt) -> None:
    calls = {"n": 0}

    def fsync(_fd: int) -> None:
        calls["n"] += 1
        if calls["n"] == (3 if fmt == "md" else 1):  # Markdown: its last file fails
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable.os, "fsync", fsync)
    target = tmp_path / f"r.{fmt}"
    with pytest.raises(WriteError, match="No space left on device"):
        write_report(report, target, fmt)
    assert list(tmp_path.iterdir()) == []


def test_written_files_are_shareable(qapp, report, tmp_path) -> None:
    write_report(report, tmp_path / "r.md", "md")
    for p in written_files(tmp_path / "r.md", "md"):
        assert p.stat().st_mode & 0o044, p  # not owner-only like a bare temporary file


def test_format_of() -> None:
    assert format_of(Path("a.PDF")) == "pdf"
    assert format_of(Path("a.htm")) == "html"
    assert format_of(Path("a.txt"), default="md") == "md"
