"""The rig file: this machine, its GPUs and the other hosts of a cluster, written with this
machine at the top level or with every machine under `hosts` (see `as_written`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

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
    compute_cores: float | None = Field(
        default=None,
        gt=0,
        le=4096,
        description="cores' worth of vector compute all threads give together (a VM whose "
        "vCPUs are hyperthread pairs: about half the vCPUs)",
    )

    @field_validator("compute_cores")
    @classmethod
    def _within_cores(cls, value: float | None, info: ValidationInfo) -> float | None:
        cores = info.data.get("cores")
        if value is not None and isinstance(cores, int) and value > cores:
            raise ValueError(f"exceeds the {cores} cores")
        return value


class Network(Boundary):
    record: ClassVar[type] = core_rig.Network
    preset: NetworkPreset | None = NetworkPreset.GBE_10
    bandwidth_gbps: float | None = Field(default=None, gt=0, le=10000, description="Gbit/s")
    latency_us: float | None = Field(default=None, ge=0, le=1e6, description="round trip, µs")


def _within_total(available: int | None, info: ValidationInfo) -> int | None:
    total = info.data.get("ram_total_bytes")
    if available is not None and isinstance(total, int) and available > total:
        raise ValueError("exceeds ram_total_bytes")
    return available


class Host(Boundary):
    """Another machine of the rig: the same per-machine fields as the rig's top level."""

    record: ClassVar[type] = core_rig.Host
    name: str = Field(min_length=1, max_length=200, pattern=_PRINTABLE)
    address: str = Field(
        default="", max_length=200, pattern=_PRINTABLE, description="host name or IP to reach it"
    )
    ram_total_bytes: int = Field(default=0, ge=0)
    ram_available_bytes: int | None = Field(default=None, ge=0)
    ram_reserve_bytes: int = Field(default=DEFAULT_RAM_RESERVE_BYTES, ge=0)
    cpu: Cpu = Field(default_factory=Cpu)
    disk_free_bytes: int | None = Field(default=None, ge=0)
    unified_memory: bool = False
    provenance: dict[str, Provenance] = Field(default_factory=dict)

    _available_within_total = field_validator("ram_available_bytes")(_within_total)


