"""The catalog package's file formats as pydantic models: model catalog entries
(`data/models.json`), GPU database entries (`data/gpus.json`) and the quantization
quality data (`data/quant_quality.json`). Each turns into the record the rest of the
program uses (`CatalogEntry`, `GpuSpec`, the rows behind the `QualityTable`).

Imported only when such a file is validated (`catalog/validated.py` keeps the records of
files already seen), so a plan from known files never loads pydantic.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rigspark_gui.catalog.gpu_database import GpuSpec
from rigspark_gui.catalog.models import CatalogEntry
from rigspark_gui.core.rig import Vendor
from rigspark_gui.formats.model_spec import GeometryRecord, QuantFileRecord

_PCI_ID = re.compile(r"[0-9a-f]{4}:[0-9a-f]{4}")


class CatalogEntryFile(BaseModel):
    """One cited model of the catalog."""

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
    ollama: tuple[str, ...] = Field(
        default=(), description="Ollama library tags serving this model now (name:size)"
    )
    projector: Literal["", "vision", "audio", "vision+audio", "unknown"] = Field(
        default="", description="the release's vision/audio projector ('' when none)"
    )
    mtp_layers: int | None = Field(
        default=None, ge=0, le=16, description="MTP / next-n layers it carries (None: unstated)"
    )

    @field_validator("ollama")
    @classmethod
    def _tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in value if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*(:[a-z0-9._-]+)?", t)]
        if bad:
            raise ValueError(f"Ollama tags look like 'qwen3:8b', got {bad}")
        return value

    def to_record(self) -> CatalogEntry:
        return CatalogEntry(**{name: getattr(self, name) for name in type(self).model_fields})


class GpuSpecFile(BaseModel):
    """One GPU database entry. Every figure comes from `source`."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    name: str = Field(min_length=1, max_length=200)
    aliases: tuple[str, ...] = ()
    vendor: Vendor
    memory_bytes: int = Field(gt=0)
    memory_bandwidth_gbps: float = Field(gt=0)
    fp16_tflops: float | None = Field(default=None, gt=0)
    interconnect: str = ""
    unified: bool = False
    source: str = Field(min_length=1)
    memory_options_bytes: tuple[int, ...] = ()
    pci_ids: tuple[str, ...] = Field(
        default=(), description="'vvvv:dddd' PCI vendor:device ids (AMD cards without names)"
    )

    @field_validator("vendor", mode="before")
    @classmethod
    def _lower_vendor(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("memory_options_bytes")
    @classmethod
    def _positive_options(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(v <= 0 for v in value):
            raise ValueError("memory options must be positive byte counts")
        return tuple(sorted(set(value)))

    @field_validator("pci_ids")
    @classmethod
    def _pci_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        ids = tuple(v.lower().removeprefix("0x").replace(":0x", ":") for v in value)
        bad = [v for v in ids if not _PCI_ID.fullmatch(v)]
        if bad:
            raise ValueError(f"PCI ids must look like '1002:744c', got {bad}")
        return ids

    def to_record(self) -> GpuSpec:
        return GpuSpec(**{name: getattr(self, name) for name in type(self).model_fields})


class GpuDatabaseFile(BaseModel):
    """The whole GPU database file (for its schema; entries are validated one by one so
    a lenient load keeps the good ones)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    schema_version: Literal[1] = 1
    notes: tuple[str, ...] = ()
    gpus: tuple[GpuSpecFile, ...] = ()


class QualityRow(BaseModel):
    """A quantization's measured quality on one model (llama.cpp's KLD scoreboards)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    model: str = Field(min_length=1)
    quant: str = Field(min_length=1)
    imatrix: bool
    imatrix_data: str | None = None
    size_gib: float | None = Field(default=None, gt=0)
    ppl: float | None = Field(default=None, gt=0)
    ppl_delta: float | None = None
    ppl_delta_pct: float | None = None
    kld: float | None = Field(default=None, ge=0, description="None: only ΔPPL published")
    mean_dp_pct: float | None = None
    rms_dp_pct: float | None = None
    same_top_pct: float | None = Field(default=None, ge=0, le=100)
    source: str = Field(min_length=1)


class KvQualityRow(BaseModel):
    """A KV cache precision pair's measured quality cost."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    model: str = Field(min_length=1)
    kv_k: str
    kv_v: str
    kld: float = Field(ge=0)
    source: str = Field(min_length=1)


class QualityFile(BaseModel):
    """`data/quant_quality.json`: measured quality with its sources."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    schema_version: Literal[1]
    measure: str = ""
    sources: dict[str, str]
    rows: tuple[QualityRow, ...]
    scaling: tuple[QualityRow, ...] = ()
    kv_rows: tuple[KvQualityRow, ...] = ()

    @model_validator(mode="after")
    def _cited(self) -> QualityFile:
        if any(r.kld is None for r in self.rows):
            raise ValueError("every row of a quality scoreboard needs its kld")
        known = set(self.sources)
        for row in (*self.rows, *self.scaling, *self.kv_rows):
            if row.source not in known:
                raise ValueError(f"a row of {row.model} cites {row.source!r}, not in sources")
        return self


class HfConfigFile(BaseModel):
    """The envelope of a Hugging Face `config.json`: what every model's has. The
    architecture's own fields (widths, heads, experts, windows...) are read per family by
    `hf_import`, and the geometry they give is validated by `formats.model_spec`."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    model_type: str = Field(min_length=1, max_length=200)
    architectures: list[str] | None = None
    name_or_path: str | None = Field(default=None, alias="_name_or_path")
    torch_dtype: str | None = None
    quantization_config: dict[str, Any] | None = None
    text_config: dict[str, Any] | None = None


class SafetensorsIndexMetadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    total_size: int = Field(ge=0, lt=1 << 50, description="bytes of every shard's tensors")


class SafetensorsIndex(BaseModel):
    """`model.safetensors.index.json`: which shard holds each tensor, and their bytes."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    metadata: SafetensorsIndexMetadata
    weight_map: dict[str, str] = Field(default_factory=dict)


class SafetensorsTensor(BaseModel):
    """One tensor of a safetensors header: its dtype, shape and byte range."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    dtype: str = ""
    shape: tuple[int, ...] = ()
    data_offsets: tuple[int, int]

    @field_validator("data_offsets")
    @classmethod
    def _a_range(cls, value: tuple[int, int]) -> tuple[int, int]:
        start, end = value
        if not 0 <= start <= end < 1 << 50:
            raise ValueError("not a byte range")
        return value
