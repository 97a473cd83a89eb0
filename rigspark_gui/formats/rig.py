"""The rig file: this machine, its GPUs and the other hosts of a cluster."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from rigspark_gui.core import rig as core_rig
from rigspark_gui.core.rig import (
    DEFAULT_GPU_RESERVE_BYTES,
    DEFAULT_RAM_RESERVE_BYTES,
    RIG_SCHEMA_VERSION,
    Basis,
    NetworkPreset,
    Vendor,
)
from rigspark_gui.formats.base import Boundary

_PRINTABLE = r"^[^\x00-\x1f\x7f]*$"


class Provenance(Boundary):
    record: ClassVar[type] = core_rig.Provenance
    basis: Basis
    source: str = Field(default="", description="where a spec figure comes from, or why unknown")


class DeviceSpec(Boundary):
    record: ClassVar[type] = core_rig.DeviceSpec
    provenance: dict[str, Provenance] = Field(default_factory=dict)


class Gpu(DeviceSpec):
    record: ClassVar[type] = core_rig.Gpu
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
    nvlink: bool = Field(default=False, description="joined to its host's peers by NVLink")
    host: str = Field(
        default="",
        max_length=200,
        pattern=_PRINTABLE,
        description="its host; '' = this one",
    )


class Cpu(DeviceSpec):
    record: ClassVar[type] = core_rig.Cpu
    name: str = "CPU"
    cores: int | None = Field(default=None, gt=0, description="physical cores")
    threads: int | None = Field(default=None, gt=0)
    memory_bandwidth_gbps: float | None = Field(default=None, gt=0)
    flops_gflops: float | None = Field(default=None, gt=0, description="f32 dense, all cores")
    features: tuple[str, ...] = Field(
        default=(),
        description="instruction sets llama.cpp's CPU backend repacks weights for: avx2, avx512",
    )


class Network(Boundary):
    record: ClassVar[type] = core_rig.Network
    preset: NetworkPreset | None = NetworkPreset.GBE_10
    bandwidth_gbps: float | None = Field(default=None, gt=0, le=10000, description="Gbit/s")
    latency_us: float | None = Field(default=None, ge=0, le=1e6, description="round trip, µs")


class Host(Boundary):
    record: ClassVar[type] = core_rig.Host
    name: str = Field(min_length=1, max_length=200, pattern=_PRINTABLE)
    address: str = Field(
        default="", max_length=200, pattern=_PRINTABLE, description="host name or IP to reach it"
    )
    ram_total_bytes: int = Field(default=0, ge=0)
    cpu: Cpu = Field(default_factory=Cpu)


class Rig(Boundary):
    record: ClassVar[type] = core_rig.Rig
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
    hosts: tuple[Host, ...] = Field(
        default=(), description="other machines joined over `network` (this one is not listed)"
    )
    network: Network | None = None
    address: str = Field(
        default="",
        max_length=200,
        pattern=_PRINTABLE,
        description="this machine's address as its hosts reach it",
    )

    @model_validator(mode="before")
    @classmethod
    def _hosts_own_gpus(cls, raw: object) -> object:
        """A host may list its GPUs inside it (the natural way to write a rig file): they
        join `gpus`, tagged with the host's name and numbered within it."""
        if not isinstance(raw, dict) or not isinstance(raw.get("hosts"), (list, tuple)):
            return raw
        gpus = list(raw.get("gpus", ()))
        hosts = []
        for h in raw["hosts"]:
            if isinstance(h, dict) and "gpus" in h:
                h = dict(h)
                own = h.pop("gpus")
                for i, g in enumerate(own if isinstance(own, (list, tuple)) else ()):
                    if isinstance(g, dict):
                        g = {"index": i, **g, "host": h.get("name", "")}
                    gpus.append(g)
            hosts.append(h)
        return {**raw, "gpus": gpus, "hosts": hosts}


def read_rig(raw: object) -> core_rig.Rig:
    """The engine's rig from a rig file's JSON (raises pydantic's ValidationError, or
    ValueError when fields disagree)."""
    record: core_rig.Rig = Rig.model_validate(raw).to_record()
    return record


def rig_json(rig: core_rig.Rig) -> str:
    """A rig as its file: every field, two-space indents."""
    return Rig.from_record(rig).model_dump_json(indent=2)
