"""Engine records as JSON values, without importing pydantic.

The CLI writes every plan through this on its hot path; `formats/outputs.py` holds the
pydantic models that describe the same JSON (for `rigspark-plan schema`), and a test
checks that pydantic reads back what this writes.
"""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

_INF = float("inf")


def jsonable(value: Any) -> Any:
    """Dataclasses as objects (fields in declaration order), enums as their values,
    tuples as lists; NaN and infinity become null, as pydantic writes them."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        auto = out.pop("engine_defaults", None)
        for name in auto or ():
            out[name] = "auto"  # settings left to the engine: what was chosen
        return out
    if isinstance(value, (set, frozenset)):
        return sorted(jsonable(v) for v in value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {(k.value if isinstance(k, Enum) else k): jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and (value != value or value in (_INF, -_INF)):
        return None
    return value


def fields_of(record: Any) -> dict[str, Any]:
    """A record's fields by name, one level deep (nested records stay records)."""
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
