"""Each device's own overhead: the memory a GPU loses before any buffer, with its basis.

A GPU backend creates a context on every device it uses (CUDA, ROCm/HIP, Vulkan) before
it allocates anything; llama.cpp reads the device's free memory only after that
(`cudaMemGetInfo` in ggml-cuda.cu), so the free figure its fit sees already lacks it.
Detection reads NVML or sysfs without a context, and a what-if rig has only a board's
total: both must subtract it, and that is each GPU's `reserve_bytes`. Apple's Metal
device has no such context; its memory is `recommendedMaxWorkingSetSize` (llama.cpp's
ggml-metal-device.m reports it as the device's total, free = total − allocated), a part
of RAM that `sysctl iogpu.wired_limit_mb` can raise.

The figures and their sources live in data/device_overhead.json (read by
formats/device_overhead.py); this module only chooses among them, so the figure the rig
panel shows is the one the plan subtracts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rigspark_gui.core.rig import (
    DEFAULT_GPU_RESERVE_BYTES,
    GIB,
    MIB,
    Basis,
    Gpu,
    Provenance,
    Rig,
    Vendor,
)

__all__ = [
    "WORKING_SET_MARK",
    "ContextFigure",
    "DeviceOverheadEntry",
    "DeviceOverheadTable",
    "Overhead",
    "WorkingSetFigure",
    "WorkingSetRule",
    "apple_working_set",
    "device_overheads",
    "gpu_backend",
    "gpu_overhead",
    "with_device_overhead",
]

# Every working-set basis sentence starts so: a GPU whose memory already is its working
# set is not cut down again (a saved rig read back, a detected Mac).
WORKING_SET_MARK = "Metal working set"
# The backend llama.cpp uses by default for each vendor's GPUs.
_BACKEND = {
    Vendor.NVIDIA: "cuda",
    Vendor.AMD: "rocm",
    Vendor.INTEL: "vulkan",
    Vendor.APPLE: "metal",
    Vendor.OTHER: "vulkan",
}
_LABEL = {"cuda": "CUDA", "rocm": "ROCm/HIP", "vulkan": "Vulkan", "metal": "Metal"}
# Words drivers and spec sheets add or drop in front of a board's name.
_NAME_NOISE = ("nvidia", "geforce", "amd", "radeon", "intel", "apple")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextFigure:
    """A backend's context on one GPU (`gpu` names it) or on any (`gpu` empty)."""

    backend: str
    gpu: str = ""
    # None: nobody has measured it
    bytes: int | None = None
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkingSetFigure:
    """`recommendedMaxWorkingSetSize` read on a Mac with `memory_bytes` of RAM."""

    memory_bytes: int
    working_set_bytes: int
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkingSetRule:
    """macOS's default working set: a reading for the Mac's RAM size if there is one,
    else `small_fraction` of RAM up to `large_above_bytes` and `large_fraction` above."""

    small_fraction: float
    large_fraction: float
    large_above_bytes: int
    rule_source: str
    measured: tuple[WorkingSetFigure, ...] = ()
    wired_limit_source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceOverheadTable:
    contexts: tuple[ContextFigure, ...]
    working_set: WorkingSetRule
    # said on every GPU of a Windows machine
    windows_warning: str = ""
    windows_sources: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Overhead:
    """What a device loses before any buffer, and the sentence that says why."""

    bytes: int
    basis: Basis
    sentence: str
    # a caution beside the figure (Windows' silent overflow)
    warning: str = ""

    @property
    def provenance(self) -> Provenance:
        text = f"{self.sentence} {self.warning}".strip()
        return Provenance(basis=self.basis, source=text)


def gpu_backend(gpu: Gpu) -> str:
    """The llama.cpp backend a GPU runs under by default: cuda, rocm, vulkan or metal."""
    return _BACKEND.get(gpu.vendor, "vulkan")


