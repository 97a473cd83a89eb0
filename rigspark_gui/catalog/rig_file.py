"""Rig files (`RIG.json`): load a what-if or saved rig, fill named GPUs from the database."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from rigspark_gui.catalog.json_file import parse_json
from rigspark_gui.core.errors import InvalidRigError, validation_message
from rigspark_gui.core.rig import Rig

MAX_RIG_BYTES = 4 << 20


if TYPE_CHECKING:
    from rigspark_gui.catalog.gpu_database import GpuDatabase

    Database: TypeAlias = GpuDatabase | Callable[[], GpuDatabase | None] | None


def parse_rig(raw: object, database: Database, source: str = "rig") -> Rig:
    """A rig from a file's JSON; named GPUs filled from `database` (or from what a loader
    returns, called only when the rig has GPUs)."""
    return fill_rig(validate_rig(raw, source), database)


def validate_rig(raw: object, source: str = "rig") -> Rig:
    """A rig from a file's JSON, validated, before the GPU database fills it in."""
    if not isinstance(raw, dict):
        raise InvalidRigError(f"{source}: expected a JSON object")
    if "paths" in raw and "model" in raw:
        raise InvalidRigError(
            f"{source} is a plan report, not a rig: open it with File ▸ Open plan…"
        )
    raw = dict(raw)
    gpus = raw.get("gpus", [])
    if isinstance(gpus, list):
        # A GPU's position is its index unless the file says otherwise.
        raw["gpus"] = [
            {"index": i, **g} if isinstance(g, dict) and "index" not in g else g
            for i, g in enumerate(gpus)
        ]
    from rigspark_gui.formats.rig import read_rig

    try:
        rig = read_rig(raw)
    except ValueError as err:  # pydantic's ValidationError is a ValueError
        raise InvalidRigError(f"{source}: {validation_message(err)}") from None
    return rig


def fill_rig(rig: Rig, database: Database) -> Rig:
    """`rig` with the figures of the GPUs it names taken from the GPU database, and each
    GPU's own overhead (backend context, Apple's working set) from the overhead table."""
    from rigspark_gui.catalog.device_overhead import rig_with_overhead

    if callable(database):
        database = database() if rig.gpus else None
    if database is None:
        return rig_with_overhead(rig)
    notes = list(rig.notes)
    filled = []
    for gpu in rig.gpus:
        g, note = database.fill_with_note(gpu)
        filled.append(g)
        if note and note not in notes:
            notes.append(note)
    return rig_with_overhead(replace(rig, gpus=tuple(filled), notes=tuple(notes)))


def load_rig(path: Path, database: Database) -> Rig:
    from rigspark_gui.catalog.validated import layout_of, read_bytes, read_validated
    from rigspark_gui.core.rig import Cpu, Gpu, Host, Network, Provenance

    path = Path(path)
    data = read_bytes(path, what="rig file", error=InvalidRigError, max_bytes=MAX_RIG_BYTES)
    rig = read_validated(
        data,
        kind="rig",
        layout=layout_of(Rig, Gpu, Cpu, Host, Network, Provenance),
        validate=lambda b: validate_rig(parse_json(b, path, error=InvalidRigError), path.name),
    )
    return fill_rig(rig, database)


def save_rig(rig: Rig, path: Path) -> None:
    from rigspark_gui.catalog.durable import write_text_atomic  # writing: not on a plan's path
    from rigspark_gui.formats.rig import rig_json

    write_text_atomic(Path(path), rig_json(rig) + "\n")
