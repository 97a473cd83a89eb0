"""Fast fit evaluation for llama.cpp-shaped placements (contiguous slot ranges).

Planning tries many (quant, context, -ngl, split) combinations. Per-layer tables are
built once per (geometry, KV types) and cached; each evaluation then sums prefix arrays
over the contiguous runs of a slot assignment. `placement.device_loads` is the general
counterpart for hand-edited placements; tests pin that the two agree.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import fields
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.memo import ByIdentity
from rigspark_gui.core.memory import (
    STATE_PASSES,
    RepackBytes,
    WeightsLayout,
    device_compute_bytes,
    host_compute_bytes,
    kv_bytes_per_layer,
    kv_cells,
    kv_row_pair_bytes,
    output_buffer_bytes,
)
from rigspark_gui.core.model import Geometry, KvCacheType
from rigspark_gui.core.placement.devices import device_capacity
from rigspark_gui.core.placement.layout import (
    DeviceId,
    as_device,
    input_copies,
    llama_cpp_ranges,
    split_memory,
)
from rigspark_gui.core.placement.verdict import CPU, HEADROOM, fits_within, shortfall_bytes
from rigspark_gui.core.rig import RPC_CPU_PREFIX, Rig
from rigspark_gui.core.settings import PlanSettings


def _prefix(values: Sequence[int]) -> tuple[int, ...]:
    out = [0]
    for v in values:
        out.append(out[-1] + v)
    return tuple(out)


class _LayerTables(NamedTuple):
    """Prefix sums over layers of the per-cell KV row bytes, split by layer kind."""

    full_rows: tuple[int, ...]  # full-attention layers: scale with the whole cache
    swa_rows: tuple[int, ...]  # sliding layers: scale with the window cache
    recurrent: tuple[int, ...]  # recurrent state values (f32) per sequence
    first_full: tuple[int, ...]  # first full-attention layer at or after i (n if none)


@lru_cache(maxsize=1024)
def _layer_tables(g: Geometry, k: KvCacheType, v: KvCacheType) -> _LayerTables:
    n = g.n_layer
    full, swa, rec = [], [], []
    for il in range(n):
        row = kv_row_pair_bytes(g, il, k, v)
        sliding = g.is_sliding(il)
        full.append(0 if sliding else row)
        swa.append(row if sliding else 0)
        rec.append((g.recurrent_r_values + g.recurrent_s_values) if il in g.recurrent_layers else 0)
    first_full = [n] * (n + 1)
    for il in range(n - 1, -1, -1):
        first_full[il] = il if not g.is_sliding(il) else first_full[il + 1]
    return _LayerTables(_prefix(full), _prefix(swa), _prefix(rec), tuple(first_full))


# prefix sums of a layout's per-block bytes: cached layouts hand out the same tuple
_weight_prefix: ByIdentity[tuple[int, ...], tuple[int, ...]] = ByIdentity(_prefix)


def _cells(g: Geometry, s: PlanSettings) -> tuple[int, int]:
    """(cells of a full-attention layer, cells of a sliding one)."""
    full = kv_cells(g, g.n_layer, s) if not g.is_sliding(g.n_layer) else 0
    if not full:
        full = kv_cells(g, next((i for i in range(g.n_layer) if not g.is_sliding(i)), 0), s)
    swa = 0
    if g.swa_pattern is not None and g.swa_pattern > 1 and g.n_layer > 0:
        swa = kv_cells(g, 0, s)  # layer 0 slides under every pattern p > 1
    return full, swa


def kv_total_fast(g: Geometry, s: PlanSettings) -> int:
    """kv_cache.kv_total_bytes from the cached per-layer tables (what planning uses)."""
    exact = _exact_kv(g, s)
    if exact is not None:
        return exact[-1]
    return _kv_total(_layer_tables(g, s.kv_k, s.kv_v), _shape(g, s), s)


def _exact_kv(g: Geometry, s: PlanSettings) -> tuple[int, ...] | None:
    """Prefix sums of each layer's exact KV where the tables cannot say it: DeepSeek V4's
    compressed caches and compressor states follow neither cell count."""
    return _prefix(kv_bytes_per_layer(g, s)) if g.compress_ratios is not None else None


def _kv_total(t: _LayerTables, shape: _Shape, s: PlanSettings) -> int:
    n = len(t.full_rows) - 1
    return (
        t.full_rows[n] * shape.full_cells
        + t.swa_rows[n] * shape.swa_cells
        + t.recurrent[n] * 4 * s.parallel
    )


class DeviceTally:
    """One device's load under a placement, with its fit worked out once."""

    __slots__ = (
        "capacity_bytes",
        "compute_bytes",
        "device",
        "fits",
        "kv_bytes",
        "required_bytes",
        "reserve_bytes",
        "shortfall_bytes",
        "usable_bytes",
        "weights_bytes",
    )

    def __init__(
        self, device: str, weights: int, kv: int, compute: int, reserve: int, capacity: int
    ) -> None:
        self.device = device
        self.weights_bytes = weights
        self.kv_bytes = kv
        self.compute_bytes = compute
        self.reserve_bytes = reserve
        self.capacity_bytes = capacity
        self.required_bytes = required = weights + kv + compute
        self.usable_bytes = usable = max(capacity - reserve, 0)
        self.fits = fits_within(required, usable)
        self.shortfall_bytes = shortfall_bytes(required, usable)

    def __repr__(self) -> str:
        return (
            f"DeviceTally({self.device}, weights={self.weights_bytes}, kv={self.kv_bytes}, "
            f"compute={self.compute_bytes}, reserve={self.reserve_bytes}, "
            f"capacity={self.capacity_bytes})"
        )


