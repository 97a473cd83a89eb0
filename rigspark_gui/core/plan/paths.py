"""Every execution path a rig offers for one model (the idea of `plan.rs`).

Paths: `unified` (shared memory), `gpu` (largest single GPU), `multi-gpu` (all peers of
one vendor), `multi-host` (those peers on every host of the rig, over llama.cpp RPC),
`cpu-offload` (GPUs plus RAM: as many slots on the GPUs as fit), `cpu`.
Here: their names, which of them a rig and an engine offer, and the record a plan keeps
of each (`PathPlan`): fit, the best quantization that fits, required and usable bytes,
the shortfall, a reason, and speed. A path is fitted in `path_fit`, its quantizations
searched in `quant_search`, and planned and recommended in `path_plans`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.memory import CpuLoading
from rigspark_gui.core.model import ModelSpec, QuantQuality
from rigspark_gui.core.placement import TIGHT_SHARE
from rigspark_gui.core.rig import Gpu, Rig, Vendor, rpc_cpu_device
from rigspark_gui.core.serving import ServingPlan
from rigspark_gui.core.settings import Backend
from rigspark_gui.core.speed import Prefill, Throughput

PLAN_SCHEMA_VERSION = 1
DISCRETE_VENDORS = (Vendor.NVIDIA, Vendor.AMD, Vendor.INTEL)


class PathName(StrEnum):
    UNIFIED = "unified"
    GPU = "gpu"
    MULTI_GPU = "multi-gpu"
    MULTI_HOST = "multi-host"
    CPU_OFFLOAD = "cpu-offload"
    CPU = "cpu"


class Reason(StrEnum):
    VRAM = "vram-bound"
    RAM = "ram-bound"
    CONTEXT = "context-bound"
    DISK = "disk-bound"
    LAYOUT = "layout-bound"

    @property
    def words(self) -> str:
        """What limits the path, as a person says it."""
        return REASON_WORDS[self]


REASON_WORDS = {
    Reason.VRAM: "GPU memory",
    Reason.RAM: "system RAM",
    Reason.CONTEXT: "the model's trained context",
    Reason.DISK: "free disk space",
    Reason.LAYOUT: "how the heads split over the GPUs",
}

# One verdict vocabulary for chart, table, lanes, report and CLI: a path that fits with
# less than TIGHT_SHARE of its usable memory to spare is "tight", as a device is
# (placement.load_verdict).


class Verdict(StrEnum):
    FITS = "fits"
    TIGHT = "tight"
    NO = "does not fit"

    @property
    def mark(self) -> str:
        return {"fits": "✓", "tight": "⚠", "does not fit": "✗"}[self.value]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    reserve_bytes: int
    # the vision/audio projector on the path's devices (core/plan/projector.py)
    projector_bytes: int = 0
    # a draft model's weights, KV and compute on the path's devices (core/plan/draft.py)
    draft_bytes: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantOption:
    """One rung of a path's quality/speed ladder: a quantization that fits there."""

    quant: str
    required_bytes: int
    # decode point estimate; None when unknown
    tok_s: float | None
    # its measured quality cost
    quality: QuantQuality | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PathPlan:
    path: PathName
    fits: bool
    # best quantization that fits, or the one shown
    quant: str | None
    required_bytes: int
    usable_bytes: int
    # extra usable memory needed before the smallest quantization fits
    shortfall_bytes: int | None
    reason: Reason | None
    gpu_count: int
    devices: tuple[str, ...]
    # llama.cpp -ngl of this path's placement
    ngl: int | None
    # llama.cpp --tensor-split when the default one would not fit
    tensor_split: tuple[float, ...] | None = None
    # llama.cpp --n-cpu-moe: the routed experts of the first N blocks in system memory
    # (an MoE model's cpu-offload path with every slot on the GPUs); None: none kept apart
    n_cpu_moe: int | None = None
    breakdown: MemoryBreakdown
    throughput: Throughput
    prefill: Prefill
    file_bytes: int
    # every quantization that fits on this path, best quality first
    ladder: tuple[QuantOption, ...] = ()
    # why this quantization, in one sentence
    choice: str = ""
    # the quantization's measured quality cost, with its basis
    quality: QuantQuality | None = None
    # a serving engine's own start-up figures (vLLM, SGLang)
    serving: ServingPlan | None = None
    # how the CPU loads the weights it holds when llama.cpp repacks some of them: the
    # launch flag, and the memory with it and with the file mapped (None: nothing repacked)
    cpu_loading: CpuLoading | None = None

    @property
    def tok_s(self) -> float | None:
        return self.throughput.tok_s

    @property
    def verdict(self) -> Verdict:
        """fits, tight (under 10 % of usable memory to spare) or does not fit."""
        if not self.fits:
            return Verdict.NO
        if self.usable_bytes - self.required_bytes < TIGHT_SHARE * max(self.usable_bytes, 1):
            return Verdict.TIGHT
        return Verdict.FITS


