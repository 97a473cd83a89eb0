"""Rig files (`RIG.json`): load a what-if or saved rig, fill named GPUs from the database."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from rigspark_gui.catalog.durable import write_text_atomic
from rigspark_gui.catalog.gpu_database import GpuDatabase
from rigspark_gui.core.errors import InvalidRigError
from rigspark_gui.core.rig import Rig

MAX_RIG_BYTES = 4 << 20


def _message(err: ValidationError) -> str:
    e = err.errors()[0]
    where = ".".join(str(p) for p in e["loc"]) or "rig"
    msg = str(e["msg"]).removeprefix("Value error, ")
    return f"{where}: {msg}"


def _short(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 160 else text[:157] + "..."


def parse_rig(raw: object, database: GpuDatabase | None, source: str = "rig") -> Rig:
    if not isinstance(raw, dict):
        raise InvalidRigError(f"{source}: expected a JSON object")
    raw = dict(raw)
    gpus = raw.get("gpus", [])
    if isinstance(gpus, list):
        # A GPU's position is its index unless the file says otherwise.
        raw["gpus"] = [
            {"index": i, **g} if isinstance(g, dict) and "index" not in g else g
            for i, g in enumerate(gpus)
        ]
    try:
        rig = Rig.model_validate(raw)
    except ValidationError as err:
        raise InvalidRigError(f"{source}: {_message(err)}") from None
    if database is None:
        return rig
    notes = list(rig.notes)
    filled = []
    for gpu in rig.gpus:
        g, note = database.fill_with_note(gpu)
        filled.append(g)
        if note and note not in notes:
            notes.append(note)
    return rig.model_copy(update={"gpus": tuple(filled), "notes": tuple(notes)})


def load_rig(path: Path, database: GpuDatabase | None) -> Rig:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_RIG_BYTES:
            raise InvalidRigError(f"{path.name}: not a rig file (larger than 4 MiB)")
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise InvalidRigError(f"cannot read rig file {path}: {err.strerror or err}") from None
    except (ValueError, RecursionError) as err:
        # ValueError covers bad JSON, bad UTF-8 and integers past Python's 4300-digit
        # limit; RecursionError covers nesting deeper than the decoder's stack.
        raise InvalidRigError(f"{path.name} is not valid JSON: {_short(err)}") from None
    return parse_rig(raw, database, path.name)


def save_rig(rig: Rig, path: Path) -> None:
    write_text_atomic(Path(path), rig.model_dump_json(indent=2, exclude_defaults=False) + "\n")