class _Shape:
    """What a model's fit depends on besides the KV types, the quantization and the rig:
    cache cells, the logits buffer and compute buffers (filled as asked for). Shared
    by every FitContext of one geometry at the same other settings (the KV comparison
    and the catalog over every KV type ask for the same ones again)."""

    __slots__ = ("compute", "full_cells", "output_buffer", "swa_cells")

    def __init__(self, g: Geometry, s: PlanSettings) -> None:
        self.full_cells, self.swa_cells = _cells(g, s)
        self.output_buffer = output_buffer_bytes(g, s)
        self.compute: dict[tuple[int, bool, bool, bool, int, bool], int] = {}


_shapes_of: ByIdentity[Geometry, dict[tuple[object, ...], _Shape]] = ByIdentity(lambda _: {})
_KV_FIELDS = ("kv_k", "kv_v")
_SHAPE_FIELDS = tuple(f.name for f in fields(PlanSettings) if f.name not in _KV_FIELDS)


def _shape(g: Geometry, s: PlanSettings) -> _Shape:
    shapes = _shapes_of(g)
    key = tuple(getattr(s, name) for name in _SHAPE_FIELDS)
    shape = shapes.get(key)
    if shape is None:
        if len(shapes) >= 64:  # a context slider visits many: keep the recent ones
            shapes.clear()
        shape = shapes[key] = _Shape(g, s)
    return shape


