"""Launch commands for a placement: llama.cpp, koboldcpp, Ollama, LM Studio, vLLM.

Every command is built as an argv list and joined with `shlex.join`, so a model name or
path read from a file is always one quoted shell word and never runs as code.

llama.cpp: a placement is expressed as a *base* `-ngl` + `--tensor-split` (llama.cpp's
rule; `placement.llama_base` picks the one nearest the placement) plus `-ot` rules for
every unit the base puts elsewhere and for experts kept apart from their block.
`--tensor-split` is always written out as layer counts when the rig has several GPUs:
llama.cpp's default split follows the free memory *at launch*, which need not be what the
plan saw. The first matching `-ot` rule wins (llama-model.cpp, create_tensor), so expert
rules come before layer rules.

llama.cpp keeps each layer's KV cache on the device the base rule gives it
(llama-kv-cache.cpp: `model.dev_layer(il)`), not where `-ot` moves its weights; the base
is chosen to need as few overrides as possible, the command notes any KV that stays, and
`placement.device_loads` counts that KV where it stays.

Engines that cannot express a placement get an explanation, never an approximate command.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NamedTuple

from rigspark_gui.core.errors import InvalidPlacementError
from rigspark_gui.core.launch.cluster import rpc_launch
from rigspark_gui.core.model import Geometry, KvCacheType, ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    INPUT,
    OUTPUT,
    Placement,
    auto_place,
    gpu_device,
    llama_base,
)
from rigspark_gui.core.rig import Rig, Vendor
from rigspark_gui.core.settings import DEFAULT_UBATCH, PlanSettings

# vLLM's default; the command raises it only when the placement needs more.
VLLM_DEFAULT_GPU_UTIL = 0.90
VLLM_MAX_GPU_UTIL = 0.98
_EXPERT_TENSOR = "ffn_up_exps.weight"  # a representative routed-expert tensor name
_DENSE_TENSOR = "attn_norm.weight"  # every block has one
_OUTPUT_TENSOR = "output.weight"
_BUFT_RE = re.compile(r"^(CUDA|ROCm|Vulkan|SYCL|MTL)(\d+)$")
# Ollama's OLLAMA_KV_CACHE_TYPE and koboldcpp's --quantkv know these three only.
_OLLAMA_KV = (KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q4_0)
_KOBOLD_QUANTKV = {KvCacheType.F16: 0, KvCacheType.Q8_0: 1, KvCacheType.Q4_0: 2}


class Engine(StrEnum):
    LLAMA_CPP = "llama.cpp"
    KOBOLDCPP = "koboldcpp"
    OLLAMA = "ollama"
    LM_STUDIO = "lm-studio"
    VLLM = "vllm"

    @property
    def label(self) -> str:
        return {
            Engine.LLAMA_CPP: "llama.cpp (llama-server)",
            Engine.KOBOLDCPP: "koboldcpp",
            Engine.OLLAMA: "Ollama",
            Engine.LM_STUDIO: "LM Studio (lms)",
            Engine.VLLM: "vLLM",
        }[self]


@dataclass(frozen=True, slots=True, kw_only=True)
class Override:
    """One `-ot PATTERN=BUFFER` rule: tensors whose name matches go to that buffer."""

    pattern: str
    buffer: str

    @property
    def arg(self) -> str:
        return f"{self.pattern}={self.buffer}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchCommand:
    engine: Engine
    # False: `explanation` says why no command is given
    supported: bool
    # the main command, unquoted
    argv: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # what to copy: shell lines (and a Modelfile for Ollama)
    text: str
    explanation: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaLayout:
    """A placement in llama.cpp's terms: base rule plus tensor overrides."""

    ngl: int
    tensor_split: tuple[int, ...] | None
    overrides: tuple[Override, ...]
    # (unit, device) whose KV llama.cpp keeps on the base device
    kv_stays: tuple[tuple[str, str], ...] = ()


# ---------------------------------------------------------------- device names


def buffer_prefix(rig: Rig, gpu_backend: str | None = None) -> str:
    """llama.cpp's buffer-type prefix for the rig's GPUs (CUDA0, ROCm0, Vulkan0, SYCL0)."""
    if gpu_backend:
        return gpu_backend
    vendors = {g.vendor for g in rig.gpus}
    if vendors == {Vendor.NVIDIA}:
        return "CUDA"
    if vendors == {Vendor.AMD}:
        return "ROCm"
    if vendors == {Vendor.APPLE}:
        return "MTL"
    if vendors == {Vendor.INTEL}:
        return "SYCL"
    return "Vulkan"  # mixed vendors: only the Vulkan build sees them all


