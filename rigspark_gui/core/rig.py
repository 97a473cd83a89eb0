"""The hardware a plan is made for. Every figure carries its basis.

The JSON form of `Rig` is the rig file format (DESIGN §6): a GPU may be given by
name alone and filled from the GPU database by the catalog layer before planning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

RIG_SCHEMA_VERSION = 1
GIB = 1 << 30
MIB = 1 << 20
# Driver/context footprint a GPU loses before any buffer is allocated, where nothing
# better is known: detection, rig files and what-if GPUs take their backend's sourced
# figure from data/device_overhead.json instead (core/device_overhead.py); this is the
# figure assumed for a backend nobody has measured, and for rigs built in code (DESIGN §3).
DEFAULT_GPU_RESERVE_BYTES = 250 * MIB
# Memory the operating system and desktop keep for themselves on the CPU side.
DEFAULT_RAM_RESERVE_BYTES = 2 * GIB


RPC_CPU_PREFIX = "rpc-cpu:"


def rpc_cpu_device(host: str) -> str:
    """The device another host's CPU is over llama.cpp RPC (rpc-server on a CPU box)."""
    return f"{RPC_CPU_PREFIX}{host}"


def rpc_cpu_host(device: str) -> str | None:
    """The host of an `rpc-cpu:HOST` device, None for any other device."""
    return device.removeprefix(RPC_CPU_PREFIX) if device.startswith(RPC_CPU_PREFIX) else None


def gpu_index(device: str) -> int | None:
    """The rig index of a `gpu:N` device; None for `cpu` and `rpc-cpu:HOST`."""
    return int(device[4:]) if device.startswith("gpu:") else None


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    basis: Basis
    # where a spec figure comes from, or why unknown
    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSpec:
    provenance: dict[str, Provenance] = field(default_factory=dict)

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu(DeviceSpec):
    name: str
    vendor: Vendor = Vendor.OTHER
    index: int = 0
    memory_total_bytes: int | None = None
    memory_free_bytes: int | None = None
    bandwidth_gbps: float | None = None
    fp16_tflops: float | None = None
    reserve_bytes: int = DEFAULT_GPU_RESERVE_BYTES
    # shares system memory (Apple, iGPU)
    unified: bool = False
    uuid: str | None = None
    compute_capability: str | None = None
    pcie_generation: int | None = None
    pcie_width: int | None = None
    display_attached: bool | None = None
    # joined to its host's peers by NVLink
    nvlink: bool = False
    # its host; '' = this one
    host: str = ""

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

    def __post_init__(self) -> None:
        self._free_within_total()


# in `Cpu.features` when the CPU runs under a hypervisor: its vCPUs may be hyperthreads
VM_FEATURE = "hypervisor"


@dataclass(frozen=True, slots=True, kw_only=True)
class Cpu(DeviceSpec):
    name: str = "CPU"
    # physical cores
    cores: int | None = None
    threads: int | None = None
    memory_bandwidth_gbps: float | None = None
    # f32 dense, all cores
    flops_gflops: float | None = None
    # instruction sets llama.cpp's CPU backend repacks weights for: avx2, avx512
    features: tuple[str, ...] = ()
    # cores' worth of vector compute all its threads give together, where measured (a
    # VM's vCPUs may be two hyperthreads of one core: then about half their count)
    compute_cores: float | None = None


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Network:
    """The link between a rig's hosts: a preset, or figures of its own (which win)."""

    preset: NetworkPreset | None = NetworkPreset.GBE_10
    # Gbit/s
    bandwidth_gbps: float | None = None
    # round trip, µs
    latency_us: float | None = None

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    """Another machine of the rig. Its GPUs are in `Rig.gpus`, tagged with its name; its
    other fields mean what the rig's own do for this machine."""

    name: str
    # host name or IP to reach it
    address: str = ""
    ram_total_bytes: int = 0
    ram_available_bytes: int | None = None
    ram_reserve_bytes: int = DEFAULT_RAM_RESERVE_BYTES
    cpu: Cpu = field(default_factory=Cpu)
    disk_free_bytes: int | None = None
    unified_memory: bool = False
    provenance: dict[str, Provenance] = field(default_factory=dict)

    @property
    def ram_usable_bytes(self) -> int:
        """RAM a plan may use there: available if known, else total less the OS reserve."""
        if self.ram_available_bytes is not None:
            return self.ram_available_bytes
        return max(self.ram_total_bytes - self.ram_reserve_bytes, 0)

    def __post_init__(self) -> None:
        if self.ram_available_bytes is not None and self.ram_available_bytes > self.ram_total_bytes:
            raise ValueError(f"host {self.name!r}: ram_available_bytes exceeds ram_total_bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rig:
    schema_version: int = RIG_SCHEMA_VERSION
    name: str = ""
    gpus: tuple[Gpu, ...] = ()
    ram_total_bytes: int
    ram_available_bytes: int | None = None
    ram_reserve_bytes: int = DEFAULT_RAM_RESERVE_BYTES
    cpu: Cpu = field(default_factory=Cpu)
    disk_free_bytes: int | None = None
    unified_memory: bool = False
    edited: bool = False
    # detection warnings, shown to the user
    notes: tuple[str, ...] = ()
    provenance: dict[str, Provenance] = field(default_factory=dict)
    # other machines joined over `network` (this one is not listed)
    hosts: tuple[Host, ...] = ()
    network: Network | None = None
    # this machine's address as its hosts reach it
    address: str = ""

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
    def cpu_hosts(self) -> tuple[Host, ...]:
        """Other hosts with no GPU: each serves its CPU over RPC (`rpc-cpu:HOST`)."""
        tagged = {g.host for g in self.gpus}
        return tuple(h for h in self.hosts if h.name not in tagged)

    def host(self, name: str) -> Host | None:
        return next((h for h in self.hosts if h.name == name), None)

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

    def __post_init__(self) -> None:
        self._check()
