"""A placement in llama.cpp's terms: the buffer names of the rig's GPUs, the base `-ngl` +
`--tensor-split`, the `-ot` overrides, and which GPUs a command shows the backend.

A placement is expressed as a *base* `-ngl` + `--tensor-split` (llama.cpp's rule;
`placement.llama_base` picks the one nearest the placement) plus `-ot` rules for every
unit the base puts elsewhere and for experts kept apart from their block.
`--tensor-split` is always written out as layer counts when the rig has several GPUs:
llama.cpp's default split follows the free memory *at launch*, which need not be what the
plan saw. The first matching `-ot` rule wins (llama-model.cpp, create_tensor), so expert
rules come before layer rules.

llama.cpp keeps each layer's KV cache on the device the base rule gives it
(llama-kv-cache.cpp: `model.dev_layer(il)`), not where `-ot` moves its weights; the base
is chosen to need as few overrides as possible, the command notes any KV that stays, and
`placement.device_loads` counts that KV where it stays.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from rigspark_gui.core.errors import InvalidPlacementError
from rigspark_gui.core.launch.engine import Engine, LaunchCommand, cuda_env, refuse
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.placement import (
    CPU,
    INPUT,
    OUTPUT,
    DeviceId,
    Placement,
    cpu_moe_count,
    gpu_device,
    gpu_index,
    is_cpu_moe,
    llama_base,
)
from rigspark_gui.core.rig import Rig, Vendor

GPU_BUFFER_RE = re.compile(r"^(CUDA|ROCm|Vulkan|SYCL|MTL)(\d+)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Override:
    """One `-ot PATTERN=BUFFER` rule: tensors whose name matches go to that buffer."""

    pattern: str
    buffer: str

    @property
    def arg(self) -> str:
        return f"{self.pattern}={self.buffer}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaLayout:
    """A placement in llama.cpp's terms: base rule plus tensor overrides."""

    ngl: int
    tensor_split: tuple[int, ...] | None
    overrides: tuple[Override, ...]
    # (unit, device) whose KV llama.cpp keeps on the base device
    kv_stays: tuple[tuple[str, str], ...] = ()
    # `--cpu-moe` or `--n-cpu-moe N` when the experts kept in system memory are exactly
    # that shape (they come before the -ot rules: the first matching rule wins), and
    # the -ot rules they stand for, for engines without the flags
    moe_args: tuple[str, ...] = ()
    moe_overrides: tuple[Override, ...] = ()

    def with_moe_as_overrides(self) -> LlamaLayout:
        """The layout with its `--n-cpu-moe` written as -ot rules (koboldcpp)."""
        if not self.moe_args:
            return self
        overrides = (*self.moe_overrides, *self.overrides)
        return replace(self, overrides=overrides, moe_args=(), moe_overrides=())


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
    m = GPU_BUFFER_RE.match(name)
    if m is None:
        raise InvalidPlacementError(f"unknown llama.cpp buffer type {name!r}")
    return gpu_device(int(m.group(2)))


# ---------------------------------------------------------------- placement -> llama.cpp


def _layer_pattern(layers: Sequence[int], suffix: str = "") -> str:
    alt = "|".join(str(il) for il in layers)
    body = alt if len(layers) == 1 else f"({alt})"
    return rf"^blk\.{body}\.{suffix}"


