"""llama.cpp's own commands, both ways: `llama-server` and koboldcpp command lines from a
placement, and llama.cpp / koboldcpp arguments read back into the placement they make."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from rigspark_gui.core.errors import InvalidPlacementError
from rigspark_gui.core.flash_attn import FaWhere, attention_shape, device_support, worst
from rigspark_gui.core.launch.beside_args import beside_args, draft_device_args, draft_pinned
from rigspark_gui.core.launch.cpu_loading import koboldcpp_loading_args, loading_args
from rigspark_gui.core.launch.engine import (
    Engine,
    LaunchCommand,
    accept,
    cuda_env,
    default_model_file,
    model_args,
    refuse,
)
from rigspark_gui.core.launch.llama_fit_form import choose_form, fit_form_argv
from rigspark_gui.core.launch.llama_layout import (
    GPU_BUFFER_RE,
    Override,
    buffer_prefix,
    device_of_buffer,
    llama_devices,
    llama_layout,
)
from rigspark_gui.core.model import Geometry, KvCacheType, ModelSpec
from rigspark_gui.core.placement import CPU, INPUT, OUTPUT, Placement, auto_place, kv_devices
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import DEFAULT_UBATCH, GpuBackend, PlanSettings

_EXPERT_TENSOR = "ffn_up_exps.weight"  # a representative routed-expert tensor name
# common/common.h LLM_FFN_EXPS_REGEX: the routed-expert tensors --cpu-moe and --n-cpu-moe
# keep in system memory (--n-cpu-moe prefixes blk\.I for each of the first N blocks)
FFN_EXPS_REGEX = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_DENSE_TENSOR = "attn_norm.weight"  # every block has one
_OUTPUT_TENSOR = "output.weight"
# koboldcpp's --quantkv knows these three only.
_KOBOLD_QUANTKV = {KvCacheType.F16: 0, KvCacheType.Q8_0: 1, KvCacheType.Q4_0: 2}
# koboldcpp's GPU switch per llama.cpp buffer prefix (Apple's Metal needs none)
_KOBOLD_GPU_FLAG = {
    "CUDA": "--usecublas",
    "ROCm": "--usecublas",
    "Vulkan": "--usevulkan",
    "SYCL": "--usevulkan",
}


# llama.cpp's buffer prefix -> the backend that build runs
_PREFIX_BACKEND = {
    "CUDA": GpuBackend.CUDA,
    "ROCm": GpuBackend.ROCM,
    "Vulkan": GpuBackend.VULKAN,
    "MTL": GpuBackend.METAL,
    "Metal": GpuBackend.METAL,
    "SYCL": GpuBackend.SYCL,
}


# ---------------------------------------------------------------- commands


def flash_attn_warning(
    placement: Placement, spec: ModelSpec, s: PlanSettings, rig: Rig, prefix: str
) -> str | None:
    """A warning when flash attention is on and a GPU holding layers (their KV) has no
    kernel of its own for the K/V pair under the build `prefix` names; None otherwise."""
    if not s.flash_attn or not rig.gpus:
        return None
    backend = _PREFIX_BACKEND.get(prefix, s.gpu_backend)
    shape = attention_shape(spec.geometry)
    held = (
        d
        for u, d in zip(placement.blocks, kv_devices(placement, s), strict=True)
        if u.has_attention
    )
    a = worst(device_support(rig, d, s.kv_k, s.kv_v, shape, backend) for d in dict.fromkeys(held))
    if a.where is FaWhere.NATIVE:
        return None
    return f"warning: -fa on with K {s.kv_k.value} / V {s.kv_v.value}: {a.reason}"


def llama_server_command(
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
    *,
    model_path: str | None = None,
    gpu_backend: str | None = None,
) -> LaunchCommand:
    engine = Engine.LLAMA_CPP
    if not (s.kv_k.llama_cpp and s.kv_v.llama_cpp):
        return refuse(engine, "the fp8 KV cache is a vLLM option; llama.cpp has no such type")
    if s.kv_v.quantized and not s.flash_attn:
        return refuse(engine, f"a quantized V cache ({s.kv_v.value}) needs flash attention")
    try:
        layout = llama_layout(placement, spec.geometry)
    except InvalidPlacementError as err:
        return refuse(engine, str(err))
    prefix = buffer_prefix(rig, gpu_backend)
    pinned = draft_pinned(spec, s)  # -devd's GPUs: shown too, the model kept off them
    dev = llama_devices(placement, layout, rig, prefix, prefix, pinned)
    model, model_notes = model_args(spec, quant, model_path)
    argv = ["llama-server", *model, "-c", str(s.context), "-ngl", str(layout.ngl)]
    argv += dev.device_args
    if dev.split is not None:
        argv += ["--tensor-split", ",".join(str(c) for c in dev.split)]
    argv += layout.moe_args  # before any -ot rule: the first rule that matches wins
    for o in dev.overrides:
        argv += ["-ot", o.arg]
    # the flags both forms share (pinned and let-fit-decide)
    tail = ["-ctk", s.kv_k.value, "-ctv", s.kv_v.value]
    # what the plan left to llama-server stays its default: -fa auto, -np auto (4 slots)
    if not s.is_auto("flash_attn"):
        tail += ["-fa", "on" if s.flash_attn else "off"]
    if not s.is_auto("parallel"):
        tail += ["-np", str(s.parallel)]
        if s.kv_unified:
            tail.append("-kvu")
    if s.n_ubatch != DEFAULT_UBATCH:
        tail += ["-ub", str(s.n_ubatch)]
    if s.swa_full:
        tail.append("--swa-full")
    tail += loading_args(placement, spec, quant, s, rig)  # --load-mode none / --no-repack
    tail += beside_args(spec, s, hf=model[0] == "-hf")  # --mmproj, -md ...
    # -devd names GPUs as each form shows them: the pinned form hides unused ones
    local = list(rig.local_gpus)
    shown = local if dev.shown is None else [i for i in dev.shown if i in local]
    try:
        devd = draft_device_args(spec, s, shown, prefix, dev.target)
        fit_devd = draft_device_args(spec, s, local, prefix)
    except InvalidPlacementError as err:
        return refuse(engine, str(err))
    argv += [*tail, *devd]
    fit_argv = fit_form_argv(model, s, [*tail, *fit_devd])
    fit_env = cuda_env(rig, prefix)
    forms, why = choose_form(placement, spec, quant, s, rig, argv, fit_argv, dev.env, fit_env)
    notes = [*model_notes, *dev.notes, f"recommended: {why}"]
    notes += [f"let fit decide: {f.text}" for f in forms if f.form == "fit"]
    fa_warning = flash_attn_warning(placement, spec, s, rig, prefix)
    if fa_warning is not None:
        notes.append(fa_warning)
    if prefix == "MTL":
        notes.append("older llama.cpp builds name the Apple GPU buffer 'Metal' instead of MTL0")
    # argv / text stay the pinned form (what RigSpark measured); `forms` has both
    return replace(accept(engine, argv, dev.env, notes), forms=forms, recommendation=why)


def koboldcpp_command(
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
    *,
    model_path: str | None = None,
    gpu_backend: str | None = None,
) -> LaunchCommand:
    engine = Engine.KOBOLDCPP
    if s.kv_k != s.kv_v or s.kv_k not in _KOBOLD_QUANTKV:
        return refuse(
            engine,
            f"--quantkv sets one type for K and V, f16, q8_0 or q4_0 only "
            f"(this plan uses K {s.kv_k.value}, V {s.kv_v.value})",
        )
    if s.kv_k.quantized and not s.flash_attn:
        return refuse(engine, "--quantkv needs --flashattention")
    if s.parallel > 1:
        return refuse(engine, "koboldcpp serves one sequence per context (no -np)")
    try:
        layout = llama_layout(placement, spec.geometry).with_moe_as_overrides()
    except InvalidPlacementError as err:
        return refuse(engine, str(err))
    prefix = buffer_prefix(rig, gpu_backend)
    dev = llama_devices(placement, layout, rig, prefix, "Vulkan" if prefix == "SYCL" else prefix)
    argv = ["koboldcpp", "--model", model_path or default_model_file(spec, quant)]
    # a GPU flag only where the placement runs on a GPU: without one koboldcpp stays on
    # the CPU, as the plan does (--usevulkan on a machine without a GPU fails to start)
    on_gpu = any(
        d not in (None, CPU) for u in placement.units for d in (u.device, u.experts_device)
    )
    if on_gpu and prefix in _KOBOLD_GPU_FLAG:
        argv.append(_KOBOLD_GPU_FLAG[prefix])
    argv += ["--contextsize", str(s.context), "--gpulayers", str(layout.ngl)]
    if dev.split is not None:
        argv += ["--tensor_split", *(str(c) for c in dev.split)]
    if dev.overrides:
        argv += ["--overridetensors", ",".join(o.arg for o in dev.overrides)]
    if s.flash_attn:
        argv.append("--flashattention")
    if s.kv_k is not KvCacheType.F16:
        argv += ["--quantkv", str(_KOBOLD_QUANTKV[s.kv_k])]
    # koboldcpp reads the file in unless told to map it
    argv += koboldcpp_loading_args(s)
    notes = dev.notes
    if not s.repack:
        notes = (*notes, "koboldcpp has no flag against repacking: its CPU repacks as planned")
    return accept(engine, argv, dev.env, notes)


# ---------------------------------------------------------------- llama.cpp -> placement


_NGL_FLAGS = ("-ngl", "--gpu-layers", "--n-gpu-layers", "--gpulayers")
_SPLIT_FLAGS = ("-ts", "--tensor-split", "--tensor_split")
_OT_FLAGS = ("-ot", "--override-tensor", "--overridetensors")


def parse_llama_args(
    argv: Sequence[str],
) -> tuple[int | None, tuple[float, ...] | None, tuple[Override, ...]]:
    """(-ngl, --tensor-split, -ot rules in order) from a llama.cpp or koboldcpp argv.

    Also reads `--cpu-moe` and `--n-cpu-moe N` as the expert rules llama.cpp makes of them.
    """
    ngl: int | None = None
    split: tuple[float, ...] | None = None
    overrides: list[Override] = []
    args = list(argv)
    i = 0

    def value() -> str:
        nonlocal i
        i += 1
        if i >= len(args):
            raise InvalidPlacementError(f"{args[i - 1]} needs a value")
        return args[i]

    while i < len(args):
        a = args[i]
        flag, eq, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if flag in _NGL_FLAGS:
            raw = inline if eq else value()
            ngl = 1 << 30 if raw in ("all", "auto") else int(raw)
        elif flag in _SPLIT_FLAGS:
            raw = inline if eq else value()
            parts = [raw]
            # koboldcpp takes the split as separate words
            while "," not in raw and i + 1 < len(args) and _is_number(args[i + 1]):
                i += 1
                parts.append(args[i])
            text = ",".join(parts)
            split = tuple(float(x) for x in re.split(r"[,/]", text) if x)
        elif flag in _OT_FLAGS:
            raw = inline if eq else value()
            for rule in raw.split(","):
                pattern, sep, buf = rule.rpartition("=")
                if not sep or not pattern:
                    raise InvalidPlacementError(f"-ot rule {rule!r} is not PATTERN=BUFFER")
                overrides.append(Override(pattern=pattern, buffer=buf))
        elif flag in ("--cpu-moe", "-cmoe"):
            overrides.append(Override(pattern=FFN_EXPS_REGEX, buffer="CPU"))
        elif flag in ("--n-cpu-moe", "-ncmoe"):
            n = int(inline if eq else value())
            if n < 0:
                raise InvalidPlacementError("--n-cpu-moe cannot be negative")
            for il in range(n):
                overrides.append(Override(pattern=rf"blk\.{il}{FFN_EXPS_REGEX}", buffer="CPU"))
        i += 1
    return ngl, split, tuple(overrides)


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _first_match(overrides: Sequence[Override], tensor: str) -> str | None:
    for o in overrides:
        # llama.cpp uses std::regex_search: a match anywhere in the name
        if re.search(o.pattern, tensor):
            return device_of_buffer(o.buffer)
    return None


def apply_llama_args(
    g: Geometry,
    rig: Rig,
    s: PlanSettings,
    ngl: int | None,
    tensor_split: Sequence[float] | None,
    overrides: Sequence[Override],
    visible: Sequence[int] | None = None,
) -> Placement:
    """The placement llama.cpp makes of these flags: its -ngl/split rule, then -ot.
    `visible`: the rig GPUs the backend was shown (buffer names and the split count
    only those)."""
    if visible is not None and not visible:
        ngl, tensor_split, visible = 0, None, None  # no GPU shown: all on the CPU
    if visible is not None:
        shown = list(visible)
        split = list(tensor_split) if tensor_split is not None else [1.0] * len(shown)
        full = [0.0] * len(rig.gpus)
        for k, i in enumerate(shown):
            full[i] = split[k]
        tensor_split = full

        def to_rig(o: Override) -> Override:
            m = GPU_BUFFER_RE.match(o.buffer)
            if m is None:
                return o  # CPU (or an unknown name, refused later)
            return Override(pattern=o.pattern, buffer=f"{m.group(1)}{shown[int(m.group(2))]}")

        overrides = [to_rig(o) for o in overrides]
    base = auto_place(g, rig, s, ngl=ngl, tensor_split=tensor_split)
    units = []
    for u in base.units:
        if u.unit == INPUT:
            units.append(u)
            continue
        if u.unit == OUTPUT:
            dev = _first_match(overrides, _OUTPUT_TENSOR) or u.device
            units.append(replace(u, device=dev))
            continue
        dev = _first_match(overrides, f"{u.unit}.{_DENSE_TENSOR}") or u.device
        experts: str | None = None
        if g.is_moe_layer(u.index):
            exp = _first_match(overrides, f"{u.unit}.{_EXPERT_TENSOR}") or u.device
            experts = None if exp == dev else exp
        for d in (dev, experts):
            if d is not None and d not in base.devices:
                raise InvalidPlacementError(f"no device {d!r} in this rig")
        units.append(replace(u, device=dev, experts_device=experts))
    return replace(base, units=tuple(units))