class FitContext:
    """What every evaluation of one model on one rig at one setting shares, whatever the
    quantization or split: KV tables and cells, compute buffers, device capacities.
    Planning builds one and hands it to each FitEvaluator it makes."""

    def __init__(self, g: Geometry, rig: Rig, s: PlanSettings) -> None:
        self.g, self.rig, self.s = g, rig, s
        self.tables = _layer_tables(g, s.kv_k, s.kv_v)
        shape = _shape(g, s)
        self.full_cells, self.swa_cells = shape.full_cells, shape.swa_cells
        self.rec_scale = 4 * s.parallel
        self.kv_total = _kv_total(self.tables, shape, s)
        self.kv_exact = _exact_kv(g, s)
        if self.kv_exact is not None:
            self.kv_total = self.kv_exact[-1]
        self.output_buffer = shape.output_buffer
        self._compute_cache = shape.compute
        self._capacity: dict[str, tuple[int, int]] = {}
        self._copies: dict[tuple[str | bool, ...], int] = {}

    def device_capacity(self, device: str) -> tuple[int, int]:
        value = self._capacity.get(device)
        if value is None:
            value = self._capacity[device] = device_capacity(self.rig, device)
        return value

    def compute(
        self,
        rep: int,
        full: bool,
        has_output: bool,
        cpu: bool,
        host: bool,
        copies: int = 1,
        rpc_cpu: bool = False,
    ) -> int:
        """device_compute_bytes of a device whose layers `rep` represents (-1: none; a
        full-attention layer if `full`, else a sliding one), cached by what it depends
        on: full attention, sliding only or no layer; the head; the host role; pipeline
        copies. Every full-attention layer holds the same cells, and so does every
        sliding one."""
        kind = 0 if rep < 0 else (2 if full else 1)
        key = (kind, has_output, cpu, host, copies, rpc_cpu)
        value = self._compute_cache.get(key)
        if value is None:
            reps = [rep] if rep >= 0 else []
            value = device_compute_bytes(
                self.g,
                self.s,
                reps,
                has_output,
                cpu=cpu,
                copies=1 if cpu else copies,
                rpc_cpu=rpc_cpu,
            )
            if host:
                value = max(value, host_compute_bytes(self.g, self.s, copies))
            self._compute_cache[key] = value
        return value

    def copies(self, ranges: Sequence[tuple[str, int, int]], plain: bool = True) -> int:
        """Pipeline copies for a llama.cpp-shaped placement; `plain`: without expert
        overrides (any -ot rule turns pipeline parallelism off). llama.cpp allocates them if
        they fit and otherwise retries without them (llama-context.cpp, sched_reserve), so
        callers fall back to 1 when they do not."""
        key: tuple[str | bool, ...] = (*(d for d, _, _ in ranges), plain)
        value = self._copies.get(key)
        if value is None:
            used = {d for d, _, _ in ranges}
            all_on = plain and CPU not in used
            value = self._copies[key] = input_copies(self.rig, used, all_on, self.s)
        return value