def _name_key(name: str) -> str:
    words = name.lower().replace("(tm)", " ").replace("(r)", " ").split()
    while len(words) > 1 and words[0] in _NAME_NOISE:
        words.pop(0)
    return " ".join(words)


def _mib(n: int) -> str:
    return f"{n / MIB:.0f} MiB"


def _context(table: DeviceOverheadTable, gpu: Gpu) -> Overhead:
    backend = gpu_backend(gpu)
    label = _LABEL.get(backend, backend)
    key = _name_key(gpu.name)
    exact = next(
        (
            c
            for c in table.contexts
            if c.backend == backend and c.gpu and _name_key(c.gpu) == key and c.bytes is not None
        ),
        None,
    )
    if exact is not None and exact.bytes is not None:
        return Overhead(
            bytes=exact.bytes,
            basis=Basis.SPEC,
            sentence=f"{label} context measured on this GPU: {_mib(exact.bytes)} ({exact.source}).",
        )
    default = next((c for c in table.contexts if c.backend == backend and not c.gpu), None)
    if default is not None and default.bytes is not None:
        return Overhead(
            bytes=default.bytes,
            basis=Basis.SPEC,
            sentence=(
                f"{label} context, not measured on this GPU: {_mib(default.bytes)} "
                f"({default.source})."
            ),
        )
    why = default.source if default is not None else f"no {label} figure in the data"
    return Overhead(
        bytes=DEFAULT_GPU_RESERVE_BYTES,
        basis=Basis.UNKNOWN,
        sentence=(
            f"{label} context size unknown ({why}); RigSpark assumes "
            f"{_mib(DEFAULT_GPU_RESERVE_BYTES)} per GPU."
        ),
    )


def gpu_overhead(table: DeviceOverheadTable, gpu: Gpu, system: str = "") -> Overhead:
    """What `gpu` loses before any buffer under its default llama.cpp backend; `system`
    (as `platform.system()` names it, '' when unknown) adds Windows' caution."""
    if gpu_backend(gpu) == "metal":
        overhead = Overhead(
            bytes=0,
            basis=Basis.SPEC,
            sentence=(
                "Metal keeps no context aside: llama.cpp takes the device's memory to be its "
                "working set and counts free as working set less what is allocated "
                "(ggml-metal-device.m, ggml_metal_device_get_memory)."
            ),
        )
    else:
        overhead = _context(table, gpu)
    if system == "Windows" and table.windows_warning and not gpu.unified:
        warning = f"{table.windows_warning} ({table.windows_sources})".strip()
        overhead = replace(overhead, warning=warning)
    return overhead


def apple_working_set(
    table: DeviceOverheadTable, memory_bytes: int, wired_limit_mb: int = 0
) -> tuple[int, str]:
    """The Metal device's memory on a Mac with `memory_bytes` of RAM, and its basis; a
    positive `wired_limit_mb` (`sysctl iogpu.wired_limit_mb`) replaces macOS's default."""
    rule = table.working_set
    if wired_limit_mb > 0:
        limit = wired_limit_mb * MIB
        return limit, (
            f"{WORKING_SET_MARK}: iogpu.wired_limit_mb = {wired_limit_mb} "
            f"({limit / GIB:.2f} GiB of {memory_bytes / GIB:.0f} GiB), which "
            f"recommendedMaxWorkingSetSize then reports ({rule.wired_limit_source})."
        )
    reading = next((m for m in rule.measured if m.memory_bytes == memory_bytes), None)
    if reading is not None:
        return reading.working_set_bytes, (
            f"{WORKING_SET_MARK}: recommendedMaxWorkingSetSize read on a "
            f"{memory_bytes / GIB:.0f} GiB Mac: {reading.working_set_bytes / GIB:.2f} GiB "
            f"({reading.source}); raise it with sysctl iogpu.wired_limit_mb."
        )
    large = memory_bytes > rule.large_above_bytes
    fraction = rule.large_fraction if large else rule.small_fraction
    share = (
        "3/4"
        if abs(fraction - 0.75) < 1e-9
        else "2/3"
        if abs(fraction - 2 / 3) < 1e-9
        else (f"{fraction:.0%}")
    )
    limit = int(memory_bytes * fraction)
    return limit, (
        f"{WORKING_SET_MARK}: macOS's default, {share} of {memory_bytes / GIB:.0f} GiB = "
        f"{limit / GIB:.2f} GiB ({rule.rule_source}); raise it with sysctl "
        "iogpu.wired_limit_mb."
    )


