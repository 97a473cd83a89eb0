"""The PlanReport holds the engine's plan unchanged and loads back from JSON."""

from __future__ import annotations

import json

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.launch import launch_commands
from rigspark_gui.core.plan.paths import PathName
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.identity import APP_VERSION
from rigspark_gui.report.model import (
    REPORT_SCHEMA_VERSION,
    PlanReport,
    ReportError,
    build_report,
    load_report,
    write_json,
)

from .conftest import CREATED_AT, example_rig, example_settings


def test_report_carries_the_engines_plan(report: PlanReport) -> None:
    spec = load_catalog().find("llama-3.3-70b-instruct").to_spec()
    expected = plan(
        spec, example_rig(), example_settings(), load_perf(), kv_pairs="common", ladders=False
    )
    assert report.schema_version == REPORT_SCHEMA_VERSION
    assert report.created_at == CREATED_AT
    assert report.app_version == APP_VERSION
    assert report.paths == expected.paths
    assert report.recommended is PathName.MULTI_GPU
    assert report.kv_comparison == expected.kv_comparison
    assert report.device_loads == expected.device_loads
    assert report.placement == expected.placement
    rec = next(p for p in expected.paths if p.path is expected.recommended)
    assert report.model.quant == rec.quant
    assert expected.placement is not None and rec.quant is not None
    assert report.launch_commands == launch_commands(
        expected.placement, spec, rec.quant, expected.settings, example_rig()
    )
    # the quality cost of the quantization, and what would buy a better one
    assert rec.quality is not None and rec.quality.basis.startswith("measured on Llama 3 8B")
    order = spec.available_quants
    assert report.suggestions and all(
        order.index(i.quant) < order.index(rec.quant) or i.tok_s for i in report.suggestions
    )
    assert [d.device for d in report.devices] == ["cpu", "gpu:0", "gpu:1"]
    bandwidth = next(f for f in report.devices[1].figures if f.label == "bandwidth")
    assert bandwidth.basis == "spec" and "TechPowerUp" in bandwidth.source
    topics = {a.topic for a in report.assumptions}
    assert {"Compute buffer", "Speed basis"} <= topics
    assert any("data/speed_model.json" in t for t in topics)


def test_building_reads_no_clock(report: PlanReport) -> None:
    spec = load_catalog().find("llama-3.3-70b-instruct").to_spec()
    again = build_report(
        spec, example_rig(), example_settings(), load_perf(), created_at=CREATED_AT
    )
    assert again == report


def test_all_kv_pairs(report: PlanReport) -> None:
    spec = load_catalog().find("llama-3.1-8b-instruct").to_spec()
    full = build_report(
        spec, example_rig(), example_settings(), load_perf(), created_at="x", kv_pairs="all"
    )
    assert len(full.kv_comparison) == 81
    with pytest.raises(ReportError, match="kv_pairs"):
        build_report(
            spec, example_rig(), example_settings(), load_perf(), created_at="x", kv_pairs="none"
        )


def test_json_loads_back_equal(report: PlanReport, tmp_path) -> None:
    path = tmp_path / "plan.json"
    write_json(report, path)
    loaded = load_report(path)
    assert loaded == report
    assert json.loads(path.read_text())["schema_version"] == REPORT_SCHEMA_VERSION


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a RigSpark plan report"),
        ('{"schema_version": 99}', "unsupported report schema_version 99"),
        ('{"schema_version": 1, "title": "x"}', "plan.json is not a RigSpark plan report"),
        ('{"schema_version": 1, "paths": "x"}', "plan.json: "),
    ],
)
def test_bad_report_files_are_one_line_errors(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "plan.json"
    path.write_text(text)
    with pytest.raises(ReportError, match=message) as err:
        load_report(path)
    assert "\n" not in str(err.value)


def test_missing_report_file(tmp_path) -> None:
    with pytest.raises(ReportError, match="cannot read"):
        load_report(tmp_path / "nope.json")


def test_a_vms_measured_cores_worth_is_in_the_report() -> None:
    from dataclasses import replace

    from rigspark_gui.core.rig import Basis, Provenance
    from rigspark_gui.report.model import rig_devices

    rig = example_rig()
    timed = Provenance(basis=Basis.MEASURED, source="2 threads together")
    vm = replace(rig.cpu, cores=2, features=("hypervisor",), compute_cores=1.0,
                 provenance={**rig.cpu.provenance, "compute_cores": timed})  # fmt: skip
    figures = {f.label: f for f in rig_devices(replace(rig, cpu=vm))[0].figures}
    assert figures["vCPUs"].value == "2"
    worth = figures["cores' worth of compute"]
    assert worth.value == "1" and worth.basis == "measured" and worth.source == timed.source
    bare = {f.label for f in rig_devices(rig)[0].figures}
    assert "cores" in bare and "cores' worth of compute" not in bare