def buffer_name(device: str, prefix: str) -> str:
    if device == CPU:
        return "CPU"
    return f"{prefix}{int(device.split(':')[1])}"


def device_of_buffer(name: str) -> str:
    """The placement device a buffer name addresses (`CPU`, `CUDA1` -> gpu:1, `Metal`)."""
    if name.upper() == "CPU":
        return CPU
    if name == "Metal":
        return gpu_device(0)
    m = _BUFT_RE.match(name)
    if m is None:
        raise InvalidPlacementError(f"unknown llama.cpp buffer type {name!r}")
    return gpu_device(int(m.group(2)))


# ---------------------------------------------------------------- placement <-> llama.cpp


def _slot_devices(placement: Placement) -> list[str]:
    return [u.device for u in placement.units if u.unit != INPUT]


def _layer_pattern(layers: Sequence[int], suffix: str = "") -> str:
    alt = "|".join(str(il) for il in layers)
    body = alt if len(layers) == 1 else f"({alt})"
    return rf"^blk\.{body}\.{suffix}"


def llama_layout(placement: Placement) -> LlamaLayout:
    """The `-ngl`, `--tensor-split` and `-ot` rules that give exactly `placement`."""
    inp = placement.unit(INPUT)
    if inp.device != CPU:
        raise InvalidPlacementError("llama.cpp keeps the input embedding on the CPU")
    base, start, counts = llama_base(placement)
    n_slots = len(base)
    ngl = 0 if not any(counts) else n_slots - start
    split = tuple(counts) if len(counts) > 1 and any(counts) else None

    expert_rules: dict[str, list[int]] = {}
    layer_rules: dict[str, list[int]] = {}
    kv_stays: list[tuple[str, str]] = []
    output_rule: str | None = None
    for u in placement.units:
        if u.unit == INPUT:
            continue
        if u.unit == OUTPUT:
            if u.device != base[-1]:
                output_rule = u.device
            continue
        il = u.index
        if u.experts_device is not None and u.experts_device != u.device:
            expert_rules.setdefault(u.experts_device, []).append(il)
        if u.device != base[il]:
            layer_rules.setdefault(u.device, []).append(il)
            if u.has_attention:
                kv_stays.append((u.unit, base[il]))
    overrides: list[Override] = []
    for dev, layers in sorted(expert_rules.items()):
        overrides.append(Override(pattern=_layer_pattern(layers, "ffn_.*_exps\\."), buffer=dev))
    for dev, layers in sorted(layer_rules.items()):
        overrides.append(Override(pattern=_layer_pattern(layers), buffer=dev))
    if output_rule is not None:
        overrides.append(Override(pattern="^output", buffer=output_rule))
    return LlamaLayout(
        ngl=ngl, tensor_split=split, overrides=tuple(overrides), kv_stays=tuple(kv_stays)
    )


# llama.cpp counts every GPU its backend sees: an unused one still gets a context, and
# with two seen it turns on pipeline parallelism (4 input copies per device) even when
# the split gives one of them nothing. Commands show llama.cpp only the GPUs they use.
_VISIBLE_ENV = {"CUDA": "CUDA_VISIBLE_DEVICES", "ROCm": "HIP_VISIBLE_DEVICES"}


def visible_gpus(placement: Placement, rig: Rig, prefix: str) -> list[int] | None:
    """Rig indices of the GPUs a llama.cpp command shows (maybe none), or None for all."""
    used = sorted(
        {
            int(d.split(":")[1])
            for u in placement.units
            for d in (u.device, u.experts_device)
            if d is not None and d != CPU
        }
    )
    if prefix not in _VISIBLE_ENV or not rig.gpus or len(used) == len(rig.gpus):
        return None
    # none for a CPU-only placement: llama.cpp would otherwise run large batches on a
    # GPU it can see, with a compute buffer there that the plan does not count
    return used


def _local(device: str, visible: Sequence[int] | None) -> str:
    """A placement device as the backend numbers it when only `visible` GPUs are shown."""
    if device == CPU or visible is None:
        return device
    return gpu_device(visible.index(int(device.split(":")[1])))


def _named(
    layout: LlamaLayout, prefix: str, visible: Sequence[int] | None = None
) -> tuple[Override, ...]:
    """Overrides carry placement devices until here; llama.cpp wants buffer names."""
    return tuple(
        Override(pattern=o.pattern, buffer=buffer_name(_local(o.buffer, visible), prefix))
        for o in layout.overrides
    )