def llama_layout(placement: Placement, g: Geometry | None = None) -> LlamaLayout:
    """The `-ngl`, `--tensor-split`, `--n-cpu-moe` and `-ot` rules that give exactly
    `placement`. `g`: the model, whose blocks without experts need no expert rule (an
    `--n-cpu-moe N` over them still says the placement)."""
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
    expert_overrides = [
        Override(pattern=_layer_pattern(layers, "ffn_.*_exps\\."), buffer=dev)
        for dev, layers in sorted(expert_rules.items())
    ]
    n_cpu_moe = cpu_moe_count(placement, g) if expert_rules else None
    moe_args: tuple[str, ...] = ()
    if n_cpu_moe:
        moe_args = ("--cpu-moe",) if is_cpu_moe(placement, g) else ("--n-cpu-moe", str(n_cpu_moe))
    else:
        overrides.extend(expert_overrides)
    for dev, layers in sorted(layer_rules.items()):
        overrides.append(Override(pattern=_layer_pattern(layers), buffer=dev))
    if output_rule is not None:
        overrides.append(Override(pattern="^output", buffer=output_rule))
    return LlamaLayout(
        ngl=ngl,
        tensor_split=split,
        overrides=tuple(overrides),
        kv_stays=tuple(kv_stays),
        moe_args=moe_args,
        moe_overrides=tuple(expert_overrides) if moe_args else (),
    )


def kv_note(layout: LlamaLayout) -> tuple[str, ...]:
    if not layout.kv_stays:
        return ()
    moved = ", ".join(f"{u} (KV on {d})" for u, d in layout.kv_stays[:6])
    more = f" and {len(layout.kv_stays) - 6} more" if len(layout.kv_stays) > 6 else ""
    return (
        "llama.cpp keeps the KV cache of layers moved with -ot on the device -ngl/"
        f"--tensor-split gives them, and the loads count it there: {moved}{more}",
    )


def simple_layout(engine: Engine, placement: Placement) -> LlamaLayout | LaunchCommand:
    """The layout when it needs no -ot rule, else a refusal naming the first rule."""
    try:
        layout = llama_layout(placement)
    except InvalidPlacementError as err:
        return refuse(engine, str(err))
    if layout.overrides or layout.moe_args:
        return refuse(
            engine,
            "this placement needs llama.cpp tensor overrides (-ot: hand-moved layers or "
            f"experts on another device), which {engine.label} cannot express; use llama.cpp "
            "or koboldcpp, or Auto-place",
        )
    return layout


# ---------------------------------------------------------------- the GPUs llama.cpp sees


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
            if d is not None and d.startswith("gpu:")
        }
    )
    return shown_gpus(used, rig, prefix)


def shown_gpus(used: Sequence[int], rig: Rig, prefix: str) -> list[int] | None:
    """Rig indices of the GPUs a command using GPUs `used` shows, or None for all."""
    if prefix not in _VISIBLE_ENV or not rig.gpus or len(used) == len(rig.gpus):
        return None
    # none for a CPU-only placement: llama.cpp would otherwise run large batches on a
    # GPU it can see, with a compute buffer there that the plan does not count
    return sorted(used)


def launch_gpus(placement: Placement | Sequence[int], rig: Rig) -> list[int] | None:
    """Rig indices of the GPUs llama-server's command for `placement` (or a path using
    the GPUs listed) shows (None: all), as `llama_server_command` sets them with the
    rig's own build."""
    if isinstance(placement, Placement):
        return visible_gpus(placement, rig, buffer_prefix(rig))
    return shown_gpus(placement, rig, buffer_prefix(rig))


def rpc_split(placement: Placement) -> tuple[list[str], list[int]]:
    """The devices an RPC command gives the model, in llama.cpp's order (other hosts'
    RPC devices first, then this machine's GPUs; each one a run of layers), and the
    layer count on each: its --tensor-split, written where there are several."""
    order = [d for d in placement.devices if d != CPU]
    slots = [u.device for u in placement.units if u.unit != INPUT]
    used = [d for d in order if d in slots]
    return used, [slots.count(d) for d in used]


