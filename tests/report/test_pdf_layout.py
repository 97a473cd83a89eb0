"""The PDF as a reader sees it: tables inside the page with every word whole, and a
title and notes that describe the rig reported (a what-if is named as one; detection
notes that no longer apply are left out, the others in plain words)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtGui import QTextCursor, QTextDocument, QTextTable

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.rig import Basis, Provenance, Rig
from rigspark_gui.report.export import write_report
from rigspark_gui.report.html import report_html
from rigspark_gui.report.markdown import render_markdown
from rigspark_gui.report.model import PlanReport, build_report
from rigspark_gui.report.pdf import pdf_document
from rigspark_gui.report.rig_words import report_notes, rig_title
from rigspark_gui.report.table_fit import TableFit, fit_columns, keep_together

from .conftest import CREATED_AT, example_rig, example_settings

NVML_NOTE = "no NVIDIA GPUs (NVML not found)"  # hardware/nvidia.py NVML_NOT_FOUND_NOTE
PATH_HEADERS = ("Path", "Fit", "Quant", "Required", "Usable", "Shortfall", "Reason")


def pdf_text(path: Path) -> str:
    exe = shutil.which("pdftotext")
    if exe is None:
        pytest.skip("pdftotext (poppler-utils) is not installed: apt-get install poppler-utils")
    out = subprocess.run([exe, "-layout", str(path), "-"], capture_output=True, check=True)
    return out.stdout.decode("utf-8")


def _report(model: str, rig: Rig) -> PlanReport:
    spec = load_catalog().find(model).to_spec()
    return build_report(spec, rig, example_settings(), load_perf(), created_at=CREATED_AT)


@pytest.fixture(scope="module")
def too_big() -> PlanReport:
    """Llama 3.1 405B on two RTX 3090s: paths that do not fit, with reasons and shortfalls."""
    return _report("llama-3.1-405b-instruct", example_rig())


@pytest.fixture(scope="module")
def what_if() -> PlanReport:
    """This machine as detected (no NVIDIA driver), edited in the window to two RTX 3090s."""
    rig = replace(example_rig(), name="This machine", edited=True, notes=(NVML_NOTE,))
    return _report("llama-3.3-70b-instruct", rig)


# ---------------------------------------------------------------- tables


def _table_cells(doc: QTextDocument) -> list[tuple[str, list[str]]]:
    """Each table cell's text and the lines Qt broke it into."""
    out = []
    block = doc.begin()
    while block.isValid():
        if QTextCursor(block).currentTable() is not None:
            layout, text = block.layout(), block.text()
            lines = [
                text[layout.lineAt(i).textStart() : layout.lineAt(i).textStart()
                     + layout.lineAt(i).textLength()]
                for i in range(layout.lineCount())
            ]  # fmt: skip
            out.append((text, lines))
        block = block.next()
    return out


@pytest.mark.parametrize("which", ["report", "too_big", "what_if"])
def test_pdf_tables_fit_the_page_and_break_no_word(qapp, request, which: str) -> None:
    report: PlanReport = request.getfixturevalue(which)
    doc = pdf_document(report, {})
    doc.size()  # lays it out
    width = doc.textWidth()
    tables = [f for f in doc.rootFrame().childFrames() if isinstance(f, QTextTable)]
    assert len(tables) >= 6
    for t in tables:
        assert doc.documentLayout().frameBoundingRect(t).width() <= width
    cells = _table_cells(doc)
    assert any(len(lines) > 1 for _, lines in cells)  # some do wrap...
    for text, lines in cells:
        for line in lines[:-1]:  # ...but only at a space
            assert line.endswith(" "), f"{text!r} broken as {lines!r}"