class PathCandidate:
    """A path's device set and how to place a model on it."""

    def __init__(
        self,
        name: PathName,
        gpu_ids: Sequence[int],
        pool: Sequence[str] = (),
        order: Sequence[int | str] | None = None,
    ) -> None:
        self.name = name
        self.gpu_ids = list(gpu_ids)
        # its devices in llama.cpp's order: GPU numbers and other hosts' CPUs by name
        # (`rpc-cpu:HOST`); the GPUs alone unless given
        self.order: list[int | str] = list(self.gpu_ids if order is None else order)
        # devices judged as one memory besides the unified path's (a multi-host path's
        # unified chip on this machine and its CPU side)
        self.pool = tuple(pool)


def gpu_served(rig: Rig, c: PathCandidate) -> bool:
    """Whether a GPU-only engine (vLLM, SGLang) can run the path: a multi-host one needs
    another host's GPU (those engines serve no CPU, this machine's or a host's)."""
    return c.name is not PathName.MULTI_HOST or any(rig.gpus[i].host for i in c.gpu_ids)


def is_discrete(g: Gpu) -> bool:
    return not g.unified and g.vendor in DISCRETE_VENDORS and g.memory_bytes > 0


def engine_paths(cands: list[PathCandidate], rig: Rig, backend: Backend) -> list[PathCandidate]:
    """The paths an engine can run: MLX only Apple silicon's unified memory, vLLM only
    GPUs (it places no single layer on the CPU); the llama.cpp family every path. An
    engine that can run none here is a clear error, said where it is chosen."""
    if backend is Backend.MLX:
        apple = [c for c in cands if c.name is PathName.UNIFIED and any(
            rig.gpus[i].vendor is Vendor.APPLE for i in c.gpu_ids)]  # fmt: skip
        if not apple:
            raise InvalidSettingsError(
                "MLX runs on Apple silicon only, and this rig has none: choose llama.cpp "
                "(or Ollama, LM Studio, koboldcpp)"
            )
        return apple
    if backend is Backend.VLLM:
        gpus = [c for c in cands if c.name in GPU_ONLY and gpu_served(rig, c)]
        if not gpus:
            raise InvalidSettingsError(
                "vLLM runs on GPUs and this rig has none it can use: choose llama.cpp to "
                "plan the CPU"
            )
        return gpus
    return cands


