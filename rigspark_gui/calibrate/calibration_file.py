"""This machine's speed calibration file (`speed-calibration.json` in the user cache) as
pydantic models: written by `rigspark-plan calibrate`, read back before each plan (its
records kept for the same bytes, so pydantic loads only when the file changed)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rigspark_gui.calibrate import calibration as records
from rigspark_gui.calibrate.calibration import CALIBRATION_SCHEMA_VERSION
from rigspark_gui.formats.base import Boundary


class DeviceRun(Boundary):
    record: ClassVar[type] = records.DeviceRun
    device: str = Field(description="cpu or gpu:N")
    device_name: str
    quant: str
    measured_tok_s: float = Field(gt=0)
    predicted_tok_s: float | None
    measured_prefill_tok_s: float = Field(gt=0)
    predicted_prefill_tok_s: float | None


class LocalCalibration(Boundary):
    """What one calibration run measured, with its provenance."""

    record: ClassVar[type] = records.LocalCalibration
    schema_version: int = CALIBRATION_SCHEMA_VERSION
    created_at: str
    llama_cpp: str
    runner: str
    runs: tuple[DeviceRun, ...]


def read_calibration(raw: object) -> records.LocalCalibration:
    """The calibration record from the file's JSON (pydantic's ValidationError if not)."""
    record: records.LocalCalibration = LocalCalibration.model_validate(raw).to_record()
    return record


def calibration_json(cal: records.LocalCalibration) -> str:
    return LocalCalibration.from_record(cal).model_dump_json(indent=1)
