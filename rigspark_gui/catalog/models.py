"""The curated model catalog, `data/models.json`: a cited entry per model.

A bad entry never stops the rest from loading: `load_catalog` returns the good models
and one `CatalogError` per bad entry, naming the entry's id and the field at fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from rigspark_gui.catalog.json_file import parse_json
from rigspark_gui.catalog.quality import quality_file as QUALITY_FILE
from rigspark_gui.catalog.quality import quality_of, synthesized_quants
from rigspark_gui.catalog.resolve import Resolved
from rigspark_gui.core.errors import CatalogError, validation_message
from rigspark_gui.core.model import Checkpoint, Geometry, ModelSpec, QuantFile
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


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogEntry:
    """One cited model of the catalog (validated by `catalog.files.CatalogEntryFile`)."""

    id: str
    name: str
    family: str
    license: str = ""
    hf_repo: str = ""
    # the model's config.json: repo and path
    source: str
    verified_from: str = ""
    params_b: float | None = None
    native_dtype: str = "bfloat16"
    geometry: Geometry
    published: dict[str, QuantFile] = field(default_factory=dict)
    # Ollama library tags that serve this model today (`deepseek-r1:8b`), exact matches
    ollama: tuple[str, ...] = ()
    # what the release carries beside the text model: "vision", "audio", "vision+audio",
    # "" (nothing) or "unknown"; and its MTP / next-n layers (None: not stated)
    projector: str = ""
    mtp_layers: int | None = None

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


def parse_catalog(raw: object, source: str = "models.json", order: tuple[str, ...] = ()) -> Catalog:
    """A catalog from its JSON, validated entry by entry: a bad entry is one error."""
    from pydantic import ValidationError

    from rigspark_gui.catalog.files import CatalogEntryFile

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
            entry = CatalogEntryFile.model_validate(item).to_record()
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
    if order:  # what people run first (data/popularity.json), the rest as listed
        rank = {model_id: i for i, model_id in enumerate(order)}
        pairs = sorted(zip(entries, specs, strict=True), key=lambda p: rank.get(p[0].id, len(rank)))
        entries, specs = [p[0] for p in pairs], [p[1] for p in pairs]
    catalog = Catalog(entries=tuple(entries), errors=tuple(errors))
    catalog._specs = tuple(specs)
    return catalog


def merge_updates(shipped: Catalog, updates: Catalog) -> Catalog:
    """The shipped catalog with the entries `models --update` read that it lacks (a
    shipped entry, cited by hand, is never replaced by one read automatically)."""
    known = {e.id for e in shipped.entries} | {s.hf_repo.lower() for s in shipped.specs()}
    extra = [
        (e, s)
        for e, s in zip(updates.entries, updates.specs(), strict=True)
        if e.id not in known and e.hf_repo.lower() not in known
    ]
    merged = Catalog(
        entries=shipped.entries + tuple(e for e, _ in extra),
        errors=shipped.errors + updates.errors,
    )
    merged._specs = shipped.specs() + tuple(s for _, s in extra)
    return merged


def load_catalog(path: Path | None = None, *, updates: bool = True) -> Catalog:
    """The catalog, validated (its records kept for the same bytes: see `validated`),
    in the order people run its models; the shipped one (no `path`) with the entries
    `models --update` kept in the user cache, unless `updates` is False."""
    from rigspark_gui.catalog.validated import layout_of, read_bytes, read_validated

    shipped = path is None
    path = path or data_file("models.json")
    data = read_bytes(path, what="model catalog", error=CatalogError, max_bytes=MAX_CATALOG_BYTES)
    # a spec's quantization list and quality come from the quality data: kept with it
    quality = read_bytes(
        QUALITY_FILE(), what="quantization quality", error=CatalogError, max_bytes=1 << 20
    )
    order = popularity_order()
    catalog = read_validated(
        data + b"\0" + quality + b"\0" + "\n".join(order).encode(),
        kind="catalog",
        layout=layout_of(Catalog, CatalogEntry, ModelSpec, Geometry, QuantFile, Checkpoint),
        validate=lambda _: parse_catalog(parse_json(data, path), path.name, order),
    )
    if shipped:
        if updates:
            from rigspark_gui.catalog.update import load_updates

            extra = load_updates()
            if extra is not None:
                catalog = merge_updates(catalog, extra)
        register_tags(catalog)
    return catalog


@lru_cache(maxsize=1)
def popularity_order() -> tuple[str, ...]:
    """Catalog ids, most run first (`data/popularity.json`, validated once per content
    by `catalog.popularity`); an unreadable file leaves the catalog's own order."""
    from rigspark_gui.catalog.validated import read_bytes, read_validated

    path = data_file("popularity.json")

    def validate(data: bytes) -> tuple[str, ...]:
        from rigspark_gui.catalog.popularity import parse_popularity

        return tuple(r.id for r in parse_popularity(data, path).ranking)

    try:
        raw = read_bytes(path, what="popularity file", error=CatalogError, max_bytes=1 << 20)
        return read_validated(raw, kind="popularity", layout="ids", validate=validate)
    except CatalogError:
        return ()


def register_tags(catalog: Catalog) -> None:
    """Let the resolver find each entry by the Ollama tags it lists."""
    from rigspark_gui.catalog.resolve import set_catalog_tags

    set_catalog_tags({t.lower(): e.id for e in catalog.entries for t in e.ollama})


def load_entry(model_id: str, path: Path | None = None) -> CatalogEntry:
    """One catalog entry; a bad entry raises its CatalogError message."""
    catalog = load_catalog(path)
    for e in catalog.entries:
        if e.id == model_id:
            return e
    mine = f"catalog entry {model_id}:"
    bad = next((err for err in catalog.errors if err.startswith(mine)), None)
    if bad is not None:
        raise CatalogError(bad)
    raise _unknown(model_id, [e.id for e in catalog.entries])


def resolve_model(text: str, path: Path | None = None) -> Resolved:
    """The catalog model any name the user typed means (see `catalog.resolve`): an exact
    id validates only its entry; any other name reads the whole catalog."""
    from rigspark_gui.catalog.resolve import resolve

    catalog = load_catalog(path)
    for e, spec in zip(catalog.entries, catalog.specs(), strict=True):
        if e.id == text:
            return Resolved(spec, None, "catalog id")
    return resolve(catalog.specs(), text)