# What a machine has (the rig's top level for this one, a host entry for another); the
# rest of the top level is the rig's as a whole: schema_version, name, edited, notes,
# network, hosts.
MACHINE_FIELDS = (
    "address",
    "ram_total_bytes",
    "ram_available_bytes",
    "ram_reserve_bytes",
    "cpu",
    "gpus",
    "disk_free_bytes",
    "unified_memory",
    "provenance",
)


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
        default=(),
        description="other machines joined over `network` (this one is not listed; a file "
        "may list every machine here instead, the first being this one)",
    )
    network: Network | None = None
    address: str = Field(
        default="",
        max_length=200,
        pattern=_PRINTABLE,
        description="this machine's address as its hosts reach it",
    )

    _available_within_total = field_validator("ram_available_bytes")(_within_total)

    @model_validator(mode="wrap")
    @classmethod
    def _as_written(cls, raw: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """A rig file as people write it, read into the form above (see `as_written`);
        a problem is reported where it is in the file, not where it was moved to."""
        form, where = as_written(raw)
        try:
            return handler(form)
        except ValidationError as err:
            errors = err.errors()
            if where is None or all(where(e["loc"]) == e["loc"] for e in errors):
                raise
            lines: list[InitErrorDetails] = [
                {
                    "type": PydanticCustomError(e["type"], e["msg"]),
                    "loc": where(e["loc"]),
                    "input": e["input"],
                }
                for e in errors
            ]
            raise ValidationError.from_exception_data(err.title, lines) from None


Loc = tuple[int | str, ...]


def as_written(raw: Any) -> tuple[Any, Callable[[Loc], Loc] | None]:
    """The rig file `raw` in the form `Rig` validates, and where a place in that form was
    in the file (None: the same place).

    Two ways of writing a cluster are read:

    - today's form: this machine's fields at the top level (`ram_total_bytes` among them),
      the other machines under `hosts`;
    - the all-hosts form, recognised by `hosts` and no `ram_total_bytes` at the top level:
      every machine is under `hosts` and the first is this one (where commands start).
      Its fields become the top level, its GPUs this machine's, and its `name` the rig's
      `name` when the file gives none; the others stay hosts. The top level then holds
      only what is the rig's as a whole (`name`, `network`, `notes`, ...): a machine's
      field there (`cpu`, `address`, non-empty `gpus`, ...) is an error, so no field is
      ever given twice.

    In both, a host may list its own `gpus`: they join the top-level `gpus`, tagged with
    the host's name and numbered within it.
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("hosts"), (list, tuple)):
        return raw, None
    written = list(raw["hosts"])
    first = written[0] if written else None
    if "ram_total_bytes" in raw or not isinstance(first, dict):
        return _own_gpus_joined(raw, written, start=0, local=None)

    clash = next((f for f in MACHINE_FIELDS if f in raw and raw[f] not in ([], ())), None)
    if clash is not None:
        _fail(
            (clash,),
            "the rig lists every machine under hosts (no top-level ram_total_bytes): "
            f"give this machine's {clash} in hosts.0",
            raw[clash],
        )
    names = [h.get("name") for h in written[1:] if isinstance(h, dict)]
    if first.get("name") is not None and first.get("name") in names:
        _fail(("hosts", names.index(first["name"]) + 1, "name"), "two hosts share a name", first)
    here = {k: v for k, v in first.items() if k not in ("name", "gpus")}
    moved = set(here)
    if not raw.get("name") and "name" in first:
        here["name"] = first["name"]
        moved.add("name")
    top = {k: v for k, v in raw.items() if k != "gpus"}
    form, where = _own_gpus_joined({**top, **here}, written[1:], start=1, local=first)

    def in_file(loc: Loc) -> Loc:
        loc = where(loc)
        if loc[:1] == ("hosts",) and len(loc) > 1 and isinstance(loc[1], int):
            return loc  # already placed by `_own_gpus_joined`
        if loc and (loc[0] in MACHINE_FIELDS or loc[0] in moved):
            return ("hosts", 0, *loc)
        return loc

    return form, in_file


def _own_gpus_joined(
    raw: dict[str, Any], hosts: list[Any], *, start: int, local: dict[str, Any] | None
) -> tuple[dict[str, Any], Callable[[Loc], Loc]]:
    """`raw` with each host's own `gpus` moved into the top-level `gpus`, after those of
    `local` (this machine written as the first host) and the top level's own; `hosts` are
    `raw`'s hosts, from position `start` of the file."""
    # (a GPU, where the file has it)
    origin: list[tuple[Any, Loc]] = []
    for i, g in enumerate(_listed(local.get("gpus") if local is not None else None)):
        if isinstance(g, dict):
            g = {"index": i, **g, "host": ""}  # this machine's
        origin.append((g, ("hosts", 0, "gpus", i)))
    origin += [(g, ("gpus", i)) for i, g in enumerate(_listed(raw.get("gpus")))]
    kept = []
    for n, h in enumerate(hosts, start=start):
        if isinstance(h, dict) and "gpus" in h:
            h = dict(h)
            for i, g in enumerate(_listed(h.pop("gpus"))):
                if isinstance(g, dict):
                    g = {"index": i, **g, "host": h.get("name", "")}
                origin.append((g, ("hosts", n, "gpus", i)))
        kept.append(h)
    form = {**raw, "hosts": kept}
    if origin and isinstance(raw.get("gpus", ()), (list, tuple)):
        form["gpus"] = [g for g, _ in origin]

    def in_file(loc: Loc) -> Loc:
        if len(loc) > 1 and loc[0] == "gpus" and isinstance(loc[1], int) and loc[1] < len(origin):
            return (*origin[loc[1]][1], *loc[2:])
        if len(loc) > 1 and loc[0] == "hosts" and isinstance(loc[1], int):
            return ("hosts", loc[1] + start, *loc[2:])
        return loc

    return form, in_file


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _fail(loc: Loc, message: str, value: Any) -> NoReturn:
    """Stop validation with one problem at `loc` of the file."""
    raise ValidationError.from_exception_data(
        "Rig", [{"type": PydanticCustomError("rig_form", message), "loc": loc, "input": value}]
    )


def read_rig(raw: object) -> core_rig.Rig:
    """The engine's rig from a rig file's JSON (raises pydantic's ValidationError, or
    ValueError when fields disagree)."""
    record: core_rig.Rig = Rig.model_validate(raw).to_record()
    return record


def rig_json(rig: core_rig.Rig) -> str:
    """A rig as its file: every field, two-space indents."""
    return Rig.from_record(rig).model_dump_json(indent=2)