def launch_split(placement: Placement, rig: Rig) -> tuple[list[DeviceId], tuple[int, ...] | None]:
    """The devices llama-server's command for `placement` shows (rig GPU numbers, all
    local ones when it shows all) and its --tensor-split over them (None: the default
    split). A draft model inherits both from the target's command
    (`common_base_params_to_speculative` copies the target's params, b11434), so it
    lands where this says. A placement on other hosts runs as the RPC command
    (cluster.py `rpc_launch`), which shows llama.cpp exactly the devices it uses, other
    hosts' first (their GPU numbers, or an `rpc-cpu:` device for a host's CPU)."""
    used, counts = rpc_split(placement)
    ids: list[DeviceId] = [d if (i := gpu_index(d)) is None else i for d in used]
    if any(isinstance(i, str) or rig.gpus[i].host for i in ids):
        return ids, tuple(counts) if len(used) > 1 else None
    prefix = buffer_prefix(rig)
    layout = llama_layout(placement)
    visible = visible_gpus(placement, rig, prefix)
    split = llama_devices(placement, layout, rig, prefix, prefix).split
    local: list[DeviceId] = list(rig.local_gpus if visible is None else visible)
    if split is not None and visible is None:
        # a build that hides no GPU (Vulkan, SYCL, Metal): the split counts every rig
        # GPU by its number, other hosts' too; the local ones' entries are theirs
        picked = tuple(split[i] if i < len(split) else 0 for i in rig.local_gpus)
        split = picked if len(picked) > 1 and any(picked) else None
    return local, split


def visible_from_env(env: Sequence[tuple[str, str]]) -> list[int] | None:
    """Rig GPU indices a CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES setting shows."""
    for key, value in env:
        if key in _VISIBLE_ENV.values():
            return [int(x) for x in value.split(",") if x.strip()]
    return None


def _local(device: str, visible: Sequence[int] | None) -> str:
    """A placement device as the backend numbers it when only `visible` GPUs are shown."""
    if not device.startswith("gpu:") or visible is None:
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


class LlamaDevices(NamedTuple):
    """How a llama.cpp-family command addresses the rig's GPUs."""

    split: tuple[int, ...] | None  # --tensor-split over the GPUs shown
    overrides: tuple[Override, ...]  # -ot rules with buffer names as the backend sees them
    env: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]
    # `--device` keeping the model to its GPUs when others are shown for a draft alone
    device_args: tuple[str, ...] = ()
    # rig GPUs the backend sees, in its order (None: all)
    shown: tuple[int, ...] | None = None
    # rig GPUs `--device` gives the model (None: every one shown); a draft without
    # -devd inherits this list
    target: tuple[int, ...] | None = None


def llama_devices(
    placement: Placement,
    layout: LlamaLayout,
    rig: Rig,
    prefix: str,
    buffers: str,
    also_show: Sequence[int] = (),
) -> LlamaDevices:
    """Show llama.cpp only the GPUs the placement uses; number the split and the -ot
    buffers (named with the `buffers` prefix) as its backend then sees them. GPUs in
    `also_show` (a draft's -devd) are shown too, the model kept off them by `--device`
    (common_base_params_to_speculative: -devd replaces the draft's devices only)."""
    visible = visible_gpus(placement, rig, prefix)
    split = layout.tensor_split
    if split is not None and visible is not None:
        split = tuple(split[i] for i in visible) if len(visible) > 1 else None
    shown = visible
    device_args: tuple[str, ...] = ()
    if visible is not None and any(i not in visible for i in also_show):
        shown = sorted({*visible, *also_show})
        names = [buffer_name(gpu_device(shown.index(i)), prefix) for i in visible]
        device_args = ("-dev", ",".join(names) or "none")
    env = list(cuda_env(rig, prefix))
    notes = list(kv_note(layout))
    if shown is not None:
        env.append((_VISIBLE_ENV[prefix], ",".join(str(i) for i in shown)))
        if not shown:
            notes.append(
                "the GPUs are hidden: in sight of one, llama.cpp runs prompt batches on it "
                "(faster prefill, but a GPU compute buffer this plan does not count)"
            )
    return LlamaDevices(
        split,
        _named(layout, buffers, shown),
        tuple(env),
        tuple(notes),
        device_args,
        None if shown is None else tuple(shown),
        tuple(visible) if device_args and visible is not None else None,
    )
