"""llama.cpp's `--fit`, reproduced: what `llama-server -m FILE` (and everything built on
it) does with the model before it loads. `llama_fit` runs fit's own decision procedure
(`search.common_fit`) over RigSpark's byte model of each dry run (`measure.FitMeasure`).

The public face of fit; other packages import from here only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rigspark_gui.core.fit.command_line import AUTO_SLOTS, PROGRAMS, FitCommand, parse_fit_command
from rigspark_gui.core.fit.llama_flags import LLAMA_BUILD
from rigspark_gui.core.fit.measure import FitMeasure
from rigspark_gui.core.fit.outcome import FitDevice, FitOutcome, FitStatus, fit_command
from rigspark_gui.core.fit.search import (
    ALL_EXPERTS_PATTERN,
    DEFAULT_FIT_CTX,
    DEFAULT_MARGIN,
    MIB,
    FitProblem,
    common_fit,
    overflow_pattern,
)
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import CPU, device_capacity, rig_devices
from rigspark_gui.core.rig import Rig, Vendor, gpu_index, rpc_cpu_host
from rigspark_gui.core.settings import PlanSettings

__all__ = [
    "ALL_EXPERTS_PATTERN",
    "AUTO_SLOTS",
    "DEFAULT_FIT_CTX",
    "DEFAULT_MARGIN",
    "LLAMA_BUILD",
    "MIB",
    "PROGRAMS",
    "FitCommand",
    "FitDevice",
    "FitOutcome",
    "FitStatus",
    "UserFlags",
    "buffer_name",
    "fit_command",
    "fit_devices",
    "fit_free_bytes",
    "llama_fit",
    "parse_fit_command",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class UserFlags:
    """What the user set on the command line that fit reads (None: left at the default)."""

    # -c: None = not given (fit may shrink it); 0 = the full trained context, never shrunk
    context: int | None = None
    ngl: int | None = None
    tensor_split: tuple[float, ...] | None = None
    # -ot / --cpu-moe / --n-cpu-moe given
    overrides: bool = False
    split_mode: str = "layer"


def fit_devices(rig: Rig) -> tuple[str, ...]:
    """The devices llama.cpp fits over, in its order (RPC servers first; no CPU)."""
    return tuple(d for d in rig_devices(rig) if d != CPU)


def fit_free_bytes(rig: Rig, device: str) -> int:
    """The free memory llama.cpp reads for a device: a GPU's free memory after its own
    backend context (RigSpark's reserve); a CPU served over RPC reports its total RAM as
    free (ggml-cpu.cpp: "assume that all of it is free"); the host: its total RAM."""
    if device == CPU:
        return rig.ram_total_bytes
    host = rpc_cpu_host(device)
    if host is not None:
        h = rig.host(host)
        return h.ram_total_bytes if h else 0
    i = gpu_index(device)
    if i is not None:
        return rig.gpus[i].capacity_bytes
    capacity, reserve = device_capacity(rig, device)
    return max(capacity - reserve, 0)


def _margins(s: PlanSettings, nd: int) -> tuple[int, ...]:
    """-fitt: one value for every device, or one per device (the rest keep 1024 MiB)."""
    given = [m * MIB for m in s.fit_target_mib]
    if len(given) == 1:
        return tuple(given * max(nd, 1))
    return tuple(given[i] if i < len(given) else 1024 * MIB for i in range(max(nd, 1)))


def llama_fit(
    spec: ModelSpec,
    quant: str,
    rig: Rig,
    s: PlanSettings,
    *,
    devices: Sequence[str] | None = None,
    user: UserFlags | None = None,
) -> FitOutcome:
    """What llama.cpp's fit decides for this model file, settings and command line.
    `s` holds the resolved settings (flash attention, slots); its context is used only
    when the user gave one (`user.context`)."""
    user = user or UserFlags()
    devs = tuple(fit_devices(rig) if devices is None else devices)
    g = spec.geometry
    if not s.fit:
        ctx = user.context or g.context_length
        return FitOutcome(status=FitStatus.OFF, reason="--fit off", context=ctx, ngl=-1)
    streams = 1 if s.kv_unified else s.parallel
    measure = FitMeasure(spec, quant, rig, s, devs, user_ngl=user.ngl, user_split=user.tensor_split)
    margins = _margins(s, len(devs))
    problem = FitProblem(
        free=tuple(fit_free_bytes(rig, d) for d in devs),
        host_total=rig.ram_total_bytes,
        margins=margins,
        n_layer=g.n_layer,
        n_ctx_train=g.context_length,
        n_expert=g.n_expert,
        context=user.context or 0,
        min_context=None if user.context == 0 else s.fit_ctx,
        streams=streams,
        user_ngl=user.ngl,
        user_split=user.tensor_split is not None,
        user_overrides=user.overrides,
        split_mode=user.split_mode,
    )
    d = common_fit(problem, measure)
    overrides = tuple(
        f"{overflow_pattern(o.layer, o.keep)}="
        + ("CPU" if o.to_device is None else buffer_name(rig, devs, devs[o.to_device]))
        for o in d.overrides
    )
    status = FitStatus(d.status)
    ngl = d.ngl if d.ngl is not None else (user.ngl if user.ngl is not None else -1)
    split = tuple(d.split)
    rows = (
        [(CPU, rig.ram_total_bytes, margins[0])]
        if not devs
        else [(dev, problem.free[i], margins[i]) for i, dev in enumerate(devs)]
    )
    layers = d.layers or ()
    devices_out = tuple(
        FitDevice(
            device=dev,
            free_bytes=free,
            margin_bytes=margin,
            projected_bytes=d.projected[i] if i < len(d.projected) else 0,
            layers=layers[i].n_layer if i < len(layers) else 0,
            overflowing=layers[i].n_part if i < len(layers) else 0,
        )
        for i, (dev, free, margin) in enumerate(rows)
    )
    return FitOutcome(
        status=status,
        reason=d.reason,
        context=d.context,
        ngl=ngl,
        tensor_split=split,
        overrides=overrides,
        command=fit_command(d.context, ngl, split, overrides)
        if status is not FitStatus.FAILED
        else "",
        devices=devices_out,
        initial_context=d.initial_context,
    )


_BACKEND_NAMES = {Vendor.NVIDIA: "CUDA", Vendor.AMD: "ROCm", Vendor.APPLE: "Metal"}


def buffer_name(rig: Rig, devices: Sequence[str], device: str) -> str:
    """A device's buffer type as llama.cpp names it in an -ot rule: CUDA1, ROCm0, Vulkan0,
    or RPC0[address] for another host's device (ggml-rpc.cpp: RPC<remote index>[endpoint])."""
    host = rpc_cpu_host(device)
    i = gpu_index(device)
    if host is None and i is not None and rig.gpus[i].host:
        host = rig.gpus[i].host  # another host's GPU: an RPC device too
    if host is not None:
        h = rig.host(host)
        return f"RPC0[{h.address if h and h.address else host}]"
    if i is None:
        return device
    gpu = rig.gpus[i]
    backend = _BACKEND_NAMES.get(gpu.vendor, "Vulkan")
    same = [
        d for d in devices
        if (j := gpu_index(d)) is not None and not rig.gpus[j].host
        and _BACKEND_NAMES.get(rig.gpus[j].vendor, "Vulkan") == backend
    ]  # fmt: skip
    return backend if backend == "Metal" else f"{backend}{same.index(device)}"