def test_pdf_text_has_the_paths_table_in_whole_words(qapp, too_big: PlanReport, tmp_path) -> None:
    path = tmp_path / "plan.pdf"
    write_report(too_big, path, "pdf")
    text = pdf_text(path)
    header = next(line for line in text.splitlines() if line.split()[:2] == ["Path", "Fit"])
    for word in PATH_HEADERS:
        assert word in header.split()
    words = set(text.split())
    for p in too_big.paths:
        assert p.path.value in words  # "cpu-offload", never "cpu-" / "offloa d"
        if p.quant:
            assert p.quant in words  # "Q4_K_M", never "Q4_K" / "_M"
    assert "cpu-offload" in words and "Shortfall" in words
    assert not re.search(r"\bQuan\s+t\b|\bShortf\s+all\b", text)


def test_table_fit_gives_the_slack_to_long_text() -> None:
    def measure(text: str, bold: bool, points: float) -> float:
        return len(text) * points * (0.7 if bold else 0.6)

    reason = "needs 120.3 GiB more than the 45.1 GiB this path can use at any quantization"
    headers = ("Path", "Quant", "Reason", "Decode")
    rows = [
        tuple(keep_together(c) for c in ("cpu-offload", "Q4_K_M", reason, "9.5 tok/s (5.3–37.9)"))
    ]
    cols = fit_columns(headers, rows, TableFit(measure, 500))
    assert cols.widths is not None and cols.points is None
    # the short columns hold their text on one line; the reason takes the rest
    assert cols.widths[0] >= measure("cpu-offload", False, 9) + 4
    assert cols.widths[3] >= measure("9.5 tok/s (5.3–37.9)", False, 9) + 4
    assert cols.widths[2] == max(cols.widths)
    narrow = fit_columns(headers, rows, TableFit(measure, 230))
    assert narrow.points == 8.0  # smaller type before any word breaks
    assert fit_columns(("A", "B"), [("x", "y")], TableFit(measure, 500)).widths is None


# ---------------------------------------------------------------- title and notes


def test_a_what_if_rig_is_named_as_one_in_every_format(qapp, what_if: PlanReport, tmp_path) -> None:
    assert what_if.title == "Llama 3.3 70B Instruct on a what-if rig: 2× RTX 3090, 64 GiB RAM"
    html = report_html(what_if, charts={})
    markdown = render_markdown(what_if, {})
    path = tmp_path / "plan.pdf"
    write_report(what_if, path, "pdf")
    text = pdf_text(path)
    for shown in (html, markdown, text):
        assert "what-if rig: 2× RTX" in shown
        assert "This machine" not in shown.split("\n", 3)[0]
        # the detected machine had no NVIDIA driver; the rig reported has two NVIDIA GPUs
        assert "NVML" not in shown and "no NVIDIA GPUs" not in shown
    assert "A what-if rig (2× RTX 3090, 64 GiB RAM), edited from This machine" in html


def test_detection_notes_concern_the_rig_reported() -> None:
    cpu_only = Rig(name="This machine", ram_total_bytes=32 << 30, notes=(NVML_NOTE,))
    assert rig_title(cpu_only) == "this machine (CPU only, 32 GiB RAM)"
    (plain,) = report_notes(cpu_only, cpu_only.notes)
    assert plain == "No NVIDIA driver found on this computer, so no NVIDIA GPU is used"
    # the same note beside GPUs (detected AMD cards, or a what-if) is left out
    with_gpus = replace(example_rig(), name="This machine", notes=(NVML_NOTE,))
    assert report_notes(with_gpus, (NVML_NOTE, "planner note")) == ("planner note",)
    # a RAM size detection missed, then given in the what-if
    unknown_ram = "RAM size could not be detected"
    missing = Rig(
        name="This machine",
        ram_total_bytes=0,
        notes=(unknown_ram,),
        provenance={"ram_total_bytes": Provenance(basis=Basis.UNKNOWN, source="not detected")},
    )
    assert report_notes(missing, missing.notes) == (unknown_ram,)
    given = replace(missing, ram_total_bytes=64 << 30, edited=True, provenance={})
    assert report_notes(given, given.notes) == ()
    assert rig_title(example_rig()) == "2x RTX 3090 workstation"  # a rig file's own name
