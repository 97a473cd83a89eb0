"""The GPU spec database (`data/gpus.json`): schema, loader, name matching and filling.

Drivers report memory but rarely bandwidth or compute, and a what-if rig names a GPU
without any figures; the database supplies those, each marked `spec` with its source.
Matching is deliberately exact after normalisation: a wrong match (an RTX 4090 D read
as an RTX 4090) would silently give a plan the wrong figures, while no match only
leaves them unknown.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from rigspark_gui.catalog.json_file import parse_json
from rigspark_gui.core.errors import CatalogError
from rigspark_gui.core.rig import GIB, Basis, Gpu, Provenance, Vendor

GPU_DATABASE_SCHEMA_VERSION = 1

# Leading words that drivers add or drop freely: NVML says "NVIDIA GeForce RTX 3090",
# people and spec sheets say "RTX 3090" or "GeForce RTX 3090".
_VENDOR_PREFIXES = ("nvidia", "geforce", "amd", "ati", "intel")
_TRADEMARKS = re.compile(r"\((?:r|tm)\)|®|™")
# NVML says "Laptop GPU", spec sites say "Laptop" or "Mobile": one canonical suffix,
# so a laptop part never matches its (faster, larger) desktop namesake.
_LAPTOP_SUFFIX = re.compile(r"\s+(?:laptop gpu|laptop|mobile)$")
_PCI_ID = re.compile(r"[0-9a-f]{4}:[0-9a-f]{4}")
# Boards sold in versions that drivers name alike are separate entries told apart by a
# trailing parenthesis: "NVIDIA GeForce RTX 3080 (12GB)", "Apple M3 Max (30-core GPU)".
_VARIANT_SUFFIX = re.compile(r"\s*\([^()]*\)$")
# Drivers report a little less than the marketed size (H200: 143771 MiB of 141 GiB), and
# sizes that share a name differ by far more (RTX 3080: 10 vs 12 GiB).
_MEMORY_MATCH_TOLERANCE = 0.10


@lru_cache(maxsize=4096)
def normalize_gpu_name(name: str) -> str:
    """The key two names must share to be the same GPU."""
    text = _TRADEMARKS.sub(" ", name.lower())
    text = " ".join(text.split())
    text = _LAPTOP_SUFFIX.sub(" laptop", text)
    words = text.split()
    while len(words) > 1 and words[0] in _VENDOR_PREFIXES:
        words.pop(0)
    return " ".join(words)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSpec:
    """One database entry (validated by `catalog.files.GpuSpecFile`). Every figure comes
    from `source`."""

    name: str
    aliases: tuple[str, ...] = ()
    vendor: Vendor
    memory_bytes: int
    memory_bandwidth_gbps: float
    fp16_tflops: float | None = None
    interconnect: str = ""
    unified: bool = False
    source: str
    memory_options_bytes: tuple[int, ...] = ()
    # "vvvv:dddd" PCI vendor:device ids, to name AMD cards whose sysfs has no product_name.
    pci_ids: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(normalize_gpu_name(n) for n in (self.name, *self.aliases)))


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuDatabase:
    schema_version: int = GPU_DATABASE_SCHEMA_VERSION
    gpus: tuple[GpuSpec, ...] = ()
    # Entries skipped by a lenient load, one message each.
    errors: tuple[str, ...] = ()
    _by_key: dict[str, GpuSpec] = dataclasses.field(init=False, repr=False, compare=False)
    _by_pci: dict[str, GpuSpec] = dataclasses.field(init=False, repr=False, compare=False)
    _variants: dict[str, list[GpuSpec]] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key: dict[str, GpuSpec] = {}
        by_pci: dict[str, GpuSpec] = {}
        variants: dict[str, list[GpuSpec]] = {}
        for spec in self.gpus:
            for key in spec.keys:
                other = by_key.get(key)
                if other is not None and other is not spec:
                    raise CatalogError(
                        f"GPU database: '{spec.name}' and '{other.name}' both answer to '{key}'"
                    )
                by_key[key] = spec
            for pci in spec.pci_ids:
                by_pci.setdefault(pci, spec)
            base = _VARIANT_SUFFIX.sub("", normalize_gpu_name(spec.name))
            variants.setdefault(base, []).append(spec)
        object.__setattr__(self, "_by_key", by_key)
        object.__setattr__(self, "_by_pci", by_pci)
        object.__setattr__(self, "_variants", variants)

    def match(self, name: str, memory_bytes: int | None = None) -> GpuSpec | None:
        """The entry whose name or alias is `name`, ignoring case and vendor prefixes.

        With `memory_bytes` (a driver-reported total), a version of the same board
        whose size fits better wins: NVML calls the 10 and 12 GiB RTX 3080 alike.
        """
        key = normalize_gpu_name(name)
        exact = self._by_key.get(key)
        if memory_bytes is None or memory_bytes <= 0:
            return exact
        versions = self.variants(name)
        if len(versions) < 2:
            return exact
        # Prefer a version whose headline size fits; only then one that lists the size
        # among its options (the 16 GiB Arc A770 entry also lists 8 GiB).
        for sizes in (lambda v: (v.memory_bytes,), lambda v: v.memory_options_bytes):
            scored = [(_size_error(sizes(v), memory_bytes), v) for v in versions]
            error, best = min(scored, key=lambda pair: pair[0])
            if error <= _MEMORY_MATCH_TOLERANCE:
                return best
        return exact

    def variants(self, name: str) -> tuple[GpuSpec, ...]:
        """Every version of the board `name` names (itself included), if it is known."""
        key = normalize_gpu_name(name)
        exact = self._by_key.get(key)
        if exact is None:
            return ()
        base = _VARIANT_SUFFIX.sub("", normalize_gpu_name(exact.name))
        return tuple(self._variants.get(base, [exact]))

    def match_pci(self, vendor_id: int, device_id: int) -> GpuSpec | None:
        return self._by_pci.get(f"{vendor_id:04x}:{device_id:04x}")

    def name_for_pci(self, vendor_id: int, device_id: int) -> str | None:
        spec = self.match_pci(vendor_id, device_id)
        return spec.name if spec else None

    def fill(self, gpu: Gpu) -> Gpu:
        """`gpu` with the figures its driver did not report taken from the database."""
        return self.fill_with_note(gpu)[0]

    def fill_with_note(self, gpu: Gpu) -> tuple[Gpu, str | None]:
        """Like `fill`, plus a note for the user when something had to be assumed."""
        # A unified GPU's total is a working-set limit, not the board's memory size.
        reported = None if gpu.unified else gpu.memory_total_bytes
        spec = self.match(gpu.name, reported)
        provenance = dict(gpu.provenance)
        if spec is None:
            reason = f"'{gpu.name}' is not in the GPU database"
            for field in ("memory_total_bytes", "bandwidth_gbps", "fp16_tflops"):
                if getattr(gpu, field) is None and field not in provenance:
                    provenance[field] = Provenance(basis=Basis.UNKNOWN, source=reason)
            unknown_note = f"{reason}: figures its driver did not report stay unknown"
            vendor = vendor_named(gpu.name)
            if vendor is None or gpu.vendor is not Vendor.OTHER or not _not_measured(gpu, "vendor"):
                return replace(gpu, provenance=provenance), unknown_note
            # "NVIDIA L20" with its memory is an NVIDIA GPU the plan can use, not "other".
            named = Provenance(basis=Basis.USER, source=f"the vendor in its name, '{gpu.name}'")
            inferred: dict[str, Any] = {"vendor": vendor}
            provenance["vendor"] = named
            if vendor is Vendor.APPLE and not gpu.unified and _not_measured(gpu, "unified"):
                inferred["unified"] = True  # every Apple GPU shares the system's memory
                provenance["unified"] = named
            note = f"{unknown_note}; an {_VENDOR_LABEL[vendor]} GPU by its name"
            return replace(gpu, **inferred, provenance=provenance), note

        from_spec = Provenance(basis=Basis.SPEC, source=spec.source)
        updates: dict[str, Any] = {}
        notes: list[str] = []
        versions = self.variants(gpu.name)
        sizes = (spec.memory_bytes, *spec.memory_options_bytes)
        if len(versions) > 1 and (
            reported is None or _size_error(sizes, reported) > _MEMORY_MATCH_TOLERANCE
        ):
            names = ", ".join(f"'{v.name}'" for v in versions)
            notes.append(
                f"{gpu.name} comes in several versions ({names}); figures are from '{spec.name}'"
            )
        if gpu.memory_total_bytes is None:
            memory, variant_note = _memory_variant(spec, gpu.memory_free_bytes)
            if variant_note:
                notes.append(variant_note)
            if gpu.memory_free_bytes is not None and gpu.memory_free_bytes > memory:
                # The board reports more free memory than any listed size: trust the
                # board and leave the total open rather than contradict it.
                provenance["memory_total_bytes"] = Provenance(
                    basis=Basis.UNKNOWN,
                    source=f"{spec.name}: listed sizes are below the reported free memory",
                )
                notes.append(f"{gpu.name} reports more free memory than the GPU database lists")
            else:
                updates["memory_total_bytes"] = memory
                provenance["memory_total_bytes"] = from_spec
        for field, value in (
            ("bandwidth_gbps", spec.memory_bandwidth_gbps),
            ("fp16_tflops", spec.fp16_tflops),
        ):
            if getattr(gpu, field) is not None:
                continue
            if value is None:
                provenance[field] = Provenance(
                    basis=Basis.UNKNOWN, source=f"no sourced figure for {spec.name}"
                )
            else:
                updates[field] = value
                provenance[field] = from_spec
        if gpu.vendor is Vendor.OTHER and _not_measured(gpu, "vendor"):
            updates["vendor"] = spec.vendor
            provenance["vendor"] = from_spec
        if spec.unified and not gpu.unified and _not_measured(gpu, "unified"):
            updates["unified"] = True
            provenance["unified"] = from_spec
        filled = replace(gpu, **updates, provenance=provenance)
        return filled, "; ".join(notes) or None


# Words in a GPU's name that say whose it is (whole words, any case).
_VENDOR_WORDS: dict[str, Vendor] = {
    **dict.fromkeys(("nvidia", "geforce", "rtx", "quadro", "tesla"), Vendor.NVIDIA),
    **dict.fromkeys(("amd", "radeon", "instinct"), Vendor.AMD),
    **dict.fromkeys(("intel", "arc"), Vendor.INTEL),
    "apple": Vendor.APPLE,
}
_VENDOR_LABEL = {
    Vendor.NVIDIA: "NVIDIA",
    Vendor.AMD: "AMD",
    Vendor.INTEL: "Intel",
    Vendor.APPLE: "Apple",
}
_WORD = re.compile(r"[a-z0-9]+")


def vendor_named(name: str) -> Vendor | None:
    """The vendor a GPU's name says it is ("NVIDIA L20", "Radeon Pro W7900"), or None when
    it names none, or names two."""
    found = {_VENDOR_WORDS[w] for w in _WORD.findall(name.lower()) if w in _VENDOR_WORDS}
    return found.pop() if len(found) == 1 else None


def _size_error(sizes: tuple[int, ...], reported: int) -> float:
    """Relative distance from `reported` to the nearest of `sizes` (inf if none)."""
    return min((abs(size - reported) / size for size in sizes), default=float("inf"))


def _not_measured(gpu: Gpu, field: str) -> bool:
    prov = gpu.provenance.get(field)
    return prov is None or prov.basis is Basis.UNKNOWN


def _memory_variant(spec: GpuSpec, free_bytes: int | None) -> tuple[int, str | None]:
    """The memory size to assume for a board sold in several sizes."""
    options = sorted({spec.memory_bytes, *spec.memory_options_bytes})
    if len(options) == 1:
        return options[0], None
    # Smallest size that holds what the driver says is free; else the entry's default.
    if free_bytes is not None:
        fitting = [o for o in options if o >= free_bytes]
        chosen = fitting[0] if fitting else options[-1]
    else:
        chosen = spec.memory_bytes
    sizes = ", ".join(f"{o / GIB:g}" for o in options)
    return chosen, f"{spec.name} comes with {sizes} GiB; assumed {chosen / GIB:g} GiB"


def _entry_label(index: int, entry: Any) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    return f"gpus[{index}] ({name!r})" if isinstance(name, str) else f"gpus[{index}]"


def _validation_message(label: str, exc: Any) -> str:
    first = exc.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "entry"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{label}: field '{field}': {first['msg']}{more}"


def load_gpu_database(path: Path | str, *, lenient: bool = False) -> GpuDatabase:
    """Read and validate a GPU database file (its records kept for the same bytes).

    Strict (the default): the first bad entry raises CatalogError naming it and the
    field. Lenient: bad entries are skipped and listed in `GpuDatabase.errors`, so one
    typo in a user-edited file does not cost every other entry.
    """
    from rigspark_gui.catalog.validated import layout_of, read_bytes, read_validated

    path = Path(path)
    data = read_bytes(path, what="GPU database", error=CatalogError, max_bytes=32 << 20)
    return read_validated(
        data,
        kind="gpus-lenient" if lenient else "gpus",
        layout=layout_of(GpuDatabase, GpuSpec),
        validate=lambda b: parse_gpu_database(parse_json(b, path), path, lenient=lenient),
    )


def parse_gpu_database(raw: object, path: Path, *, lenient: bool = False) -> GpuDatabase:
    """A GPU database from its JSON, validated entry by entry."""
    from pydantic import ValidationError

    from rigspark_gui.catalog.files import GpuSpecFile

    if not isinstance(raw, dict):
        raise CatalogError(f"{path}: expected an object with 'schema_version' and 'gpus'")
    version = raw.get("schema_version")
    if version != GPU_DATABASE_SCHEMA_VERSION:
        raise CatalogError(f"{path}: unsupported schema_version {version!r}")
    entries = raw.get("gpus")
    if not isinstance(entries, list):
        raise CatalogError(f"{path}: field 'gpus' must be a list")

    specs: list[GpuSpec] = []
    errors: list[str] = []
    owners: dict[str, str] = {}
    for index, entry in enumerate(entries):
        label = _entry_label(index, entry)
        try:
            spec = GpuSpecFile.model_validate(entry).to_record()
        except ValidationError as exc:
            message = f"{path}: {_validation_message(label, exc)}"
            if not lenient:
                raise CatalogError(message) from None
            errors.append(message)
            continue
        clash = next((k for k in spec.keys if k in owners), None)
        if clash is not None:
            field = "name" if clash == normalize_gpu_name(spec.name) else "aliases"
            message = f"{path}: {label}: field '{field}': '{clash}' already names '{owners[clash]}'"
            if not lenient:
                raise CatalogError(message)
            errors.append(message)
            continue
        owners.update(dict.fromkeys(spec.keys, spec.name))
        specs.append(spec)
    return GpuDatabase(gpus=tuple(specs), errors=tuple(errors))
