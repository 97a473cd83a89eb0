"""The hardware a plan is made for. Every figure carries its basis.

The JSON form of `Rig` is the rig file format (DESIGN §6): a GPU may be given by
name alone and filled from the GPU database by the catalog layer before planning.
"""

from __future__ import annotations

from enum import StrEnum

from rigspark_gui.core.record import ConfigDict, Field, Record, model_validator

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


class Provenance(Record):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    basis: Basis
    source: str = Field(default="", description="where a spec figure comes from, or why unknown")


class DeviceSpec(Record):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    provenance: dict[str, Provenance] = Field(default_factory=dict)

    def basis_of(self, field: str) -> Provenance:
        if field in self.provenance:
            return self.provenance[field]
        value = getattr(self, field, None)
        if value is None:
            return Provenance(basis=Basis.UNKNOWN, source="not reported")
        return Provenance(basis=Basis.USER)


# Host names and addresses go into shell scripts (as quoted words and in comments): no
# control characters, so a rig file cannot start a line of its own there.
_PRINTABLE = r"^[^\x00-\x1f\x7f]*$"


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
    nvlink: bool = Field(default=False, description="joined to its host's peers by NVLink")
    host: str = Field(
        default="",
        max_length=200,
        pattern=_PRINTABLE,
        description="its host; '' = this one",
    )

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


class NetworkPreset(StrEnum):
    """Links between hosts, with the throughput and round trip a TCP stream really gets
    (docs/validation-serving.md cites each figure)."""

    GBE_1 = "1gbe"
    GBE_10 = "10gbe"
    GBE_25 = "25gbe"
    GBE_100 = "100gbe"
    INFINIBAND = "infiniband"
    THUNDERBOLT = "thunderbolt"

    @property
    def label(self) -> str:
        return _NETWORK[self][0]


# preset -> (label, usable Gbit/s, round trip in microseconds)
_NETWORK: dict[NetworkPreset, tuple[str, float, float]] = {
    NetworkPreset.GBE_1: ("1 GbE", 0.94, 200.0),
    NetworkPreset.GBE_10: ("10 GbE", 9.4, 60.0),
    NetworkPreset.GBE_25: ("25 GbE", 23.5, 40.0),
    NetworkPreset.GBE_100: ("100 GbE", 90.0, 25.0),
    NetworkPreset.INFINIBAND: ("InfiniBand NDR", 380.0, 5.0),
    NetworkPreset.THUNDERBOLT: ("Thunderbolt", 20.0, 100.0),
}


class Network(Record):
    """The link between a rig's hosts: a preset, or figures of its own (which win)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    preset: NetworkPreset | None = NetworkPreset.GBE_10
    bandwidth_gbps: float | None = Field(default=None, gt=0, le=10000, description="Gbit/s")
    latency_us: float | None = Field(default=None, ge=0, le=1e6, description="round trip, µs")

    @property
    def gbit_s(self) -> float:
        if self.bandwidth_gbps is not None:
            return self.bandwidth_gbps
        return _NETWORK[self.preset or NetworkPreset.GBE_10][1]

    @property
    def round_trip_s(self) -> float:
        if self.latency_us is not None:
            return self.latency_us * 1e-6
        return _NETWORK[self.preset or NetworkPreset.GBE_10][2] * 1e-6

    @property
    def bytes_per_s(self) -> float:
        return self.gbit_s * 1e9 / 8

    @property
    def label(self) -> str:
        if self.bandwidth_gbps is not None or self.preset is None:
            return f"{self.gbit_s:g} Gbit/s, {self.round_trip_s * 1e6:g} µs"
        return self.preset.label


class Host(Record):
    """Another machine of the rig. Its GPUs are in `Rig.gpus`, tagged with its name."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    name: str = Field(min_length=1, max_length=200, pattern=_PRINTABLE)
    address: str = Field(
        default="", max_length=200, pattern=_PRINTABLE, description="host name or IP to reach it"
    )
    ram_total_bytes: int = Field(default=0, ge=0)
    cpu: Cpu = Field(default_factory=Cpu)


class Rig(Record):
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

    @model_validator(mode="after")
    def _check(self) -> Rig:
        if self.schema_version != RIG_SCHEMA_VERSION:
            raise ValueError(f"unsupported rig schema_version {self.schema_version}")
        if self.ram_available_bytes is not None and self.ram_available_bytes > self.ram_total_bytes:
            raise ValueError("ram_available_bytes exceeds ram_total_bytes")
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names):
            raise ValueError("two hosts share a name")
        unknown = {g.host for g in self.gpus} - {"", *names}
        if unknown:
            raise ValueError(f"a GPU names host {sorted(unknown)[0]!r}, which is not in hosts")
        return self

    @property
    def local_gpus(self) -> tuple[int, ...]:
        """Indexes of the GPUs in this machine (the ones single-host paths use)."""
        return tuple(i for i, g in enumerate(self.gpus) if not g.host)

    def host_of(self, gpu_index: int) -> str:
        """The host name of a GPU ('' = this machine)."""
        return self.gpus[gpu_index].host

    @property
    def host_names(self) -> tuple[str, ...]:
        """'' (this machine) first, then every other host in order."""
        return ("", *(h.name for h in self.hosts))

    @property
    def link(self) -> Network:
        return self.network or Network()

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