def candidate_paths(rig: Rig, cpu_only: bool) -> list[PathCandidate]:
    """Single-host paths use this machine's GPUs; `multi-host` adds the other hosts'
    (theirs first: llama.cpp lists RPC devices before local ones, so the head and the
    last layers stay on this machine)."""
    out: list[PathCandidate] = []
    local = rig.local_gpus
    unified = [i for i in local if rig.gpus[i].unified and rig.gpus[i].memory_bytes > 0]
    discrete = [i for i in local if is_discrete(rig.gpus[i])]
    if not cpu_only:
        # a unified-memory SoC (Apple, GB10, Strix Halo) plans on its one pool, also when
        # a rig file names the chip without setting unified_memory
        if unified and (rig.unified_memory or not discrete):
            out.append(PathCandidate(PathName.UNIFIED, unified[:1]))
            # other hosts' devices over RPC, this chip last; its CPU side shares its memory
            remote = remote_peers(rig, None)
            if remote or rig.cpu_hosts:
                pool = ("cpu", f"gpu:{unified[0]}")
                ids = [*remote, unified[0]]
                order = [*rpc_order(rig, remote), unified[0]]
                out.append(PathCandidate(PathName.MULTI_HOST, ids, pool, order))
        elif discrete:
            largest = max(discrete, key=lambda i: (rig.gpus[i].capacity_bytes, -i))
            vendor = rig.gpus[largest].vendor
            peers = [i for i in discrete if rig.gpus[i].vendor == vendor]
            out.append(PathCandidate(PathName.GPU, [largest]))
            if len(peers) > 1:
                out.append(PathCandidate(PathName.MULTI_GPU, peers))
            remote = remote_peers(rig, vendor)
            if remote or rig.cpu_hosts:
                order = [*rpc_order(rig, remote), *peers]
                out.append(PathCandidate(PathName.MULTI_HOST, [*remote, *peers], (), order))
            out.append(PathCandidate(PathName.CPU_OFFLOAD, peers))
        elif not unified:
            # no GPU here, some on other hosts: the layers run there, driven from here
            remote = remote_peers(rig, None)
            if remote:
                order = rpc_order(rig, remote)
                out.append(PathCandidate(PathName.MULTI_HOST, remote, (), order))
    out.append(PathCandidate(PathName.CPU, []))
    return out


def is_rpc_device(g: Gpu) -> bool:
    """A GPU another host serves with `rpc-server`: a discrete one, or a unified chip
    (Strix Halo, GB10, Apple) whose usable share of its host's memory is its capacity."""
    return bool(g.host) and (is_discrete(g) or (g.unified and g.memory_bytes > 0))


def remote_peers(rig: Rig, vendor: Vendor | None) -> list[int]:
    """The other hosts' GPUs (`is_rpc_device`) of one vendor (None: the vendor most of
    them are), host by host in the rig's order; a unified host offers its one chip."""
    order = {name: i for i, name in enumerate(rig.host_names)}
    theirs = [i for i, g in enumerate(rig.gpus) if is_rpc_device(g)]
    if vendor is None and theirs:
        vendors = [rig.gpus[i].vendor for i in theirs]
        vendor = max(set(vendors), key=vendors.count)
    ids = [i for i in theirs if rig.gpus[i].vendor == vendor]
    first: dict[str, int] = {}
    for i in ids:
        if rig.gpus[i].unified:
            first.setdefault(rig.gpus[i].host, i)
    ids = [i for i in ids if not rig.gpus[i].unified or first[rig.gpus[i].host] == i]
    return sorted(ids, key=lambda i: (order.get(rig.gpus[i].host, len(order)), i))


def rpc_order(rig: Rig, remote: Sequence[int]) -> list[int | str]:
    """Other hosts' RPC devices in llama.cpp's order, host by host: their GPUs `remote`
    and, for each host without a GPU, its CPU (`rpc-cpu:HOST`, rpc-server on a CPU box)."""
    order = {name: i for i, name in enumerate(rig.host_names)}
    keyed: list[tuple[int, int, int | str]] = [
        (order.get(rig.gpus[i].host, len(order)), i, i) for i in remote
    ]
    keyed += [(order[h.name], -1, rpc_cpu_device(h.name)) for h in rig.cpu_hosts]
    return [d for _, _, d in sorted(keyed, key=lambda k: (k[0], k[1]))]


GPU_ONLY = (PathName.UNIFIED, PathName.GPU, PathName.MULTI_GPU, PathName.MULTI_HOST)
SPLIT_PATHS = (PathName.MULTI_GPU, PathName.MULTI_HOST)


def cpu_only_model(spec: ModelSpec) -> bool:
    """Every quantization of the model runs only on the CPU."""
    return bool(spec.cpu_only_quants) and set(spec.available_quants) <= set(spec.cpu_only_quants)


def model_paths(spec: ModelSpec, rig: Rig, backend: Backend) -> list[PathCandidate]:
    """The paths an engine runs this model on (CPU paths alone for a CPU-only model)."""
    return engine_paths(candidate_paths(rig, cpu_only_model(spec)), rig, backend)