class _Devices(NamedTuple):
    """How a llama.cpp-family command addresses the rig's GPUs."""

    split: tuple[int, ...] | None  # --tensor-split over the GPUs shown
    overrides: tuple[Override, ...]  # -ot rules with buffer names as the backend sees them
    env: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]


def _devices(
    placement: Placement, layout: LlamaLayout, rig: Rig, prefix: str, buffers: str
) -> _Devices:
    """Show llama.cpp only the GPUs the placement uses; number the split and the -ot
    buffers (named with the `buffers` prefix) as its backend then sees them."""
    visible = visible_gpus(placement, rig, prefix)
    split = layout.tensor_split
    if split is not None and visible is not None:
        split = tuple(split[i] for i in visible) if len(visible) > 1 else None
    env = list(_cuda_env(rig, prefix))
    notes = list(_kv_note(layout))
    if visible is not None:
        env.append((_VISIBLE_ENV[prefix], ",".join(str(i) for i in visible)))
        if not visible:
            notes.append(
                "the GPUs are hidden: in sight of one, llama.cpp runs prompt batches on it "
                "(faster prefill, but a GPU compute buffer this plan does not count)"
            )
    return _Devices(split, _named(layout, buffers, visible), tuple(env), tuple(notes))


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
            overrides.append(Override(pattern=r"\.ffn_(up|down|gate)_exps", buffer="CPU"))
        elif flag in ("--n-cpu-moe", "-ncmoe"):
            n = int(inline if eq else value())
            for il in range(n):
                overrides.append(
                    Override(pattern=rf"blk\.{il}\.ffn_(up|down|gate)_exps", buffer="CPU")
                )
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


def visible_from_env(env: Sequence[tuple[str, str]]) -> list[int] | None:
    """Rig GPU indices a CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES setting shows."""
    for key, value in env:
        if key in _VISIBLE_ENV.values():
            return [int(x) for x in value.split(",") if x.strip()]
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
            m = _BUFT_RE.match(o.buffer)
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


# ---------------------------------------------------------------- commands


def default_model_file(spec: ModelSpec, quant: str) -> str:
    """The file a command loads: an imported file's own path, else the name a download
    of this quantization would have."""
    if spec.imported and spec.source.lower().endswith(".gguf"):
        return spec.source
    return f"{spec.id}-{quant}.gguf"


def _hf_repo(spec: ModelSpec) -> str:
    """owner/name from a catalog source like `owner/name/config.json`, else the id."""
    m = re.fullmatch(r"([\w.-]+/[\w.-]+)/config\.json", spec.source)
    return m.group(1) if m else spec.id


def _shell(env: Sequence[tuple[str, str]], argv: Sequence[str]) -> str:
    pre = " ".join(f"{k}={shlex.quote(v)}" for k, v in env)
    cmd = shlex.join(argv)
    return f"{pre} {cmd}" if pre else cmd


def _accept(
    engine: Engine,
    argv: Sequence[str],
    env: Sequence[tuple[str, str]],
    notes: Sequence[str],
) -> LaunchCommand:
    return LaunchCommand(
        engine=engine,
        supported=True,
        argv=tuple(argv),
        env=tuple(env),
        text=_shell(env, argv),
        notes=tuple(notes),
    )


def _refuse(engine: Engine, why: str) -> LaunchCommand:
    return LaunchCommand(
        engine=engine,
        supported=False,
        text=f"# {engine.label} cannot run this placement: {why}",
        explanation=why,
    )


def _kv_note(layout: LlamaLayout) -> tuple[str, ...]:
    if not layout.kv_stays:
        return ()
    moved = ", ".join(f"{u} (KV on {d})" for u, d in layout.kv_stays[:6])
    more = f" and {len(layout.kv_stays) - 6} more" if len(layout.kv_stays) > 6 else ""
    return (
        "llama.cpp keeps the KV cache of layers moved with -ot on the device -ngl/"
        f"--tensor-split gives them, and the loads count it there: {moved}{more}",
    )