class FitEvaluator:
    """Loads of one model at one quantization and settings, for any contiguous split."""

    def __init__(
        self,
        g: Geometry,
        layout: WeightsLayout,
        rig: Rig,
        s: PlanSettings,
        repack: RepackBytes | None = None,
        ctx: FitContext | None = None,
    ) -> None:
        self.g, self.layout, self.rig, self.s = g, layout, rig, s
        self.ctx = ctx = FitContext(g, rig, s) if ctx is None else ctx
        self._repack = repack
        self._r = _weight_prefix(repack.block_bytes) if repack is not None else None
        self._t = ctx.tables
        self._w = _weight_prefix(layout.block_bytes)
        self._e = _weight_prefix(layout.block_expert_bytes)
        self._re = _weight_prefix(repack.block_expert_bytes) if repack is not None else None
        self._full_cells, self._swa_cells = ctx.full_cells, ctx.swa_cells
        self._rec_scale = ctx.rec_scale
        self._compute = ctx.compute
        self._device_capacity = ctx.device_capacity

    def _kv(self, lo: int, hi: int) -> int:
        if self.ctx.kv_exact is not None:
            return self.ctx.kv_exact[hi] - self.ctx.kv_exact[lo]
        t = self._t
        return (
            (t.full_rows[hi] - t.full_rows[lo]) * self._full_cells
            + (t.swa_rows[hi] - t.swa_rows[lo]) * self._swa_cells
            + (t.recurrent[hi] - t.recurrent[lo]) * self._rec_scale
        )

    def tally(self, slots: Sequence[str]) -> dict[str, DeviceTally]:
        """Per-device loads for a slot assignment (n_layer blocks + output), input on CPU."""
        return self.tally_ranges(runs(slots))

    def moved_experts(
        self, ranges: Sequence[tuple[str, int, int]], cpu_experts: int
    ) -> list[tuple[str, int, int]]:
        """(device, first, end) runs of the blocks whose routed experts llama.cpp's
        `--n-cpu-moe cpu_experts` takes from that device to system memory: the blocks
        below `cpu_experts` off the CPU (layers without experts move no bytes)."""
        n = self.g.n_layer
        out = []
        for d, lo, end in ranges:
            hi = min(end, n, cpu_experts)
            if d != CPU and hi > lo:
                out.append((d, lo, hi))
        return out

    def tally_ranges(
        self, ranges: Sequence[tuple[str, int, int]], cpu_experts: int = 0
    ) -> dict[str, DeviceTally]:
        """Per-device loads for (device, first slot, end slot) runs covering every slot;
        `cpu_experts`: the experts of blocks 0..cpu_experts-1 in system memory
        (`--n-cpu-moe`), their KV and the rest of the block where the runs put them."""
        layout = self.layout
        n = self.g.n_layer
        w, r, first_full = self._w, self._r, self._t.first_full
        # per device: [weights, kv, representative layer (-1: none), it is full-attention]
        # The compute buffer depends on the largest cache any layer attends over: one
        # full-attention layer (else any layer) represents the device.
        acc: dict[str, list[int]] = {CPU: [layout.input_bytes, 0, -1, 0]}
        out_dev = CPU
        any_gpu = False
        for d, lo, end in ranges:
            a = acc.get(d)
            if a is None:
                a = acc[d] = [0, 0, -1, 0]
            if end > n:
                out_dev, hi = d, n
            else:
                hi = end
            if d != CPU:
                any_gpu = True
            if hi > lo:
                a[0] += w[hi] - w[lo]
                a[1] += self._kv(lo, hi)
                if r is not None and d == CPU:
                    # CPU_REPACK copies of the CPU-resident weights (see device_loads)
                    a[0] += r[hi] - r[lo]
                full = first_full[lo]
                if full < hi:
                    a[2], a[3] = full, 1
                elif a[2] < 0:
                    a[2] = lo
        head = layout.output_bytes + (layout.tied_head_bytes if out_dev != CPU else 0)
        if self._repack is not None:
            if out_dev == CPU:
                head += self._repack.output_bytes
            if not any_gpu:
                head -= self._repack.unmapped_bytes  # CPU only: weights[CPU] holds it
        acc[out_dev][0] += head
        moved = False
        e, re_ = self._e, self._re
        for d, lo, hi in self.moved_experts(ranges, cpu_experts) if cpu_experts > 0 else ():
            b = e[hi] - e[lo]
            if b:
                moved = True
                acc[d][0] -= b
                acc[CPU][0] += b + (re_[hi] - re_[lo] if re_ is not None else 0)
        compute, capacity_of = self._compute, self._device_capacity

        def build(copies: int) -> dict[str, DeviceTally]:
            result: dict[str, DeviceTally] = {}
            for d, (weights, kv, rep, full) in acc.items():
                cpu = d == CPU
                rpc = d.startswith(RPC_CPU_PREFIX)
                c = compute(rep, full == 1, d == out_dev, cpu, cpu and any_gpu, copies, rpc)
                if cpu:
                    c += self.ctx.output_buffer
                capacity, reserve = capacity_of(d)
                result[d] = DeviceTally(d, weights, kv, c, reserve, capacity)
            return result

        copies = self.ctx.copies(ranges, plain=not moved)
        result = build(copies)
        if copies > 1 and not all(t.fits for d, t in result.items() if d != CPU):
            result = build(1)  # llama.cpp retries without pipeline parallelism
        return result

    def read_bytes(
        self,
        ranges: Sequence[tuple[str, int, int]],
        depth: int,
        cpu_experts: int = 0,
        *,
        state: bool = True,
    ) -> dict[str, float]:
        """Bytes each device streams per decode step at `depth` tokens (experts: active
        share only, in system memory for blocks below `cpu_experts`; with `state`, the
        recurrent state read and written back); the fast twin of
        speed.bytes_read_per_token."""
        n = self.g.n_layer
        t = self._t
        passes = 4 * STATE_PASSES if state else 0  # f32 values, read and written
        frac = self.layout.expert_fraction_active
        full = min(depth, self._full_cells)
        swa = min(depth, self._swa_cells)
        read: dict[str, float] = {}
        for d, lo, end in ranges:
            hi = min(end, n)
            b = 0.0
            if hi > lo:
                experts = self._e[hi] - self._e[lo]
                b += self._w[hi] - self._w[lo] - experts + experts * frac
                b += (t.full_rows[hi] - t.full_rows[lo]) * full
                b += (t.swa_rows[hi] - t.swa_rows[lo]) * swa
                b += (t.recurrent[hi] - t.recurrent[lo]) * passes
            if end > n:
                b += self.layout.output_bytes + self.layout.tied_head_bytes
            read[d] = read.get(d, 0.0) + b
        for d, lo, hi in self.moved_experts(ranges, cpu_experts) if cpu_experts > 0 else ():
            b = (self._e[hi] - self._e[lo]) * frac
            if b:
                read[d] -= b
                read[CPU] = read.get(CPU, 0.0) + b
        return read

    def default_split(self, gpu_ids: Sequence[DeviceId]) -> list[float]:
        return [float(max(split_memory(self.rig, as_device(i)), 1)) for i in gpu_ids]

    def llama_cpp_tally(
        self, ngl: int, gpu_ids: Sequence[DeviceId], split: Sequence[float] | None = None
    ) -> dict[str, DeviceTally]:
        split = self.default_split(gpu_ids) if split is None else split
        return self.tally_ranges(llama_cpp_ranges(self.g.n_layer, ngl, split, gpu_ids))

    def gpus_fit(self, ranges: Sequence[tuple[str, int, int]], cpu_experts: int = 0) -> bool:
        """Whether every GPU's load under these runs fits: the GPU side of tally_ranges
        only (these searches run for every quant tried), without pipeline copies, which
        llama.cpp drops when they do not fit."""
        n = self.g.n_layer
        head = self.layout.output_bytes + self.layout.tied_head_bytes
        e = self._e
        for d, lo, end in ranges:
            if d == CPU:
                continue
            hi = min(end, n)
            need = head if end > n else 0
            rep, full = -1, False
            if hi > lo:
                need += self._w[hi] - self._w[lo] + self._kv(lo, hi)
                if cpu_experts > lo:
                    need -= e[min(hi, cpu_experts)] - e[lo]
                first = self._t.first_full[lo]
                rep, full = (first, True) if first < hi else (lo, False)
            need += self._compute(rep, full, end > n, False, False, 1, d.startswith(RPC_CPU_PREFIX))
            capacity, reserve = self._device_capacity(d)
            if not fits_within(need, max(capacity - reserve, 0)):
                return False
        return True

    def max_ngl(self, gpu_ids: Sequence[DeviceId]) -> int:
        """The largest -ngl whose GPU loads all fit (0 if not even the head fits)."""
        n = self.g.n_layer
        split = self.default_split(gpu_ids)

        def gpus_fit(ngl: int) -> bool:
            return self.gpus_fit(llama_cpp_ranges(n, ngl, split, gpu_ids))

        lo, hi = 0, n + 1
        if gpus_fit(hi):
            return hi
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if gpus_fit(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def fill_split(self, gpu_ids: Sequence[DeviceId], cpu_experts: int = 0) -> list[float]:
        """A --tensor-split (slot counts) that fills each GPU in turn up to what it can
        hold, the last taking the rest and the head: for full offload when the default
        split (by free memory) overloads one device. `cpu_experts`: the experts of the
        first blocks stay in system memory (`--n-cpu-moe`), so those blocks weigh less."""
        n = self.g.n_layer
        counts: list[float] = []
        lo = 0
        t, full, swa, rec = self._t, self._full_cells, self._swa_cells, self._rec_scale
        e = self._e
        costs = [  # weights (less experts kept in system memory) plus KV of blocks 0..i-1
            w - e[min(i, cpu_experts)] + f * full + sw * swa + r * rec
            for i, (w, f, sw, r) in enumerate(
                zip(self._w, t.full_rows, t.swa_rows, t.recurrent, strict=True)
            )
        ]
        for pos, gid in enumerate(gpu_ids):
            if pos == len(gpu_ids) - 1:
                counts.append(float(n + 1 - lo))
                break
            capacity, reserve = self._device_capacity(as_device(gid))
            rep = self._t.first_full[lo] if lo < n else lo
            # without pipeline copies, which llama.cpp drops when they do not fit
            compute = device_compute_bytes(self.g, self.s, [min(rep, n - 1)], False)
            budget = (capacity - reserve) * (1 - HEADROOM) - compute
            hi = bisect.bisect_right(costs, costs[lo] + budget) - 1
            hi = max(lo, min(hi, n))
            counts.append(float(hi - lo))
            lo = hi
        return counts


def runs(slots: Sequence[str]) -> list[tuple[str, int, int]]:
    """Run-length form of a slot list: (device, first, end) in order."""
    out: list[tuple[str, int, int]] = []
    lo = 0
    for i in range(1, len(slots) + 1):
        if i == len(slots) or slots[i] != slots[lo]:
            out.append((slots[lo], lo, i))
            lo = i
    return out


__all__ = ["DeviceTally", "FitContext", "FitEvaluator", "runs"]
