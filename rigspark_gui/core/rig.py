"""The hardware a plan is made for. Every figure carries its basis.

The JSON form of `Rig` is the rig file format (DESIGN §6): a GPU may be given by
name alone and filled from the GPU database by the catalog layer before planning.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

RIG_SCHEMA_VERSION = 1
GIB = 1 << 30
MIB = 1 << 20
# Driver/context footprint a GPU loses before any buffer is allocated. CUDA's context
# alone is ~300-500 MiB on recent drivers; 250 MiB is the documented floor we assume
# when the user gives no reserve (DESIGN §3).
DEFAULT_GPU_RESERVE_BYTES = 250 * MIB
# Memory the operating system and desktop keep for themselves on the CPU side.
DEFAULT_RAM_RESERVE_BYTES = 2 * GIB


class Basis(StrEnum):
    MEASURED = "measured"
    SPEC = "spec"
    USER = "user"
    UNKNOWN = "unknown"


class Vendor(StrEnum):
    NVIDIA = "nvidia"
    AMD = "amd"
    INTEL = "intel"
    APPLE = "apple"
    OTHER = "other"


class Provenance(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    basis: Basis
    source: str = Field(default="", description="where a spec figure comes from, or why unknown")


class DeviceSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    provenance: dict[str, Provenance] = Field(default_factory=dict)

    def basis_of(self, field: str) -> Provenance:
        if field in self.provenance:
            return self.provenance[field]
        value = getattr(self, field, None)
        if value is None:
            return Provenance(basis=Basis.UNKNOWN, source="not reported")
        return Provenance(basis=Basis.USER)


class Gpu(DeviceSpec):
    name: str = Field(min_length=1, max_length=200)
    vendor: Vendor = Vendor.OTHER
    index: int = Field(default=0, ge=0)
    memory_total_bytes: int | None = Field(default=None, ge=0)
    memory_free_bytes: int | None = Field(default=None, ge=0)
    bandwidth_gbps: float | None = Field(default=None, gt=0)
    fp16_tflops: float | None = Field(default=None, gt=0)
    reserve_bytes: int = Field(default=DEFAULT_GPU_RESERVE_BYTES, ge=0)
    unified: bool = Field(default=False, description="shares system memory (Apple, iGPU)")
    uuid: str | None = None
    compute_capability: str | None = None
    pcie_generation: int | None = None
    pcie_width: int | None = None
    display_attached: bool | None = None

    @model_validator(mode="after")
    def _free_within_total(self) -> Gpu:
        if (
            self.memory_total_bytes is not None
            and self.memory_free_bytes is not None
            and self.memory_free_bytes > self.memory_total_bytes
        ):
            raise ValueError("memory_free_bytes exceeds memory_total_bytes")
        return self

    @property
    def memory_bytes(self) -> int:
        """Memory a plan may use before reserve: free if reported, else total."""
        if self.memory_free_bytes is not None:
            return self.memory_free_bytes
        return self.memory_total_bytes or 0

    @property
    def capacity_bytes(self) -> int:
        return max(self.memory_bytes - self.reserve_bytes, 0)


class Cpu(DeviceSpec):
    name: str = "CPU"
    cores: int | None = Field(default=None, gt=0, description="physical cores")
    threads: int | None = Field(default=None, gt=0)
    memory_bandwidth_gbps: float | None = Field(default=None, gt=0)
    flops_gflops: float | None = Field(default=None, gt=0, description="f32 dense, all cores")
    features: tuple[str, ...] = Field(
        default=(),
        description="instruction sets llama.cpp's CPU backend repacks weights for: avx2, avx512",
    )


class Rig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    schema_version: int = RIG_SCHEMA_VERSION
    name: str = Field(default="", max_length=200)
    gpus: tuple[Gpu, ...] = ()
    ram_total_bytes: int = Field(ge=0)
    ram_available_bytes: int | None = Field(default=None, ge=0)
    ram_reserve_bytes: int = Field(default=DEFAULT_RAM_RESERVE_BYTES, ge=0)
    cpu: Cpu = Field(default_factory=Cpu)
    disk_free_bytes: int | None = Field(default=None, ge=0)
    unified_memory: bool = False
    edited: bool = False
    notes: tuple[str, ...] = Field(default=(), description="detection warnings, shown to the user")
    provenance: dict[str, Provenance] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Rig:
        if self.schema_version != RIG_SCHEMA_VERSION:
            raise ValueError(f"unsupported rig schema_version {self.schema_version}")
        if self.ram_available_bytes is not None and self.ram_available_bytes > self.ram_total_bytes:
            raise ValueError("ram_available_bytes exceeds ram_total_bytes")
        return self

    @property
    def ram_usable_bytes(self) -> int:
        """RAM a plan may use: available if known, else total less the OS reserve."""
        if self.ram_available_bytes is not None:
            return self.ram_available_bytes
        return max(self.ram_total_bytes - self.ram_reserve_bytes, 0)

    @property
    def discrete_gpus(self) -> tuple[Gpu, ...]:
        return tuple(
            g
            for g in self.gpus
            if not g.unified
            and g.vendor in (Vendor.NVIDIA, Vendor.AMD, Vendor.INTEL)
            and g.memory_bytes > 0
        )
