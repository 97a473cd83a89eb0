"""The catalog's projectors (data/projectors.json, validated by formats/projectors.py):
which catalog models load a vision/audio projector beside them, and attaching one (the
catalog's, or a file or URL given with `--mmproj`) to a model."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from rigspark_gui.catalog.json_file import parse_json
from rigspark_gui.core.errors import CatalogError, validation_message
from rigspark_gui.core.model import ModelSpec, Projector


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectorFile:
    repo: str
    file: str | None
    type: str
    file_bytes: int | None
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogProjector:
    """A catalog model's projector: its figures where known (None: size unknown) and
    the files people download."""

    projector: Projector | None
    files: tuple[ProjectorFile, ...]
    note: str = ""


def load_projectors(path: Path | str) -> dict[str, CatalogProjector]:
    """data/projectors.json by catalog model id; CatalogError (one line) when malformed.
    The records are kept by the file's bytes (`validated`): pydantic only for new bytes."""
    from rigspark_gui.catalog.validated import layout_of, read_bytes, read_validated

    p = Path(path)
    data = read_bytes(p, what="projector list", error=CatalogError, max_bytes=4 << 20)
    return read_validated(
        data,
        kind="projectors",
        layout=layout_of(CatalogProjector, ProjectorFile, Projector),
        validate=lambda b: _parse(parse_json(b, p), p.name),
    )


def _parse(raw: object, name: str) -> dict[str, CatalogProjector]:
    from pydantic import ValidationError

    from rigspark_gui.formats.projectors import ProjectorsFile

    try:
        data = ProjectorsFile.model_validate(raw)
    except ValidationError as err:
        raise CatalogError(f"{name}: {validation_message(err)}") from None
    return {
        model_id: CatalogProjector(
            projector=entry.projector.to_record() if entry.projector is not None else None,
            files=tuple(ProjectorFile(**f.model_dump()) for f in entry.files),
            note=entry.note,
        )
        for model_id, entry in data.projectors.items()
    }


@cache
def catalog_projectors() -> dict[str, CatalogProjector]:
    """The program's own data/projectors.json (read once)."""
    from rigspark_gui.resources import data_file

    return load_projectors(data_file("projectors.json"))


def with_projector(spec: ModelSpec, projector: Projector | None) -> ModelSpec:
    """`spec` loading `projector` beside it (None: as it is)."""
    return spec if projector is None else replace(spec, projector=projector)


def catalog_projector(spec: ModelSpec) -> CatalogProjector | None:
    """The catalog's projector entry for a catalog model, if it has one."""
    return catalog_projectors().get(spec.id)


def with_catalog_projectors(specs: list[ModelSpec]) -> list[ModelSpec]:
    """Catalog models with the projector the catalog lists for them (where its size is
    known): llama-server -hf and Ollama load it beside the model by default."""
    table = catalog_projectors()
    return [with_projector(s, e.projector if (e := table.get(s.id)) else None) for s in specs]
