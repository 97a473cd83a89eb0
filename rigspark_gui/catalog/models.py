"""The curated model catalog, `data/models.json`: a cited entry per model.

A bad entry never stops the rest from loading: `load_catalog` returns the good models
and one `CatalogError` per bad entry, naming the entry's id and the field at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rigspark_gui.catalog.json_file import read_json
from rigspark_gui.catalog.quality import quality_of, synthesized_quants
from rigspark_gui.catalog.resolve import Resolved
from rigspark_gui.core.errors import CatalogError, validation_message
from rigspark_gui.core.model_spec import Checkpoint, ModelSpec
from rigspark_gui.formats.model_spec import GeometryRecord, QuantFileRecord
from rigspark_gui.resources import data_file

CATALOG_SCHEMA_VERSION = 1
MAX_CATALOG_BYTES = 32 << 20
# Best first: the planner picks the first that fits.
STANDARD_QUANTS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")


# Models released quantized: a serving engine loads that checkpoint (FP8 for DeepSeek V3
# and Kimi K2, MXFP4 experts for gpt-oss); 16-bit releases leave the format to Auto.
NATIVE_CHECKPOINTS = {
    "fp8": Checkpoint(format="FP8", source="the model's release (native_dtype fp8)"),
    "mxfp4": Checkpoint(format="MXFP4", source="the model's release (native_dtype mxfp4)"),
}


class CatalogEntry(BaseModel):
    """One entry of `data/models.json` (the file format; `to_spec` gives the engine's)."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=120)
    name: str = Field(min_length=1, max_length=200)
    family: str = Field(min_length=1, max_length=100)
    license: str = ""
    hf_repo: str = ""
    source: str = Field(min_length=1, description="the model's config.json: repo and path")
    verified_from: str = ""
    params_b: float | None = Field(default=None, gt=0)
    native_dtype: str = "bfloat16"
    geometry: GeometryRecord
    published: dict[str, QuantFileRecord] = Field(default_factory=dict)

    def quants(self) -> tuple[str, ...]:
        return self._quant_list()[0]

    def _quant_list(self) -> tuple[tuple[str, ...], dict[str, str]]:
        full = "F16" if self.native_dtype == "float16" else "BF16"
        if self.native_dtype == "mxfp4":
            return ("MXFP4",), {}  # released quantized: other mixes re-quantize, not improve
        return synthesized_quants(full)

    def to_spec(self) -> ModelSpec:
        quants, dominated = self._quant_list()
        published = {q: f for q, f in self.published.items() if q in quants}
        return ModelSpec(
            id=self.id,
            name=self.name,
            family=self.family,
            geometry=self.geometry,
            quants=quants,
            dominated=dominated,
            quality=quality_of(quants),
            published=published,
            source=self.source,
            hf_repo=self.hf_repo,
            checkpoint=NATIVE_CHECKPOINTS.get(self.native_dtype),
        )


@dataclass(slots=True)
class Catalog:
    entries: tuple[CatalogEntry, ...]
    errors: tuple[str, ...] = ()
    _specs: tuple[ModelSpec, ...] | None = field(default=None, repr=False, compare=False)

    def specs(self) -> tuple[ModelSpec, ...]:
        """Every entry as a plannable model (built once: parsing already made them)."""
        if self._specs is None:
            self._specs = tuple(e.to_spec() for e in self.entries)
        return self._specs

    def find(self, model_id: str) -> CatalogEntry:
        for e in self.entries:
            if e.id == model_id:
                return e
        raise _unknown(model_id, [e.id for e in self.entries])


def _unknown(model_id: str, ids: list[str]) -> CatalogError:
    close = [i for i in ids if model_id.lower() in i][:5]
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return CatalogError(f"unknown model {model_id!r}{hint}; `rigspark-plan models` lists them")


def parse_catalog(raw: object, source: str = "models.json") -> Catalog:
    if not isinstance(raw, dict) or not isinstance(raw.get("models"), list):
        raise CatalogError(f"{source}: expected an object with a 'models' list")
    if raw.get("schema_version") != CATALOG_SCHEMA_VERSION:
        raise CatalogError(f"{source}: unsupported schema_version {raw.get('schema_version')!r}")
    entries: list[CatalogEntry] = []
    specs: list[ModelSpec] = []
    errors: list[str] = []
    seen: set[str] = set()
    for i, item in enumerate(raw["models"]):
        ident = item.get("id", f"#{i}") if isinstance(item, dict) else f"#{i}"
        try:
            entry = CatalogEntry.model_validate(item)
            spec = entry.to_spec()
        except (ValidationError, ValueError) as err:
            errors.append(f"catalog entry {ident!s}: {validation_message(err)}")
            continue
        if entry.id in seen:
            errors.append(f"catalog entry {entry.id}: id: duplicate")
            continue
        seen.add(entry.id)
        entries.append(entry)
        specs.append(spec)
    catalog = Catalog(entries=tuple(entries), errors=tuple(errors))
    catalog._specs = tuple(specs)
    return catalog


def _read(path: Path | None) -> tuple[object, str]:
    path = path or data_file("models.json")
    raw = read_json(path, what="model catalog", error=CatalogError, max_bytes=MAX_CATALOG_BYTES)
    return raw, path.name


def load_catalog(path: Path | None = None) -> Catalog:
    raw, name = _read(path)
    return parse_catalog(raw, name)


def load_entry(model_id: str, path: Path | None = None) -> CatalogEntry:
    """One catalog entry, validating only it (the CLI plans one model; checking all of
    them would cost more than the plan). A bad entry raises its CatalogError message."""
    raw, name = _read(path)
    ids: list[str] = []
    if isinstance(raw, dict) and isinstance(raw.get("models"), list):
        items: list[dict[str, object]] = [i for i in raw["models"] if isinstance(i, dict)]
        ids = [str(i.get("id")) for i in items]
        raw = {**raw, "models": [i for i in items if i.get("id") == model_id]}
    catalog = parse_catalog(raw, name)
    if catalog.entries:
        return catalog.entries[0]
    if catalog.errors:
        raise CatalogError(catalog.errors[0])
    raise _unknown(model_id, ids)


def resolve_model(text: str, path: Path | None = None) -> Resolved:
    """The catalog model any name the user typed means (see `catalog.resolve`): an exact
    id validates only its entry; any other name reads the whole catalog."""
    from rigspark_gui.catalog.resolve import resolve

    raw, _name = _read(path)
    items = raw.get("models") if isinstance(raw, dict) else None
    if isinstance(items, list) and any(isinstance(i, dict) and i.get("id") == text for i in items):
        return Resolved(load_entry(text, path).to_spec(), None, "catalog id")
    return resolve(load_catalog(path).specs(), text)