def _user_reserve(gpu: Gpu) -> bool:
    """Whether the reserve was chosen by someone (kept) rather than defaulted."""
    prov = gpu.provenance.get("reserve_bytes")
    if prov is not None:
        return prov.basis is Basis.USER
    return gpu.reserve_bytes != DEFAULT_GPU_RESERVE_BYTES


def _with_working_set(table: DeviceOverheadTable, gpu: Gpu) -> Gpu:
    """An Apple chip named by its RAM size (a what-if, a rig file) with its working set as
    its memory; one whose memory already is a working set stays as it is."""
    prov = gpu.provenance.get("memory_total_bytes")
    total = gpu.memory_total_bytes
    if total is None or (prov is not None and prov.source.startswith(WORKING_SET_MARK)):
        return gpu
    if prov is not None and prov.basis in (Basis.MEASURED, Basis.USER):
        return gpu
    limit, sentence = apple_working_set(table, total)
    free = gpu.memory_free_bytes
    return replace(
        gpu,
        memory_total_bytes=limit,
        memory_free_bytes=min(free, limit) if free is not None else None,
        provenance={
            **gpu.provenance,
            "memory_total_bytes": Provenance(basis=Basis.SPEC, source=sentence),
        },
    )


def with_device_overhead(rig: Rig, table: DeviceOverheadTable, system: str = "") -> Rig:
    """`rig` with each GPU's reserve set to its backend's overhead (unless someone chose
    it) and each Apple chip's memory set to its working set; `system` is this machine's
    OS (its GPUs only: another host's is not known)."""
    gpus = []
    for gpu in rig.gpus:
        if gpu.vendor is Vendor.APPLE and gpu.unified:
            gpu = _with_working_set(table, gpu)
        if not _user_reserve(gpu):
            overhead = gpu_overhead(table, gpu, "" if gpu.host else system)
            gpu = replace(
                gpu,
                reserve_bytes=overhead.bytes,
                provenance={**gpu.provenance, "reserve_bytes": overhead.provenance},
            )
        gpus.append(gpu)
    return replace(rig, gpus=tuple(gpus))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceOverheadEntry:
    """One GPU's overhead as every surface shows it: the reserve the plan subtracts."""

    # gpu:N
    device: str
    name: str
    bytes: int
    basis: Basis
    # the sentence that says where the figure comes from
    source: str


def device_overheads(rig: Rig) -> tuple[DeviceOverheadEntry, ...]:
    """Each GPU's reserve with its basis, in device order: the figure the rig panel shows
    and the one every tally subtracts (`Gpu.reserve_bytes`)."""
    out = []
    for i, gpu in enumerate(rig.gpus):
        prov = gpu.provenance.get("reserve_bytes")
        if prov is None:
            prov = (
                Provenance(
                    basis=Basis.UNKNOWN,
                    source=f"RigSpark's assumed {_mib(DEFAULT_GPU_RESERVE_BYTES)} per GPU",
                )
                if gpu.reserve_bytes == DEFAULT_GPU_RESERVE_BYTES
                else Provenance(basis=Basis.USER, source="given in the rig")
            )
        out.append(
            DeviceOverheadEntry(
                device=f"gpu:{i}",
                name=gpu.name,
                bytes=gpu.reserve_bytes,
                basis=prov.basis,
                source=prov.source,
            )
        )
    return tuple(out)
