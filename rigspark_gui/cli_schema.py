"""`rigspark-plan schema NAME`: the JSON Schema of each file RigSpark reads or writes and of
each command's JSON output (docs/formats.md says which is which).

The names are known without importing pydantic or the formats (the parser lists them on
every run); a format's module is imported, and its schema built, only when it is asked
for. Files are described as they are read (validation: what a file may say, defaults
optional); command outputs as they are written (serialization: every key the CLI writes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True, slots=True)
class Schema:
    """One format: what it is, and how to get its pydantic model (or a type pydantic
    validates) without importing it before it is needed."""

    about: str
    load: Callable[[], Any]
    mode: Literal["validation", "serialization"]

    def __call__(self) -> dict[str, Any]:
        from pydantic import BaseModel, TypeAdapter

        target = self.load()
        if isinstance(target, type) and issubclass(target, BaseModel):
            schema = target.model_json_schema(mode=self.mode)
        else:  # an engine record (a dataclass)
            schema = TypeAdapter(target).json_schema(mode=self.mode)
        return {"$schema": JSON_SCHEMA_DIALECT, **schema}


SCHEMAS: dict[str, Schema] = {}


def _file(name: str, about: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    return _register(name, about, "validation")


def _output(name: str, about: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    return _register(name, about, "serialization")


def _register(
    name: str, about: str, mode: Literal["validation", "serialization"]
) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    def add(load: Callable[[], Any]) -> Callable[[], Any]:
        SCHEMAS[name] = Schema(about, load, mode)
        return load

    return add


# ---------------------------------------------------------------- files


@_file("rig", "a rig file: CPU, RAM, GPUs and a cluster's hosts (--rig, File > Open rig)")
def _rig() -> Any:
    from rigspark_gui.formats.rig import Rig

    return Rig


@_file("settings", "the settings of one plan (the `settings` of reports and outputs)")
def _settings() -> Any:
    from rigspark_gui.formats.settings import PlanSettings

    return PlanSettings


@_file("model-spec", "a model's geometry, tensors and quantizations, as JSON")
def _model_spec() -> Any:
    from rigspark_gui.formats.model_spec import ModelSpec

    return ModelSpec


@_file("catalog-entry", "one entry of the model catalog, data/models.json")
def _catalog_entry() -> Any:
    from rigspark_gui.catalog.files import CatalogEntryFile

    return CatalogEntryFile


@_file("gpu-database", "the GPU database, data/gpus.json")
def _gpu_database() -> Any:
    from rigspark_gui.catalog.files import GpuDatabaseFile

    return GpuDatabaseFile


@_file("speed-model", "the speed model's fitted parameters, data/speed_model.json")
def _speed_model() -> Any:
    from rigspark_gui.formats.speed import SpeedModelFile

    return SpeedModelFile


@_file("device-overhead", "each GPU backend's context and Apple's working set, sourced")
def _device_overhead() -> Any:
    from rigspark_gui.formats.device_overhead import DeviceOverheadFile

    return DeviceOverheadFile


@_file("projectors", "catalog models' vision/audio projectors and files, data/projectors.json")
def _projectors() -> Any:
    from rigspark_gui.formats.projectors import ProjectorsFile

    return ProjectorsFile


@_file("quality", "measured quantization quality with its sources, data/quant_quality.json")
def _quality() -> Any:
    from rigspark_gui.catalog.files import QualityFile

    return QualityFile


@_file("llama-bench", "one llama-bench result (-o json, jsonl or csv), read by reconcile")
def _llama_bench() -> Any:
    from rigspark_gui.reconcile.bench_file import LlamaBenchRecord

    return LlamaBenchRecord


@_file("calibration", "this machine's speed calibration (calibrate, View > Calibrate speed)")
def _calibration() -> Any:
    from rigspark_gui.calibrate.calibration_file import LocalCalibration

    return LocalCalibration


@_file("report", "a JSON plan report (export --format json, File > Open plan)")
def _report() -> Any:
    from rigspark_gui.report.report_file import PlanReport

    return PlanReport


# ---------------------------------------------------------------- command outputs


@_output("plan", "plan --json: every path's fit and speed, the placement, suggestions")
def _plan() -> Any:
    from rigspark_gui.formats.outputs import PlanOutput

    return PlanOutput


@_output("fit", "fit --json -- COMMAND: what llama.cpp's --fit does with a command line")
def _fit() -> Any:
    from rigspark_gui.formats.outputs import FitOutput

    return FitOutput


@_output("place", "place --json: per-layer placement and per-device loads")
def _place() -> Any:
    from rigspark_gui.formats.outputs import PlaceOutput

    return PlaceOutput


@_output("rank", "rank --json: every catalog model on the rig, best first")
def _rank() -> Any:
    from rigspark_gui.formats.outputs import RankOutput

    return RankOutput


@_output("models", "models --json: the catalog")
def _models() -> Any:
    from rigspark_gui.cli_outputs import ModelsOutput

    return ModelsOutput


@_output("local-models", "models --local --json: the model files on this computer")
def _local_models() -> Any:
    from rigspark_gui.formats.outputs import LocalModelsOutput

    return LocalModelsOutput


@_output("gpus", "gpus --json: the GPU database")
def _gpus() -> Any:
    from rigspark_gui.cli_outputs import GpusOutput

    return GpusOutput


@_output("reconcile", "reconcile LOG --json: predicted against a llama.cpp log's buffers")
def _reconcile() -> Any:
    from rigspark_gui.cli_outputs import ReconcileOutput

    return ReconcileOutput


@_output("calibrate", "calibrate --json: the calibration kept, and where")
def _calibrate() -> Any:
    from rigspark_gui.cli_outputs import CalibrateOutput

    return CalibrateOutput
