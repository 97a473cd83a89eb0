"""What a dry-run load allocates, in fit's own accounting, from RigSpark's byte model.

llama.cpp's fit reads `llama_get_memory_breakdown` after a `no_alloc` load: per buffer
type the model's tensors, the KV cache / recurrent state ("context") and the scheduler's
compute buffers, summed per device; every host buffer type goes to one "host" row.
CPU_REPACK is not a host buffer type (its buffers live in host memory, but the type
answers `is_host` false and has the CPU device, which is no model device), so weights
the CPU backend repacks drop out of fit's host row, and the logits buffer is in no row
at all. Those two are why fit's host figure is lower than what a load maps."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from rigspark_gui.core.fit import graph_deepseek2
from rigspark_gui.core.fit.alloc_replay import allocate, split_graph
from rigspark_gui.core.fit.search import (
    ALL_EXPERTS_PATTERN,
    LayerFraction,
    Measurement,
    Override,
    Probe,
    Use,
    overflow_pattern,
)
from rigspark_gui.core.memo import ByIdentity
from rigspark_gui.core.memory import (
    PIPELINE_COPIES,
    TensorRow,
    device_compute_bytes,
    gguf_padded,
    kv_cells_per_stream,
    kv_streams,
    kv_total_bytes,
    n_graph_tokens,
    repack_for,
    synth_rows,
    weights_layout,
)
from rigspark_gui.core.model import Geometry, ModelSpec, TensorGroup, TensorInfo
from rigspark_gui.core.placement import (
    CPU,
    DeviceId,
    DeviceTally,
    FitContext,
    FitEvaluator,
    llama_cpp_ranges,
)
from rigspark_gui.core.rig import Rig, rpc_cpu_host
from rigspark_gui.core.settings import PlanSettings

# the FFN tensors each overflow pattern moves off the layer's device (fit.cpp)
_MOVED = {
    LayerFraction.ATTN: re.compile(r"\.ffn_(gate|up|gate_up|down)"),
    LayerFraction.UP: re.compile(r"\.ffn_(gate|gate_up|down)"),
    LayerFraction.GATE: re.compile(r"\.ffn_down"),
    LayerFraction.MOE: re.compile(r"\.ffn_(up|down|gate_up|gate)_(ch|)exps"),
}


_Rows = Sequence[TensorInfo | TensorRow]
_Moved = tuple[dict[LayerFraction, tuple[int, ...]], tuple[int, ...]]


def _count_moved(rows: _Rows, n: int) -> _Moved:
    moved = {f: [0] * n for f in _MOVED}
    for t in rows:
        if t.group is not TensorGroup.BLOCK or t.layer is None or t.layer >= n:
            continue
        if ".ffn_" not in t.name:
            continue
        size = gguf_padded(t.n_bytes)
        for f, pattern in _MOVED.items():
            if pattern.search(t.name):
                moved[f][t.layer] += size
    return {f: tuple(v) for f, v in moved.items()}, tuple(moved[LayerFraction.MOE])


# catalog models: by geometry (variants of one model share it); a file's: by identity
@lru_cache(maxsize=512)
def _synth_moved(g: Geometry, quant: str) -> _Moved:
    return _count_moved(synth_rows(g, quant), g.n_layer)


_file_moved: ByIdentity[ModelSpec, _Moved] = ByIdentity(
    lambda spec: _count_moved(spec.tensors or (), spec.geometry.n_layer)
)


def _moved_bytes(spec: ModelSpec, quant: str) -> _Moved:
    """Per fraction, the bytes of each layer an override of that fraction moves; and each
    layer's routed-expert bytes."""
    if spec.tensors is None:
        return _synth_moved(spec.geometry, quant)
    return _file_moved(spec)


def _guest_ffn_bytes(g: Geometry, s: PlanSettings, keep: LayerFraction) -> tuple[int, int]:
    """What the previous device's overflowing MoE layer costs the device its FFN tensors
    go to (fit's overflow to the next device), read off ggml-alloc's placements on
    llama-fit-params b11434 (qwen3moe over three ggml-rpc-servers, validation-fit.md).

    The scheduler copies into the guest's splits what they read from the previous
    device and allocates those copies when their split starts: with the router there
    (ATTN kept: router, gate, up and down here) the FFN norm twice (as is and
    reshaped) and the residual, three rows where a device otherwise receives two; with
    only gate/down (UP) or down (GATE) here, the router's sorted ids and weights, the
    swiglu output (n_ff_expert x n_expert_used per token) and the residual. A device
    with layers of its own allocates its first KQ mask above them: `below` is what that
    adds under every phase of its own layers. A device with none peaks in the guest
    FFN: the copies, then (ATTN) gate, up and swiglu, and down's n_expert_used rows.
    Returns (below, alone)."""
    t = min(s.context, s.n_ubatch)  # the graph's tokens (compute_buffer.n_graph_tokens)
    row = 4 * g.n_embd * t
    swiglu = 4 * g.n_ff_expert * g.n_expert_used * t
    down = row * g.n_expert_used
    if keep is LayerFraction.ATTN:
        return row, 3 * row + 3 * swiglu + down
    router = 4 * g.n_expert * t + 4 * g.n_expert_used * t
    copies = router + swiglu + row
    return copies - 2 * row, copies + down


