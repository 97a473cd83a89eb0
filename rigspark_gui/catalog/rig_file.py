"""Rig files (`RIG.json`): load a what-if or saved rig, fill named GPUs from the database."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from rigspark_gui.catalog.json_file import read_json
from rigspark_gui.core.errors import InvalidRigError, validation_message
from rigspark_gui.core.rig import Rig

MAX_RIG_BYTES = 4 << 20


if TYPE_CHECKING:
    from rigspark_gui.catalog.gpu_database import GpuDatabase

    Database: TypeAlias = GpuDatabase | Callable[[], GpuDatabase | None] | None


def parse_rig(raw: object, database: Database, source: str = "rig") -> Rig:
    """A rig from a file's JSON; named GPUs filled from `database` (or from what a loader
    returns, called only when the rig has GPUs)."""
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
    if callable(database):
        database = database() if rig.gpus else None
    if database is None:
        return rig
    notes = list(rig.notes)
    filled = []
    for gpu in rig.gpus:
        g, note = database.fill_with_note(gpu)
        filled.append(g)
        if note and note not in notes:
            notes.append(note)
    return replace(rig, gpus=tuple(filled), notes=tuple(notes))


def load_rig(path: Path, database: Database) -> Rig:
    path = Path(path)
    raw = read_json(path, what="rig file", error=InvalidRigError, max_bytes=MAX_RIG_BYTES)
    return parse_rig(raw, database, path.name)


def save_rig(rig: Rig, path: Path) -> None:
    from rigspark_gui.catalog.durable import write_text_atomic  # writing: not on a plan's path
    from rigspark_gui.formats.rig import rig_json

    write_text_atomic(Path(path), rig_json(rig) + "\n")
