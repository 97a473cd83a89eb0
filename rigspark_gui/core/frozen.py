"""The base of the engine's records: immutable and strict about unknown fields."""

from __future__ import annotations

from rigspark_gui.core.record import ConfigDict, Record


class Frozen(Record):
    model_config = ConfigDict(frozen=True, extra="forbid")
