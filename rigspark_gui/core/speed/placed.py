"""Speed of a placement: what each device reads and holds, handed to the estimator."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import pairwise

from rigspark_gui.core.flash_attn import attention_shape
from rigspark_gui.core.memory import STATE_PASSES, WeightsLayout, kv_cells, kv_row_pair_bytes
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.placement import INPUT, OUTPUT, Placement, kv_devices
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed.estimate import (
    DecodeShape,
    Prefill,
    Throughput,
    estimate_decode_shape,
    estimate_prefill_reads,
)
from rigspark_gui.core.speed.model import SpeedModel


def decode_depth(s: PlanSettings) -> int:
    """The depth a decode estimate is given at: right after the prompt."""
    return min(s.prompt_tokens, s.context)


@lru_cache(maxsize=256)
def _kv_read(g: Geometry, s: PlanSettings, depth: int) -> tuple[int, ...]:
    """KV bytes each layer reads per decode step at `depth`: the same for every
    placement of one model and settings (a drag re-estimates it on every drop)."""
    return tuple(
        kv_row_pair_bytes(g, il, s.kv_k, s.kv_v) * min(depth, kv_cells(g, il, s))
        for il in range(g.n_layer)
    )


@lru_cache(maxsize=256)
def state_traffic(g: Geometry) -> tuple[int, ...]:
    """Recurrent-state bytes each layer moves per decoded token of one sequence: its f32
    conv and ssm / delta-rule rows read and written back (`STATE_PASSES`), whatever the
    depth; 0 on attention layers and on MTP blocks, which hold no state unless drafting.
    Other sequences' rows and rollback snapshots are not touched by this token."""
    trunk = g.n_layer - g.n_layer_nextn
    row = (g.recurrent_r_values + g.recurrent_s_values) * 4
    rec = frozenset(g.recurrent_layers)
    return tuple(STATE_PASSES * row if il in rec and il < trunk else 0 for il in range(g.n_layer))


def bytes_read_per_token(
    placement: Placement,
    g: Geometry,
    layout: WeightsLayout,
    s: PlanSettings,
    depth: int,
    *,
    state: bool = True,
) -> dict[str, float]:
    """Bytes each device streams for one decode step at `depth` tokens of context: the
    dense weights, the active share of the routed experts, the KV of the attention layers
    and, with `state`, the recurrent state of the others (a prompt's ubatch moves it once
    for hundreds of tokens, so the prefill shares leave it out)."""
    read: dict[str, float] = {}
    kv_dev = kv_devices(placement, s)  # a block's cache may stay where -ngl put it
    kv_table = _kv_read(g, s, depth)
    state_table = state_traffic(g) if state else (0,) * g.n_layer
    trunk = g.n_layer - g.n_layer_nextn
    for u in placement.units:
        if u.unit == INPUT:
            continue  # one embedding row per token: negligible
        if u.unit == OUTPUT:
            b = layout.output_bytes + layout.tied_head_bytes
            read[u.device] = read.get(u.device, 0.0) + b
            continue
        il = u.index
        if il >= trunk:
            continue  # an MTP block runs only when drafting (the DSA loaders keep its router bias)
        experts = layout.block_expert_bytes[il] * layout.expert_fraction_active
        dense = layout.block_bytes[il] - layout.block_expert_bytes[il]
        kv = kv_table[il] + state_table[il]
        read[u.device] = read.get(u.device, 0.0) + dense
        read[kv_dev[il]] = read.get(kv_dev[il], 0.0) + kv
        exp_dev = u.experts_device or u.device
        read[exp_dev] = read.get(exp_dev, 0.0) + experts
    return read


def layers_per_device(placement: Placement) -> dict[str, int]:
    out: dict[str, int] = {}
    for u in placement.units:
        if u.unit != INPUT and u.unit != OUTPUT:
            out[u.device] = out.get(u.device, 0) + 1
    return out


def boundaries(placement: Placement) -> int:
    devices = [u.device for u in placement.units if u.unit != INPUT]
    return sum(1 for a, b in pairwise(devices) if a != b)


def layers_in_ranges(ranges: Sequence[tuple[str, int, int]], n_layer: int) -> dict[str, int]:
    """Blocks per device of llama.cpp slot runs (the last slot is the output head)."""
    out: dict[str, int] = {}
    for d, lo, hi in ranges:
        n = max(min(hi, n_layer) - lo, 0)
        if n:
            out[d] = out.get(d, 0) + n
    return out


def estimate_decode(
    placement: Placement,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    model: SpeedModel,
) -> Throughput:
    depth = decode_depth(s)
    shape = DecodeShape(
        bytes_read_per_token(placement, g, layout, s, depth),
        layers_per_device(placement),
        boundaries(placement),
        depth,
    )
    return estimate_decode_shape(shape, layout, rig, s, model)


def estimate_prefill(
    placement: Placement,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    model: SpeedModel,
) -> Prefill:
    return estimate_prefill_reads(
        bytes_read_per_token(placement, g, layout, s, 0, state=False),
        layers_per_device(placement),
        layout,
        rig,
        s,
        model,
        g.n_embd,  # the attention width the calibration was fitted with
        shape=attention_shape(g),
    )
