"""The program's device overhead table (data/device_overhead.json, validated by
formats/device_overhead.py), read once and kept by its bytes like the other data files,
and applied to rigs that name GPUs (rig files, what-if GPUs from the database)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from rigspark_gui.core.device_overhead import (
    ContextFigure,
    DeviceOverheadTable,
    WorkingSetFigure,
    WorkingSetRule,
    with_device_overhead,
)
from rigspark_gui.core.errors import CatalogError, validation_message
from rigspark_gui.core.rig import Rig

MAX_BYTES = 1 << 20


def load_device_overhead(path: Path | str) -> DeviceOverheadTable:
    """`path` validated; CatalogError (one line) when it cannot be used."""
    from rigspark_gui.catalog.json_file import parse_json
    from rigspark_gui.catalog.validated import layout_of, read_bytes, read_validated

    p = Path(path)
    data = read_bytes(p, what="device overhead table", error=CatalogError, max_bytes=MAX_BYTES)

    def validate(b: bytes) -> DeviceOverheadTable:
        from rigspark_gui.formats.device_overhead import read_device_overhead

        try:
            return read_device_overhead(parse_json(b, p))
        except ValueError as err:  # pydantic's ValidationError is a ValueError
            raise CatalogError(f"{p.name}: {validation_message(err)}") from None

    table: DeviceOverheadTable = read_validated(
        data,
        kind="device-overhead",
        layout=layout_of(DeviceOverheadTable, ContextFigure, WorkingSetRule, WorkingSetFigure),
        validate=validate,
    )
    return table


@cache
def shipped_device_overhead() -> DeviceOverheadTable:
    """The program's own table."""
    from rigspark_gui.resources import data_file

    return load_device_overhead(data_file("device_overhead.json"))


def rig_with_overhead(rig: Rig) -> Rig:
    """`rig` with each GPU's backend overhead and Apple working set from the shipped
    table; a rig without GPUs is returned without reading it."""
    if not rig.gpus:
        return rig
    return with_device_overhead(rig, shipped_device_overhead())