class FitMeasure:
    """`Measure` for one model file on one rig at one setting, over llama.cpp's devices
    in its order (`devices`: gpu:N / rpc-cpu:HOST, RPC servers first)."""

    def __init__(
        self,
        spec: ModelSpec,
        quant: str,
        rig: Rig,
        s: PlanSettings,
        devices: Sequence[str],
        *,
        user_ngl: int | None = None,
        user_split: Sequence[float] | None = None,
    ) -> None:
        self.spec, self.quant, self.rig, self.s = spec, quant, rig, s
        self.g = spec.geometry
        self.devices = tuple(devices)
        self.layout = weights_layout(spec, quant)
        self.user_ngl, self.user_split = user_ngl, user_split
        self._ids: tuple[DeviceId, ...] = tuple(
            int(d.split(":")[1]) if d.startswith("gpu:") else d for d in self.devices
        )
        # routed-expert bytes per layer (the layout has them); what each override moves is
        # counted from the tensors only when an override is tried (MoE over devices)
        self._experts = self.layout.block_expert_bytes
        self._moved_cache: dict[LayerFraction, tuple[int, ...]] | None = None
        self._evaluators: dict[int, FitEvaluator] = {}
        self._features = tuple(rig.cpu.features)
        self._replays: dict[Probe, tuple[int, ...] | None] = {}

    def _evaluator(self, context: int) -> FitEvaluator:
        ev = self._evaluators.get(context)
        if ev is None:
            s = replace(self.s, context=context)
            ev = FitEvaluator(self.g, self.layout, self.rig, s, ctx=FitContext(self.g, self.rig, s))
            self._evaluators[context] = ev
        return ev

    def _ranges(self, probe: Probe) -> list[tuple[str, int, int]]:
        slots = self.g.n_layer + 1
        if probe.layers is None:
            ngl = slots if self.user_ngl is None or self.user_ngl < 0 else self.user_ngl
            split = list(self.user_split) if self.user_split else None
        else:
            ngl = sum(d.n_layer for d in probe.layers)
            split = [float(d.n_layer) for d in probe.layers]
        if ngl == 0 or not self.devices:
            return [(CPU, 0, slots)]
        ev = self._evaluator(probe.context)
        if split is None or not any(split):
            split = ev.default_split(self._ids)
        return llama_cpp_ranges(self.g.n_layer, min(ngl, slots), split, self._ids)

    def __call__(self, probe: Probe) -> Measurement:
        if not self.devices:  # no GPU: fit reads the host row alone
            return Measurement((), self._host(probe, [(CPU, 0, self.g.n_layer + 1)]))
        ev = self._evaluator(probe.context)
        ranges = self._ranges(probe)
        tally = ev.tally_ranges(ranges)
        weights = {d: (tally[d].weights_bytes if d in tally else 0) for d in self.devices}
        layer_dev = {}
        for d, lo, hi in ranges:
            for il in range(lo, min(hi, self.g.n_layer)):
                layer_dev[il] = d
        if probe.all_experts_on_cpu:
            for il, d in layer_dev.items():
                if d != CPU:
                    weights[d] -= self._experts[il]
        for o in probe.overrides:
            self._apply(o, layer_dev, weights)
        uses = tuple(
            Use(weights[d], tally[d].kv_bytes, self._compute(probe, ranges, d, tally[d]))
            if d in tally
            else Use(weights[d], 0, self._guest_only(probe, d))
            for d in self.devices
        )
        return Measurement(uses, self._host(probe, ranges))

    def _compute(
        self, probe: Probe, ranges: list[tuple[str, int, int]], d: str, t: DeviceTally
    ) -> int:
        """The device's compute buffer. An RPC device's depends on more than the planner's
        tally passes: whether it runs layer 0 and the last layer, and pipeline copies,
        which llama-context.cpp enables when the model has more than one device (idle
        ones included), every layer and the head are offloaded and no -ot rule is set;
        RPC devices report async compute and events, so fit's dry runs keep them."""
        if rpc_cpu_host(d) is None:
            return t.compute_bytes
        replayed = self._replay(probe, ranges)
        if replayed is not None:
            return replayed[self.devices.index(d)]
        n = self.g.n_layer
        layers = [il for dev, lo, hi in ranges if dev == d for il in range(lo, min(hi, n))]
        head = any(dev == d and hi > n for dev, _, hi in ranges)
        pipeline = (
            len(self.devices) > 1
            and all(dev != CPU for dev, _, _ in ranges)
            and not probe.overrides
            and not probe.all_experts_on_cpu
        )
        s = replace(self.s, context=probe.context)
        copies = PIPELINE_COPIES if pipeline else 1
        i = self.devices.index(d)
        guests = [o.keep for o in probe.overrides if o.to_device == i]
        own = device_compute_bytes(self.g, s, layers, head, copies=copies, rpc_cpu=True)
        if not guests:
            return own
        below, alone = _guest_ffn_bytes(self.g, s, guests[0])
        if not layers:
            return max(own, alone)
        # the guest's copies lie under the layers' phases; the head comes after the last
        # layer, when they are long freed
        body = device_compute_bytes(self.g, s, layers, False, copies=copies, rpc_cpu=True)
        return max(own, body + below)

    def _guest_only(self, probe: Probe, d: str) -> int:
        """The compute buffer of a device with no layers that runs the previous device's
        overflowing FFN part (RPC devices; see `_guest_ffn_bytes`)."""
        if rpc_cpu_host(d) is None:
            return 0
        replayed = self._replay(probe, self._ranges(probe))
        if replayed is not None:
            return replayed[self.devices.index(d)]
        i = self.devices.index(d)
        keep = next((o.keep for o in probe.overrides if o.to_device == i), None)
        if keep is None:
            return 0
        return _guest_ffn_bytes(self.g, replace(self.s, context=probe.context), keep)[1]

    def _replay(self, probe: Probe, ranges: list[tuple[str, int, int]]) -> tuple[int, ...] | None:
        """Each device's compute buffer from a replay of the scheduler and ggml-alloc over
        the model's graph (alloc_replay), where the graph is modelled (graph_deepseek2:
        its peak depends on where earlier tensors left holes, which no per-phase formula
        follows, e.g. when a device also runs another's overflowing FFN tensors) and
        every device is an RPC server's CPU; else None. Pipeline copies as `_compute`."""
        if probe in self._replays:
            return self._replays[probe]
        s = replace(self.s, context=probe.context)
        n_dev, n = len(self.devices), self.g.n_layer
        pipeline = (
            n_dev > 1
            and all(dev != CPU for dev, _, _ in ranges)
            and not (probe.overrides or probe.all_experts_on_cpu)
        )
        ok = (
            graph_deepseek2.covers(
                self.g,
                s.flash_attn,
                None if self.spec.tensors is None else (t.name for t in self.spec.tensors),
            )
            and all(rpc_cpu_host(d) is not None for d in self.devices)
            and kv_streams(s) == 1
            and not s.kv_k.quantized
        )
        result: tuple[int, ...] | None = None
        if ok:
            back = {d: i for i, d in enumerate(self.devices)}
            layer_home = [n_dev] * n
            head = n_dev
            for dev, lo, hi in ranges:
                for il in range(lo, min(hi, n)):
                    layer_home[il] = back.get(dev, n_dev)
                if hi > n:
                    head = back.get(dev, n_dev)
            rules = [
                (overflow_pattern(o.layer, o.keep), n_dev if o.to_device is None else o.to_device)
                for o in probe.overrides
            ]
            if probe.all_experts_on_cpu:
                rules.append((ALL_EXPERTS_PATTERN, n_dev))
            graph = graph_deepseek2.build(
                self.g,
                n_graph_tokens(s),
                kv_cells_per_stream(self.g, 0, s),
                layer_home,
                head,
                graph_deepseek2.weight_homes(rules),
                n_dev,
                # fit's dry run sizes the buffers with ggml_backend_sched_reserve_size,
                # which resets the scheduler before splitting: the norms llama-context's
                # callback pinned to their layer's device are unpinned again
                pin_norms=False,
            )
            copies = PIPELINE_COPIES if pipeline else 1
            peaks = allocate(split_graph(graph, n_dev + 1, copies))
            result = tuple(peaks.get(i, 0) for i in range(n_dev))
        self._replays[probe] = result
        return result

    def _apply(self, o: Override, layer_dev: dict[int, str], weights: dict[str, int]) -> None:
        d = layer_dev.get(o.layer, CPU)
        if d == CPU or o.layer >= self.g.n_layer:
            return
        if self._moved_cache is None:
            self._moved_cache = _moved_bytes(self.spec, self.quant)[0]
        moved = self._moved_cache[o.keep][o.layer]
        weights[d] -= moved
        if o.to_device is not None:
            weights[self.devices[o.to_device]] += moved

    def _host_model(self) -> int:
        """The host row's model part: every tensor but those the CPU backend repacks, as
        the layout less the repack table (which counts the same tensors, as a count
        tensor by tensor would; a tied head's repacked copy is no tensor of the file)."""
        repack = repack_for(self.spec, self.quant, self._features)
        total = self.layout.total_bytes
        if repack is None:
            return total
        total -= sum(repack.block_bytes)
        if not self.g.tied_embeddings:
            total -= repack.output_bytes
        return total

    def _host(self, probe: Probe, ranges: list[tuple[str, int, int]]) -> Use:
        """The host row; exact only without GPUs, where it is all fit reads of it."""
        if self.devices:
            return Use(0, 0, 0)
        s = replace(self.s, context=probe.context)
        layers = list(range(self.g.n_layer))
        compute = device_compute_bytes(self.g, s, layers, True, cpu=True)
        model = self._host_model()
        return Use(model, kv_total_bytes(self.g, s), compute)


__all__ = ["FitMeasure"]
