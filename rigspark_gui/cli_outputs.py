"""The JSON of the commands whose items are catalog, calibration or reconcile records:
`models --json`, `gpus --json`, `reconcile --json` and `calibrate --json`, as pydantic
models (for `rigspark-plan schema`). The other commands' outputs are in
`formats/outputs.py`; these sit here, beside the CLI, because `formats` lies below the
packages that hold their items.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from rigspark_gui.calibrate.calibration import DeviceRun
from rigspark_gui.catalog.gpu_database import GpuSpec
from rigspark_gui.catalog.models import CatalogEntry
from rigspark_gui.formats.outputs import CliOutput
from rigspark_gui.formats.settings import PlanSettings
from rigspark_gui.reconcile.log_records import BufferKind
from rigspark_gui.reconcile.reconciliation import FitRow, SpeedRow

__all__ = ["CalibrateOutput", "GpusOutput", "ModelsOutput", "ReconcileOutput", "ReconcileRow"]


class ModelsOutput(CliOutput):
    """`models --json`: the catalog's entries, as in data/models.json."""

    models: tuple[CatalogEntry, ...]


class GpusOutput(CliOutput):
    """`gpus --json`: the GPU database's entries, as in data/gpus.json."""

    gpus: tuple[GpuSpec, ...]


class ReconcileRow(BaseModel):
    """One device's buffers of one kind: RigSpark's prediction against the log's."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    device: str = Field(description="cpu, gpu:N, or the buffer's name for an unknown backend")
    kind: BufferKind
    buffers: tuple[str, ...] = Field(description="llama.cpp's names of the buffers summed")
    predicted_bytes: int | None = Field(description="null: RigSpark does not model it")
    actual_bytes: int | None = Field(description="null: the log shows no such buffer")
    actual_mib: float | None
    difference_bytes: int | None = Field(description="predicted minus actual")
    status: Literal["not modelled", "not in log", "match", "close", "differs"]


class ReconcileOutput(CliOutput):
    """`reconcile LOG --json`: predicted against actual, per device and buffer kind."""

    model: str
    quant: str
    settings: PlanSettings | None = Field(description="the log's settings, as planned")
    ngl: int | None
    layers_per_gpu: tuple[int, ...] | None = Field(
        description="slots each GPU got: the --tensor-split that reproduces it"
    )
    rows: tuple[ReconcileRow, ...]
    speeds: tuple[SpeedRow, ...] = Field(description="llama-bench tests, measured and predicted")
    explanations: tuple[str, ...]
    fit_rows: tuple[FitRow, ...] = Field(
        default=(),
        description="llama.cpp's --fit against RigSpark's, when the log shows a fit and "
        "RigSpark's fit outcome was given",
    )


class CalibrateOutput(CliOutput):
    """`calibrate --json`: where the calibration was kept, then the calibration file's
    fields (`rigspark-plan schema calibration`)."""

    path: str = Field(description="the file it was kept in")
    created_at: str = Field(description="ISO 8601")
    llama_cpp: str = Field(description="the llama.cpp build timed")
    runner: str
    runs: tuple[DeviceRun, ...]
