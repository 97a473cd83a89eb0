"""One entry point for every format: `write_report(report, path, fmt)`.

The window and the CLI both export through here, so a report from either is the same.
"""

from __future__ import annotations

import contextlib
import os
import threading
from datetime import UTC, datetime
from pathlib import Path

from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import Placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.report.model import PlanReport, ReportError, build_report, write_json

FORMATS = ("html", "pdf", "md", "json")
SUFFIXES = {"html": ".html", "pdf": ".pdf", "md": ".md", "json": ".json"}
FILTERS = {
    "html": "HTML report (*.html *.htm)",
    "pdf": "PDF report (*.pdf)",
    "md": "Markdown report (*.md)",
    "json": "JSON plan (*.json)",
}


def now_iso() -> str:
    """The report's date: the caller's clock, never the engine's."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def format_of(path: Path, default: str = "html") -> str:
    suffix = Path(path).suffix.lower()
    for fmt, s in SUFFIXES.items():
        if suffix == s or (fmt == "html" and suffix == ".htm"):
            return fmt
    return default


_umask_lock = threading.Lock()


def _shareable(paths: list[Path]) -> None:
    """Temporary files are created owner-only (0600) and keep that mode through the
    rename; a report is meant to be shared, so give it the user's usual file mode."""
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    for p in paths:
        with contextlib.suppress(OSError):
            os.chmod(p, 0o666 & ~mask)


def written_files(path: Path, fmt: str) -> list[Path]:
    """Every file an export of `fmt` to `path` writes (Markdown adds its charts)."""
    path = Path(path)
    if fmt == "md":
        from rigspark_gui.report.markdown import chart_names

        return [path, *(path.with_name(n) for n in chart_names(path).values())]
    return [path]


def write_report(report: PlanReport, path: Path, fmt: str) -> None:
    """Write `report` as html, pdf, md (plus chart PNGs beside it) or json. Raises
    WriteError when the file cannot be written; nothing partial is left behind."""
    path = Path(path)
    _write(report, path, fmt)
    _shareable(written_files(path, fmt))


def _write(report: PlanReport, path: Path, fmt: str) -> None:
    if fmt == "json":
        write_json(report, path)
    elif fmt == "html":
        from rigspark_gui.report.html import write_html

        write_html(report, path)
    elif fmt == "md":
        from rigspark_gui.report.markdown import write_markdown

        write_markdown(report, path)
    elif fmt == "pdf":
        from rigspark_gui.report.pdf import write_pdf

        write_pdf(report, path)
    else:
        raise ReportError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")


def export_plan(
    spec: ModelSpec,
    rig: Rig,
    settings: PlanSettings,
    perf: SpeedModel,
    path: Path,
    fmt: str,
    *,
    created_at: str | None = None,
    kv_pairs: str = "common",
    placement: Placement | None = None,
) -> PlanReport:
    """Build the report of a plan and write it; returns the report written. `placement`:
    a hand-edited one to report instead of the plan's."""
    if fmt not in FORMATS:
        raise ReportError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")
    report = build_report(
        spec, rig, settings, perf, created_at=created_at or now_iso(), kv_pairs=kv_pairs,
        placement=placement,
    )  # fmt: skip
    write_report(report, path, fmt)
    return report
