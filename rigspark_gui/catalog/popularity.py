"""What people run: the order of the model picker and the Catalog tab
(`data/popularity.json`), validated by pydantic. Every row says what its place rests on;
a figure nobody published stays `null` (unknown), never guessed."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rigspark_gui.catalog.json_file import parse_json
from rigspark_gui.core.errors import CatalogError, validation_message
from rigspark_gui.resources import data_file

MAX_BYTES = 1 << 20


class PopularityRow(BaseModel):
    """One catalog model's place: the higher in the list, the more it is run."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1, max_length=120)
    ollama_pulls: int | None = Field(default=None, ge=0, description="None: not read")
    hf_downloads_month: int | None = Field(default=None, ge=0, description="None: not read")
    source: str = Field(min_length=1, description="a key of `sources`")


class PopularityFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_version: int = Field(ge=1, le=1)
    as_of: str = Field(min_length=1, description="when the figures were read")
    sources: dict[str, str]
    ranking: tuple[PopularityRow, ...]

    @model_validator(mode="after")
    def _cited_once(self) -> PopularityFile:
        ids = [r.id for r in self.ranking]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"listed twice: {twice}")
        unknown = sorted({r.source for r in self.ranking} - set(self.sources))
        if unknown:
            raise ValueError(f"rows cite {unknown}, not in sources")
        return self


def parse_popularity(raw: bytes, path: Path) -> PopularityFile:
    from pydantic import ValidationError

    try:
        return PopularityFile.model_validate(parse_json(raw, path))
    except ValidationError as err:
        raise CatalogError(f"{path.name}: {validation_message(err)}") from None


def read_popularity(path: Path | None = None) -> PopularityFile:
    from rigspark_gui.catalog.validated import read_bytes

    path = path or data_file("popularity.json")
    raw = read_bytes(path, what="popularity file", error=CatalogError, max_bytes=MAX_BYTES)
    return parse_popularity(raw, path)
