"""Per-layer device placement: an execution plan with one entry per placeable unit.

Units are the input embedding, each block and the output head (the idea of `graph.go`'s
ExecutionPlan). `auto_place` reproduces llama.cpp's `-ngl` / `--tensor-split` rule
(src/llama-model.cpp, load_tensors): n_layer + 1 slots, the head being the last; slots
from n_layer + 1 - ngl upward go to the GPUs by cumulative split fractions (default:
proportional to free memory); the input embedding always stays on the CPU.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.errors import InvalidPlacementError
from rigspark_gui.core.memory import (
    RepackBytes,
    WeightsLayout,
    device_compute_bytes,
    host_compute_bytes,
    kv_bytes_per_layer,
    output_buffer_bytes,
    pipeline_copies,
)
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.placement.devices import device_capacity, device_name
from rigspark_gui.core.placement.state import split_state
from rigspark_gui.core.placement.verdict import (
    CPU,
    Verdict,
    load_verdict,
    shortfall_bytes,
    unified_pool,
)
from rigspark_gui.core.rig import Rig, Vendor, gpu_index, rpc_cpu_device, rpc_cpu_host
from rigspark_gui.core.settings import KV_PAD, Backend, PlanSettings

INPUT = "input"
OUTPUT = "output"


def gpu_device(index: int) -> str:
    return f"gpu:{index}"


DeviceId = int | str
"""A GPU by its rig index, or a device by name (`rpc-cpu:HOST`: another host's CPU)."""


def as_device(gid: DeviceId) -> str:
    return gpu_device(gid) if isinstance(gid, int) else gid


def block_id(layer: int) -> str:
    return f"blk.{layer}"


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitPlacement:
    # input, blk.N or output
    unit: str
    # slot order: input -1, blocks 0..n-1, output n
    index: int
    has_attention: bool
    has_mlp: bool
    device: str
    # where routed experts live when not with the block
    experts_device: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Which device holds each unit, for one request budget (graph.go's ExecutionPlan)."""

    max_context: int
    kv_block_size: int
    # cpu first, then gpu:N
    devices: tuple[str, ...]
    units: tuple[UnitPlacement, ...]

    def unit(self, unit_id: str) -> UnitPlacement:
        for u in self.units:
            if u.unit == unit_id:
                return u
        raise InvalidPlacementError(f"no unit {unit_id!r} in this placement")

    @property
    def blocks(self) -> tuple[UnitPlacement, ...]:
        return tuple(u for u in self.units if u.unit not in (INPUT, OUTPUT))

    @property
    def gpu_slots(self) -> int:
        """llama.cpp's -ngl value when the placement is llama.cpp-shaped."""
        return sum(1 for u in self.units if u.unit != INPUT and u.device != CPU)


def unit_label(unit: str) -> str:
    """A unit in words, as every surface shows it ("layer 12", not llama.cpp's blk.12)."""
    if unit == INPUT:
        return "input embedding"
    if unit == OUTPUT:
        return "output head"
    return f"layer {unit.removeprefix('blk.')}"


def units_span(units: Sequence[str]) -> str:
    """Runs of units in words: "input embedding, layers 0–39, output head"."""
    parts: list[str] = []
    run: list[int] = []

    def close() -> None:
        if run:
            parts.append(f"layer {run[0]}" if len(run) == 1 else f"layers {run[0]}–{run[-1]}")
            run.clear()

    for u in units:
        n = u.removeprefix("blk.")
        if u.startswith("blk.") and n.isdigit():
            if run and int(n) != run[-1] + 1:
                close()
            run.append(int(n))
        else:
            close()
            parts.append(unit_label(u))
    close()
    return ", ".join(parts) if parts else "—"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceLoad:
    device: str
    name: str
    units: tuple[str, ...]
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    reserve_bytes: int
    total_bytes: int
    capacity_bytes: int
    verdict: Verdict
    # copies of its inputs llama.cpp keeps for pipeline parallelism (counted in compute_bytes); 1
    # when it is off
    input_copies: int = 1
    state_bytes: int = 0  # hybrid layers' recurrent state (f32), apart from kv_bytes
    projector_bytes: int = 0  # the mmproj's weights and compute buffer (core/plan/projector.py)
    draft_bytes: int = 0  # a draft model's weights, KV and compute here (core/plan/draft.py)

    @property
    def required_bytes(self) -> int:
        kv = self.kv_bytes + self.state_bytes
        beside = self.projector_bytes + self.draft_bytes
        return self.weights_bytes + kv + self.compute_bytes + beside

    @property
    def usable_bytes(self) -> int:
        return max(self.capacity_bytes - self.reserve_bytes, 0)

    @property
    def over_bytes(self) -> int:
        """Usable memory it lacks under the fit rule (0 unless its verdict is over): what
        the plan's "needs N more usable memory" says for the same device."""
        return shortfall_bytes(self.required_bytes, self.usable_bytes)


def rig_devices(rig: Rig) -> tuple[str, ...]:
    """cpu, then the GPUs in the order llama.cpp lists them: other hosts' (its RPC
    devices, host by host) before this machine's, so layers fill them first and the head
    stays here (llama.cpp src/llama.cpp: RPC servers go at the front of the list)."""
    order = {name: i for i, name in enumerate(rig.host_names[1:])}
    remote: list[tuple[int, int, str]] = [
        (order.get(g.host, len(order)), i, gpu_device(i)) for i, g in enumerate(rig.gpus) if g.host
    ]
    # a host without a GPU serves its CPU with rpc-server: one more RPC device
    remote += [(order[h.name], -1, rpc_cpu_device(h.name)) for h in rig.cpu_hosts]
    local = [gpu_device(i) for i, g in enumerate(rig.gpus) if not g.host]
    return (CPU, *(d for _, _, d in sorted(remote)), *local)


def llama_gpu_order(rig: Rig) -> list[int]:
    """GPU numbers in the order llama.cpp lists them (`rig_devices` without the CPU and
    other hosts' CPUs)."""
    return [i for d in rig_devices(rig) if (i := gpu_index(d)) is not None]


def _units(g: Geometry, devices: Sequence[str]) -> tuple[UnitPlacement, ...]:
    n = g.n_layer
    out = [UnitPlacement(unit=INPUT, index=-1, has_attention=False, has_mlp=False, device=CPU)]
    for il in range(n):
        out.append(
            UnitPlacement(
                unit=block_id(il),
                index=il,
                has_attention=g.kv_heads(il) > 0 or g.is_mla,
                has_mlp=bool(g.n_ff or g.is_moe_layer(il)),
                device=devices[il],
            )
        )
    out.append(
        UnitPlacement(unit=OUTPUT, index=n, has_attention=False, has_mlp=False, device=devices[n])
    )
    return tuple(out)


def _f32(x: float) -> float:
    """Round to float32: llama.cpp computes the split points in `float`."""
    return float(struct.unpack("f", struct.pack("f", x))[0])


def _check_split(ngl: int, split: Sequence[float], gpu_ids: Sequence[DeviceId]) -> None:
    if ngl < 0:
        raise InvalidPlacementError("-ngl cannot be negative")
    if gpu_ids and len(split) != len(gpu_ids):
        raise InvalidPlacementError(
            f"--tensor-split lists {len(split)} values for {len(gpu_ids)} GPUs"
        )
    if any(x < 0 for x in split) or (gpu_ids and sum(split) <= 0):
        raise InvalidPlacementError("--tensor-split needs non-negative values with a positive sum")


def llama_cpp_ranges(
    n_layer: int, ngl: int, split: Sequence[float], gpu_ids: Sequence[DeviceId]
) -> list[tuple[str, int, int]]:
    """(device, first slot, end slot) runs of llama.cpp's -ngl/--tensor-split rule; see
    `_llama_cpp_ranges`. Cached: planning asks for the same split many times."""
    return list(_llama_cpp_ranges(n_layer, ngl, tuple(split), tuple(gpu_ids)))


@lru_cache(maxsize=8192)
def _llama_cpp_ranges(
    n_layer: int, ngl: int, split: tuple[float, ...], gpu_ids: tuple[DeviceId, ...]
) -> tuple[tuple[str, int, int], ...]:
    """(device, first slot, end slot) runs of llama.cpp's -ngl/--tensor-split rule over the
    n_layer + 1 slots (the head is slot n_layer), in slot order, empty runs left out.

    A slot at fraction x = (i - start) / active goes to the GPU whose cumulative split
    bound is the first one above x (std::upper_bound), in float32 as llama.cpp does."""
    _check_split(ngl, split, gpu_ids)
    slots = n_layer + 1
    start = max(slots - ngl, 0)
    active = min(ngl, slots) if gpu_ids else 0
    if active == 0:
        return ((CPU, 0, slots),)
    out: list[tuple[str, int, int]] = []
    if start > 0:
        out.append((CPU, 0, start))
    acc = 0.0
    cumulative = []
    for x in split:
        acc = _f32(acc + _f32(x))
        cumulative.append(acc)
    bounds = [_f32(c / acc) for c in cumulative]
    end = start + active
    lo = start
    last = len(gpu_ids) - 1
    for k, gid in enumerate(gpu_ids):
        if k == last:
            hi = end  # upper_bound past every bound is clamped to the last device
        else:
            # first slot whose fraction reaches bounds[k]
            hi = min(end, max(lo, start + int(bounds[k] * active) - 1))
            while hi > lo and _f32((hi - 1 - start) / active) >= bounds[k]:
                hi -= 1
            while hi < end and _f32((hi - start) / active) < bounds[k]:
                hi += 1
        if hi > lo:
            out.append((as_device(gid), lo, hi))
        lo = hi
    return tuple(out)


def llama_cpp_slots(
    n_layer: int, ngl: int, split: Sequence[float], gpu_ids: Sequence[DeviceId]
) -> list[str]:
    """Device of each of the n_layer + 1 slots under llama.cpp's -ngl/--tensor-split rule."""
    out: list[str] = []
    for device, lo, hi in llama_cpp_ranges(n_layer, ngl, split, gpu_ids):
        out.extend([device] * (hi - lo))
    return out


class LlamaBase(NamedTuple):
    """The -ngl/--tensor-split layout nearest to a placement: its device for each of the
    n_layer + 1 slots, the first offloaded slot, and the slots each GPU gets (indexed by
    GPU number)."""

    slots: list[str]
    start: int
    counts: list[int]


def _base_from(devices: Sequence[str], start: int, order: Sequence[str]) -> LlamaBase:
    """`order`: the devices in llama.cpp's order (the placement's device list)."""
    gpus = [i for d in order if (i := gpu_index(d)) is not None]
    counts = [0] * (max(gpus) + 1 if gpus else 0)
    on: dict[str, int] = dict.fromkeys(order, 0)
    for d in devices[start:]:
        if d != CPU:
            on[d] = on.get(d, 0) + 1
            i = gpu_index(d)
            if i is not None:
                counts[i] += 1
    n_slots = len(devices)
    if not any(on.values()):
        return LlamaBase([CPU] * n_slots, start, counts)
    split = [float(on[d]) for d in order]
    base = llama_cpp_slots(n_slots - 1, n_slots - start, split, order)
    return LlamaBase(base, start, counts)


def llama_base(placement: Placement) -> LlamaBase:
    """The -ngl/--tensor-split base that differs from `placement` in the fewest slots
    (launch commands move the rest with -ot). Starting the offloaded range where a GPU
    run begins is where differences are fewest."""
    devices = [u.device for u in placement.units if u.unit != INPUT]
    order = [d for d in placement.devices if d != CPU]
    n_slots = len(devices)
    starts = [i for i, d in enumerate(devices) if d != CPU and (i == 0 or devices[i - 1] == CPU)]
    best: tuple[int, LlamaBase] | None = None
    for start in [*starts, n_slots]:
        base = _base_from(devices, start, order)
        misses = sum(1 for a, b in zip(base.slots, devices, strict=True) if a != b)
        if best is None or misses < best[0]:
            best = (misses, base)
    assert best is not None
    return best[1]


def kv_devices(
    placement: Placement, s: PlanSettings, base: Sequence[str] | None = None
) -> list[str]:
    """The device holding each block's KV cache. llama.cpp allocates a layer's cache on the device
    -ngl/--tensor-split gives the layer (llama-kv-cache.cpp: `model.dev_layer(il)`), not where -ot
    moves its weights: a block dragged off its base device leaves its KV behind. Other engines keep
    it with the block. `base`: `llama_base(placement).slots`, when the caller has it already."""
    blocks = placement.blocks
    inp = next((u for u in placement.units if u.unit == INPUT), None)
    if not s.backend.ggml_based or inp is None or inp.device != CPU:
        return [u.device for u in blocks]
    if base is None:
        base = llama_base(placement).slots
    return [base[u.index] if u.has_attention else u.device for u in blocks]


def input_copies(rig: Rig, used: Iterable[str], all_on_gpus: bool, s: PlanSettings) -> int:
    """compute_buffer.pipeline_copies for a placement on the GPUs `used`. Only CUDA and
    HIP builds have the async compute and events it needs; the launch commands show
    llama.cpp the GPUs they use and no others (launch.visible_gpus), so those are the
    GPUs it sees."""
    vendors = {g.vendor for g in rig.gpus if not g.unified}
    if vendors not in ({Vendor.NVIDIA}, {Vendor.AMD}):
        return 1
    return pipeline_copies(sum(1 for d in set(used) if d != CPU), all_on_gpus, s)


def auto_place(
    g: Geometry,
    rig: Rig,
    s: PlanSettings,
    *,
    ngl: int | None = None,
    tensor_split: Sequence[float] | None = None,
    gpu_ids: Sequence[DeviceId] | None = None,
) -> Placement:
    """llama.cpp's placement: ngl None offloads every slot; split defaults to free memory.
    Without `gpu_ids`, every GPU in llama.cpp's order (other hosts' first); a given
    `tensor_split` lists them in that order, as --tensor-split does."""
    ids: list[DeviceId] = list(llama_gpu_order(rig) if gpu_ids is None else gpu_ids)
    named = rig_devices(rig)
    for i in ids:
        if isinstance(i, int) and not 0 <= i < len(rig.gpus):
            raise InvalidPlacementError(f"there is no GPU {i} in this rig")
        if isinstance(i, str) and i not in named:
            raise InvalidPlacementError(f"no device {i!r} in this rig")
    if tensor_split is None:
        split = [float(max(split_memory(rig, as_device(i)), 1)) for i in ids]
    else:
        split = [float(x) for x in tensor_split]
    n_gpu = g.n_layer + 1 if ngl is None else ngl
    slots = llama_cpp_slots(g.n_layer, n_gpu if ids else 0, split, ids)
    return Placement(
        max_context=s.context,
        kv_block_size=16 if s.backend is Backend.VLLM else KV_PAD,
        devices=rig_devices(rig),
        units=_units(g, slots),
    )


def uniform_placement(g: Geometry, rig: Rig, s: PlanSettings, device: str) -> Placement:
    devices = rig_devices(rig)
    if device not in devices:
        raise InvalidPlacementError(f"no device {device!r} in this rig")
    return Placement(
        max_context=s.context,
        kv_block_size=16 if s.backend is Backend.VLLM else KV_PAD,
        devices=devices,
        units=_units(g, [device] * (g.n_layer + 1)),
    )


def _check_move(placement: Placement, unit_ids: Iterable[str], device: str) -> set[str]:
    if device not in placement.devices:
        raise InvalidPlacementError(f"no device {device!r} in this rig")
    ids = set(unit_ids)
    known = {u.unit for u in placement.units}
    unknown = sorted(ids - known)
    if unknown:
        raise InvalidPlacementError(f"no unit {unknown[0]!r} in this placement")
    if INPUT in ids and device != CPU:
        raise InvalidPlacementError(
            "the input embedding always stays on the CPU (llama.cpp keeps it there)"
        )
    return ids


def move_layers(placement: Placement, unit_ids: Iterable[str], device: str) -> Placement:
    """A new placement with `unit_ids` (and their experts) on `device`."""
    ids = _check_move(placement, unit_ids, device)
    units = tuple(
        replace(u, device=device, experts_device=None) if u.unit in ids else u
        for u in placement.units
    )
    return replace(placement, units=units)


def move_experts(placement: Placement, unit_ids: Iterable[str], device: str | None) -> Placement:
    """Send the routed experts of blocks to `device` (None: back with their block)."""
    ids = _check_move(placement, unit_ids, device or CPU)
    if ids & {INPUT, OUTPUT}:
        raise InvalidPlacementError("only blocks have experts")
    units = tuple(
        replace(u, experts_device=None if device == u.device else device) if u.unit in ids else u
        for u in placement.units
    )
    return replace(placement, units=units)


def split_memory(rig: Rig, device: str) -> int:
    """What llama.cpp's default --tensor-split weighs a device by: its free memory."""
    i = gpu_index(device)
    return rig.gpus[i].memory_bytes if i is not None else device_capacity(rig, device)[0]


def _repack_on_cpu(repack: RepackBytes, u: UnitPlacement) -> int:
    """Repacked bytes of the parts of a block (dense part, routed experts) on the CPU."""
    total = repack.block_bytes[u.index]
    experts = repack.block_expert_bytes[u.index]
    if u.experts_device is None or u.experts_device == u.device:
        return total
    return experts if u.experts_device == CPU else total - experts


def _loads(
    placement: Placement,
    g: Geometry,
    rig: Rig,
    s: PlanSettings,
    weights: dict[str, int],
    kv_b: dict[str, int],
    units: dict[str, list[str]],
    layers_on: dict[str, list[int]],
    output_dev: str,
    any_gpu: bool,
    copies: int,
) -> tuple[DeviceLoad, ...]:
    loads = []
    for d in placement.devices:
        if d not in weights:
            continue
        cpu, rpc = d == CPU, rpc_cpu_host(d) is not None
        n = 1 if cpu else copies
        compute = device_compute_bytes(g, s, layers_on[d], output_dev == d, cpu, n, rpc_cpu=rpc)
        if d == CPU and any_gpu:
            compute = max(compute, host_compute_bytes(g, s, copies))
        if d == CPU:
            compute += output_buffer_bytes(g, s)
        capacity, reserve = device_capacity(rig, d)
        # an idle GPU is not initialised by the backend: no context, no reserve
        reserve_used = 0 if d != CPU and not units[d] else reserve
        total = weights[d] + kv_b[d] + compute + reserve_used
        loads.append(
            DeviceLoad(
                device=d,
                name=device_name(rig, d),
                units=tuple(units[d]),
                weights_bytes=weights[d],
                kv_bytes=kv_b[d],
                compute_bytes=compute,
                reserve_bytes=reserve_used,
                total_bytes=total,
                capacity_bytes=capacity,
                verdict=load_verdict(total - reserve_used, max(capacity - reserve_used, 0)),
                input_copies=copies if units[d] or d == CPU else 1,
            )
        )
    return tuple(loads)


def device_loads(
    placement: Placement,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    kv_layers: Sequence[int] | None = None,
    cpu_repack: RepackBytes | None = None,
) -> tuple[DeviceLoad, ...]:
    """Weights, KV, compute and reserve on every device of the rig under `placement`.

    CPU weights are the memory-mapped file plus, with `cpu_repack` (weights.cpu_repack_bytes for the
    CPU's features), the CPU_REPACK copies of the CPU-resident units: the mapped range still spans
    the repacked tensors, so both count. The CPU also holds the logits (output) buffer, counted with
    its compute buffer."""
    kv = kv_layers if kv_layers is not None else kv_bytes_per_layer(g, s)
    weights: dict[str, int] = dict.fromkeys(placement.devices, 0)
    kv_b: dict[str, int] = dict.fromkeys(placement.devices, 0)
    units: dict[str, list[str]] = {d: [] for d in placement.devices}
    layers_on: dict[str, list[int]] = {d: [] for d in placement.devices}
    output_dev = CPU
    slots = [u for u in placement.units if u.unit != INPUT]
    base = llama_base(placement).slots
    kv_dev = kv_devices(placement, s, base)
    for u in placement.units:
        units[u.device].append(u.unit)
        if u.unit == INPUT:
            weights[u.device] += layout.input_bytes
        elif u.unit == OUTPUT:
            output_dev = u.device
            weights[u.device] += layout.output_bytes
            if u.device != CPU:
                weights[u.device] += layout.tied_head_bytes
            elif cpu_repack is not None:
                weights[CPU] += cpu_repack.output_bytes
        else:
            il = u.index
            experts = layout.block_expert_bytes[il]
            if u.experts_device is not None and u.experts_device != u.device:
                weights[u.device] += layout.block_bytes[il] - experts
                weights[u.experts_device] += experts
            else:
                weights[u.device] += layout.block_bytes[il]
            if cpu_repack is not None and CPU in (u.device, u.experts_device):
                weights[CPU] += _repack_on_cpu(cpu_repack, u)
            kv_b[kv_dev[il]] += kv[il]
            layers_on[u.device].append(il)
    any_gpu = any(u.device != CPU for u in placement.units)
    # pipeline parallelism needs every slot on a GPU and no -ot rule (an expert kept
    # apart, or a block off its -ngl/--tensor-split base)
    plain = all(u.experts_device in (None, u.device) for u in slots)
    all_on_gpus = plain and all(u.device != CPU for u in slots)
    all_on_gpus = all_on_gpus and base == [u.device for u in slots]
    copies = input_copies(rig, {u.device for u in slots}, all_on_gpus, s)
    if (
        cpu_repack is not None
        and not any_gpu
        and all(u.experts_device in (None, CPU) for u in placement.units)
    ):
        weights[CPU] -= cpu_repack.unmapped_bytes
    tally = (placement, g, rig, s, weights, kv_b, units, layers_on, output_dev, any_gpu)
    loads = _loads(*tally, copies)
    if copies > 1 and any(x.verdict is Verdict.OVER for x in loads if x.device != CPU):
        # llama.cpp retries without pipeline parallelism when its copies do not fit
        loads = _loads(*tally, 1)
    loads = split_state(loads, g, s, kv_dev)
    pool = unified_pool(rig, (x.device for x in loads if x.units))
    if pool:
        # a unified chip's GPU and CPU side are one memory: each shows the pool's verdict
        shared = load_verdict(
            sum(x.required_bytes for x in loads if x.device in pool),
            sum(x.usable_bytes for x in loads if x.device in pool and x.device != CPU),
        )
        loads = tuple(replace(x, verdict=shared) if x.device in pool else x for x in loads)
    return loads
