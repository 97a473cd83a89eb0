"""data/device_overhead.json: each GPU backend's context, Windows' overflow caution and
Apple's Metal working set, every figure with its source (core/device_overhead.py
chooses among them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from rigspark_gui.core import device_overhead as core
from rigspark_gui.formats.base import Boundary

DEVICE_OVERHEAD_SCHEMA_VERSION: Literal[1] = 1
MAX_FILE_BYTES = 1 << 20
_Source = Field(min_length=1, max_length=2000)


class ContextFigure(Boundary):
    record: ClassVar[type] = core.ContextFigure
    backend: Literal["cuda", "rocm", "vulkan", "metal"]
    gpu: str = Field(default="", max_length=200, description="'' = any GPU of the backend")
    bytes: int | None = Field(ge=0, le=1 << 40, description="None: not measured")
    source: str = _Source


class WorkingSetFigure(Boundary):
    record: ClassVar[type] = core.WorkingSetFigure
    memory_bytes: int = Field(ge=1 << 30, le=1 << 44)
    working_set_bytes: int = Field(ge=1, le=1 << 44)
    source: str = _Source

    @model_validator(mode="after")
    def _within_memory(self) -> WorkingSetFigure:
        if self.working_set_bytes > self.memory_bytes:
            raise ValueError("working_set_bytes exceeds memory_bytes")
        return self


class WorkingSetRule(Boundary):
    record: ClassVar[type] = core.WorkingSetRule
    small_fraction: float = Field(gt=0, le=1)
    large_fraction: float = Field(gt=0, le=1)
    large_above_bytes: int = Field(ge=0, le=1 << 44)
    rule_source: str = _Source
    measured: tuple[WorkingSetFigure, ...] = ()
    wired_limit_source: str = Field(default="", max_length=2000)


class Windows(Boundary):
    # not a record of its own: its fields land on the table
    record: ClassVar[type] = dict
    warning: str = Field(min_length=1, max_length=2000)
    sources: str = _Source


class DeviceOverheadFile(Boundary):
    record: ClassVar[type] = core.DeviceOverheadTable
    schema_version: Literal[1] = DEVICE_OVERHEAD_SCHEMA_VERSION
    source: str = Field(default="", max_length=4000)
    contexts: tuple[ContextFigure, ...] = Field(min_length=1)
    windows: Windows
    apple_working_set: WorkingSetRule

    def to_record(self) -> core.DeviceOverheadTable:
        return core.DeviceOverheadTable(
            contexts=tuple(c.to_record() for c in self.contexts),
            working_set=self.apple_working_set.to_record(),
            windows_warning=self.windows.warning,
            windows_sources=self.windows.sources,
        )


def read_device_overhead(raw: object) -> core.DeviceOverheadTable:
    """The table from the file's JSON (raises pydantic's ValidationError)."""
    table: core.DeviceOverheadTable = DeviceOverheadFile.model_validate(raw).to_record()
    return table


def load_device_overhead_file(path: Path) -> core.DeviceOverheadTable:
    """Read and validate `path` (ValueError or OSError when it cannot be used)."""
    data = Path(path).read_bytes()[: MAX_FILE_BYTES + 1]
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"{Path(path).name}: larger than {MAX_FILE_BYTES >> 20} MiB")
    return read_device_overhead(json.loads(data.decode("utf-8")))
