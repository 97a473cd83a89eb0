"""The JSON report file (File ▸ Export plan report…, `rigspark-plan export --format json`)
as a pydantic model: what the window's Open plan… reads back.

The rig, the settings and the model's geometry go through the same boundary models as
rig files, remembered settings and the catalog (ranges checked); the engine's figures
(paths, placement, loads, charts) are checked field by field against their records.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rigspark_gui.core.chart_spec import FitChart, KvChart
from rigspark_gui.core.fit import FitOutcome
from rigspark_gui.core.launch import ClusterLaunch, LaunchCommand
from rigspark_gui.core.placement import DeviceLoad, Placement
from rigspark_gui.core.plan import KvComparisonRow, PathName, PathPlan, Resolved, Suggestion
from rigspark_gui.core.serving import ServingPlan
from rigspark_gui.formats.base import Boundary
from rigspark_gui.formats.jsonable import jsonable
from rigspark_gui.formats.model_spec import Geometry
from rigspark_gui.formats.rig import Rig
from rigspark_gui.formats.settings import PlanSettings
from rigspark_gui.identity import APP_NAME, APP_VERSION
from rigspark_gui.report import model as report_model
from rigspark_gui.report.model import REPORT_SCHEMA_VERSION, Assumption, ReportDevice


class ReportModel(Boundary):
    record: ClassVar[type] = report_model.ReportModel
    id: str
    name: str
    family: str
    source: str
    imported: bool
    geometry: Geometry
    quant: str = Field(description="the recommended (or nearest) path's quantization")
    file_bytes: int = Field(ge=0)
    file_bytes_basis: str = Field(description="published (with source) or estimated")
    n_params: int = Field(ge=0)
    n_active_params: int = Field(ge=0)


class PlanReport(Boundary):
    """Everything a shared plan shows."""

    record: ClassVar[type] = report_model.PlanReport
    schema_version: int = REPORT_SCHEMA_VERSION
    title: str
    created_at: str = Field(description="ISO 8601, given by the caller")
    app_name: str = APP_NAME
    app_version: str = APP_VERSION
    rig: Rig
    rig_edited: bool
    devices: tuple[ReportDevice, ...]
    model: ReportModel
    settings: PlanSettings
    paths: tuple[PathPlan, ...]
    recommended: PathName | None
    placement_path: PathName = Field(description="whose placement is shown (nearest if none fit)")
    placement_edited: bool = Field(
        default=False, description="the placement was edited by hand in the Layers tab"
    )
    placement: Placement | None
    device_loads: tuple[DeviceLoad, ...]
    kv_pairs: str = Field(description="common or all")
    kv_comparison: tuple[KvComparisonRow, ...]
    launch_commands: tuple[LaunchCommand, ...]
    fit_chart: FitChart
    kv_chart: KvChart
    notes: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    suggestions: tuple[Suggestion, ...] = Field(
        default=(), description="the smallest changes that buy a better quantization or path"
    )
    serving: ServingPlan | None = Field(
        default=None, description="vLLM/SGLang: the engine's own start-up figures"
    )
    launch: ClusterLaunch | None = Field(
        default=None, description="a script per host, in start order (serving, multi-host)"
    )
    resolved: Resolved | None = Field(
        default=None, description="what each setting left to the engine became"
    )
    fit: FitOutcome | None = Field(
        default=None, description="llama.cpp's --fit for the shown quantization"
    )
    fit_summary: str = Field(
        default="", description="llama.cpp alone against this plan, in one sentence"
    )


def read_report(raw: object) -> report_model.PlanReport:
    """The report record from a report file's JSON (raises pydantic's ValidationError, or
    ValueError when fields disagree)."""
    record: report_model.PlanReport = PlanReport.model_validate(raw).to_record()
    return record


def report_file_json(report: report_model.PlanReport) -> str:
    """A report as its file, checked by the model that reads it back."""
    return PlanReport.model_validate(jsonable(report)).model_dump_json(indent=2)
