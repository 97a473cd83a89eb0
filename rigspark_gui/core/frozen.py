"""The base of the engine's records: immutable, strict about unknown fields, and
validators built on first use (start-up pays only for the records it uses)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