def _cuda_env(rig: Rig, prefix: str) -> tuple[tuple[str, str], ...]:
    # CUDA numbers GPUs fastest-first by default; NVML (our indices) uses PCI bus order.
    if prefix == "CUDA" and len(rig.gpus) > 1:
        return (("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),)
    return ()


def _per_sequence_context(s: PlanSettings) -> int:
    return max(s.context // s.parallel, 1)


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
        return _refuse(engine, "the fp8 KV cache is a vLLM option; llama.cpp has no such type")
    if s.kv_v.quantized and not s.flash_attn:
        return _refuse(engine, f"a quantized V cache ({s.kv_v.value}) needs flash attention")
    try:
        layout = llama_layout(placement)
    except InvalidPlacementError as err:
        return _refuse(engine, str(err))
    prefix = buffer_prefix(rig, gpu_backend)
    dev = _devices(placement, layout, rig, prefix, prefix)
    argv = ["llama-server", "-m", model_path or default_model_file(spec, quant)]
    argv += ["-c", str(s.context), "-ngl", str(layout.ngl)]
    if dev.split is not None:
        argv += ["--tensor-split", ",".join(str(c) for c in dev.split)]
    for o in dev.overrides:
        argv += ["-ot", o.arg]
    argv += ["-ctk", s.kv_k.value, "-ctv", s.kv_v.value]
    argv += ["-fa", "on" if s.flash_attn else "off", "-np", str(s.parallel)]
    if s.n_ubatch != DEFAULT_UBATCH:
        argv += ["-ub", str(s.n_ubatch)]
    if s.swa_full:
        argv.append("--swa-full")
    notes = list(dev.notes)
    if prefix == "MTL":
        notes.append("older llama.cpp builds name the Apple GPU buffer 'Metal' instead of MTL0")
    return _accept(engine, argv, dev.env, notes)


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
        return _refuse(
            engine,
            f"--quantkv sets one type for K and V, f16, q8_0 or q4_0 only "
            f"(this plan uses K {s.kv_k.value}, V {s.kv_v.value})",
        )
    if s.kv_k.quantized and not s.flash_attn:
        return _refuse(engine, "--quantkv needs --flashattention")
    if s.parallel > 1:
        return _refuse(engine, "koboldcpp serves one sequence per context (no -np)")
    try:
        layout = llama_layout(placement)
    except InvalidPlacementError as err:
        return _refuse(engine, str(err))
    prefix = buffer_prefix(rig, gpu_backend)
    dev = _devices(placement, layout, rig, prefix, "Vulkan" if prefix == "SYCL" else prefix)
    argv = ["koboldcpp", "--model", model_path or default_model_file(spec, quant)]
    if prefix in ("CUDA", "ROCm"):
        argv.append("--usecublas")
    elif prefix == "Vulkan" or prefix == "SYCL":
        argv.append("--usevulkan")
    argv += ["--contextsize", str(s.context), "--gpulayers", str(layout.ngl)]
    if dev.split is not None:
        argv += ["--tensor_split", *(str(c) for c in dev.split)]
    if dev.overrides:
        argv += ["--overridetensors", ",".join(o.arg for o in dev.overrides)]
    if s.flash_attn:
        argv.append("--flashattention")
    if s.kv_k is not KvCacheType.F16:
        argv += ["--quantkv", str(_KOBOLD_QUANTKV[s.kv_k])]
    return _accept(engine, argv, dev.env, dev.notes)


def _simple_layout(engine: Engine, placement: Placement) -> LlamaLayout | LaunchCommand:
    """The layout when it needs no -ot rule, else a refusal naming the first rule."""
    try:
        layout = llama_layout(placement)
    except InvalidPlacementError as err:
        return _refuse(engine, str(err))
    if layout.overrides:
        return _refuse(
            engine,
            "this placement needs llama.cpp tensor overrides (-ot: hand-moved layers or "
            f"experts on another device), which {engine.label} cannot express; use llama.cpp "
            "or koboldcpp, or Auto-place",
        )
    return layout


def _used_gpus(placement: Placement) -> list[str]:
    return sorted({d for d in _slot_devices(placement) if d != CPU})


def _split_note(engine: Engine, placement: Placement) -> tuple[str, ...]:
    if len(_used_gpus(placement)) > 1:
        return (
            f"{engine.label} chooses its own split across GPUs; per-GPU loads may differ "
            "from this placement (no custom --tensor-split)",
        )
    return ()


def _safe_tag(text: str) -> str:
    tag = re.sub(r"[^a-z0-9._-]+", "-", text.lower())
    tag = re.sub(r"-{2,}", "-", tag).strip("-._")
    return tag[:80] or "model"


def ollama_command(
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
    *,
    model_path: str | None = None,
) -> LaunchCommand:
    engine = Engine.OLLAMA
    if s.kv_k != s.kv_v:
        return _refuse(
            engine,
            f"OLLAMA_KV_CACHE_TYPE applies one type to K and V (this plan uses K "
            f"{s.kv_k.value}, V {s.kv_v.value})",
        )
    if s.kv_k not in _OLLAMA_KV:
        return _refuse(engine, f"OLLAMA_KV_CACHE_TYPE knows f16, q8_0 and q4_0, not {s.kv_k.value}")
    if s.kv_k.quantized and not s.flash_attn:
        return _refuse(engine, "a quantized KV cache needs OLLAMA_FLASH_ATTENTION=1")
    layout = _simple_layout(engine, placement)
    if isinstance(layout, LaunchCommand):
        return layout
    # a model already in Ollama's store is built from its tag, not from a file
    path = spec.ollama_tag or model_path or default_model_file(spec, quant)
    if any(ord(c) < 32 for c in path):
        return _refuse(engine, "the model path holds control characters")
    tag = _safe_tag(f"{spec.id.removeprefix('file:')}-{quant}")
    modelfile = [
        f"FROM {path}",
        f"PARAMETER num_gpu {layout.ngl}",
        f"PARAMETER num_ctx {_per_sequence_context(s)}",
    ]
    env: list[tuple[str, str]] = [
        ("OLLAMA_FLASH_ATTENTION", "1" if s.flash_attn else "0"),
        ("OLLAMA_KV_CACHE_TYPE", s.kv_k.value),
        ("OLLAMA_NUM_PARALLEL", str(s.parallel)),
    ]
    env += _cuda_env(rig, buffer_prefix(rig))
    argv = ("ollama", "create", tag, "-f", "Modelfile")
    text = "\n".join(
        [
            "# Modelfile",
            *modelfile,
            "",
            "# server environment, then create and run",
            _shell(env, ["ollama", "serve"]),
            shlex.join(argv),
            shlex.join(["ollama", "run", tag]),
        ]
    )
    notes = (
        "Ollama applies one KV type to K and V and cannot express -ot rules or a custom split",
        *_split_note(engine, placement),
    )
    return LaunchCommand(
        engine=engine, supported=True, argv=argv, env=tuple(env), text=text, notes=notes
    )


def lm_studio_command(
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
) -> LaunchCommand:
    engine = Engine.LM_STUDIO
    layout = _simple_layout(engine, placement)
    if isinstance(layout, LaunchCommand):
        return layout
    n_slots = spec.geometry.n_layer + 1
    if layout.ngl >= n_slots:
        gpu = "max"
    elif layout.ngl == 0:
        gpu = "off"
    else:
        gpu = f"{layout.ngl / n_slots:.4f}"
    if gpu not in ("max", "off") and round(float(gpu) * n_slots) != layout.ngl:
        return _refuse(engine, f"--gpu takes a fraction that cannot name {layout.ngl} layers")
    argv = ("lms", "load", spec.id, "--gpu", gpu, "--context-length", str(s.context))
    notes: list[str] = [f"load the {quant} file of this model", *_split_note(engine, placement)]
    if s.kv_k is not KvCacheType.F16 or s.kv_v is not KvCacheType.F16 or s.flash_attn:
        notes.append(
            "set flash attention and the K/V cache types in LM Studio's model settings: "
            f"K {s.kv_k.value}, V {s.kv_v.value}, flash attention "
            f"{'on' if s.flash_attn else 'off'} (lms load has no flags for them)"
        )
    if s.parallel > 1:
        notes.append("LM Studio serves requests one at a time here; -np has no lms flag")
    return LaunchCommand(
        engine=engine, supported=True, argv=argv, text=shlex.join(argv), notes=tuple(notes)
    )


def vllm_command(
    placement: Placement,
    spec: ModelSpec,
    s: PlanSettings,
    rig: Rig,
    *,
    model_path: str | None = None,
    gpu_fraction_needed: float | None = None,
) -> LaunchCommand:
    engine = Engine.VLLM
    if s.kv_k != s.kv_v or s.kv_k not in (KvCacheType.F16, KvCacheType.BF16, KvCacheType.FP8):
        return _refuse(
            engine,
            f"--kv-cache-dtype is auto (the model's f16/bf16) or fp8 for K and V together; "
            f"this plan uses K {s.kv_k.value}, V {s.kv_v.value}",
        )
    on_cpu = [u.unit for u in placement.units if u.unit != INPUT and u.device == CPU]
    experts_cpu = [u.unit for u in placement.units if u.experts_device == CPU]
    if on_cpu or experts_cpu:
        what = on_cpu or experts_cpu
        return _refuse(
            engine,
            f"vLLM cannot offload single layers or experts to the CPU ({what[0]} is there); "
            "its --cpu-offload-gb streams weights over PCIe every step instead",
        )
    try:
        layout = llama_layout(placement)
    except InvalidPlacementError as err:
        return _refuse(engine, str(err))
    if layout.overrides:
        return _refuse(
            engine, "vLLM splits layers contiguously across GPUs in order; this placement is not"
        )
    g = spec.geometry
    counts = [c for c in (layout.tensor_split or (g.n_layer + 1,)) if c > 0]
    k = len(counts)
    env: list[tuple[str, str]] = []
    even = max(counts) - min(counts) <= 1
    if k > 1 and even and g.n_head % k == 0 and g.n_head_kv % k == 0:
        tp, pp = k, 1
    else:
        tp, pp = 1, k
        if k > 1 and not even:
            # counts are slots; vLLM partitions the blocks and puts the head on the last rank
            blocks = [*counts[:-1], counts[-1] - 1]
            env.append(("VLLM_PP_LAYER_PARTITION", ",".join(str(b) for b in blocks)))
    util = VLLM_DEFAULT_GPU_UTIL
    if gpu_fraction_needed is not None:
        util = max(util, min(VLLM_MAX_GPU_UTIL, math.ceil(gpu_fraction_needed * 100) / 100))
    argv = ["vllm", "serve", model_path or _hf_repo(spec)]
    argv += ["--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp)]
    argv += ["--kv-cache-dtype", "fp8" if s.kv_k is KvCacheType.FP8 else "auto"]
    argv += ["--max-model-len", str(_per_sequence_context(s))]
    argv += ["--gpu-memory-utilization", f"{util:.2f}", "--max-num-seqs", str(s.parallel)]
    prefix = buffer_prefix(rig)
    used = [d.split(":")[1] for d in _used_gpus(placement)]
    if prefix == "CUDA" and len(used) < len(rig.gpus):
        env.append(("CUDA_VISIBLE_DEVICES", ",".join(used)))
    env += _cuda_env(rig, prefix)
    notes = ["vLLM loads the Hugging Face weights (safetensors), not the GGUF file"]
    if tp > 1:
        notes.append("tensor parallel: every GPU holds 1/k of each layer, memory per GPU as even")
    return _accept(engine, argv, env, notes)


def launch_command(
    engine: Engine,
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
    *,
    model_path: str | None = None,
    gpu_fraction_needed: float | None = None,
) -> LaunchCommand:
    """The command for one engine, or an explanation of why it cannot run `placement`."""
    if _spans_hosts(placement, rig):
        if engine is not Engine.LLAMA_CPP:
            return _refuse(
                engine, "this placement spans hosts: only llama.cpp's RPC runs layers elsewhere"
            )
        c = rpc_launch(placement, spec, quant, s, rig, model_path=model_path)
        if not c.supported:
            return _refuse(engine, c.explanation)
        return LaunchCommand(engine=engine, supported=True, text=c.text, notes=c.notes)
    if engine is Engine.LLAMA_CPP:
        return llama_server_command(placement, spec, quant, s, rig, model_path=model_path)
    if engine is Engine.KOBOLDCPP:
        return koboldcpp_command(placement, spec, quant, s, rig, model_path=model_path)
    if engine is Engine.OLLAMA:
        return ollama_command(placement, spec, quant, s, rig, model_path=model_path)
    if engine is Engine.LM_STUDIO:
        return lm_studio_command(placement, spec, quant, s, rig)
    return vllm_command(
        placement, spec, s, rig, model_path=model_path, gpu_fraction_needed=gpu_fraction_needed
    )


def _spans_hosts(placement: Placement, rig: Rig) -> bool:
    devices = {u.device for u in placement.units} | {
        u.experts_device for u in placement.units if u.experts_device is not None
    }
    return any(d != CPU and rig.gpus[int(d.split(":")[1])].host for d in devices)


def launch_commands(
    placement: Placement, spec: ModelSpec, quant: str, s: PlanSettings, rig: Rig
) -> tuple[LaunchCommand, ...]:
    return tuple(launch_command(e, placement, spec, quant, s, rig) for e in Engine)
