"""The base of every boundary model: a pydantic model that turns into an engine record.

Each format (rig file, catalog entry, settings, speed model, ...) declares its fields
with pydantic's constraints here, once; the engine's records in `core/` are plain frozen
dataclasses that trust what was validated. `to_record` builds the record (whose own
constructor checks the invariants between fields) and `from_record` reads one back for
writing.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

B = TypeVar("B", bound="Boundary")

__all__ = ["Boundary", "ValidationError", "validated_as"]


class Boundary(BaseModel):
    """A validated file or JSON value that becomes the engine record `record`."""

    model_config = ConfigDict(frozen=True, extra="forbid", from_attributes=True, defer_build=True)
    record: ClassVar[type]

    def to_record(self) -> Any:
        values = {name: _to_record(getattr(self, name)) for name in type(self).model_fields}
        return type(self).record(**values)

    @classmethod
    def from_record(cls: type[B], record: Any) -> B:
        return cls.model_validate(record, from_attributes=True)


def _to_record(value: Any) -> Any:
    if isinstance(value, Boundary):
        return value.to_record()
    if isinstance(value, tuple):
        return tuple(_to_record(v) for v in value)
    if isinstance(value, list):
        return [_to_record(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_record(v) for k, v in value.items()}
    return value


def validated_as(model: type[Boundary]) -> Any:
    """A field type holding the engine record `model.record`, validated by `model`: for
    formats that carry engine records inside (a catalog entry's geometry, a report's rig).
    Its JSON schema is the model's; it writes the record's fields."""
    from pydantic import PlainSerializer, PlainValidator

    from rigspark_gui.formats.jsonable import jsonable

    def validate(value: Any) -> Any:
        if isinstance(value, model.record):
            return value
        return model.model_validate(value).to_record()

    return Annotated[
        model.record,
        PlainValidator(validate, json_schema_input_type=model),
        PlainSerializer(jsonable),
    ]
