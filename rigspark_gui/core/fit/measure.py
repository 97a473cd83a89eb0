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

from rigspark_gui.core.fit.search import (
    LayerFraction,
    Measurement,
    Override,
    Probe,
    Use,
)
from rigspark_gui.core.memo import ByIdentity
from rigspark_gui.core.memory import (
    PIPELINE_COPIES,
    device_compute_bytes,
    gguf_padded,
    is_repacked,
    kv_total_bytes,
    repack_types,
    synthesize_tensors,
    weights_layout,
)
from rigspark_gui.core.model import ModelSpec, TensorGroup, TensorInfo
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


def _tensors(spec: ModelSpec, quant: str) -> tuple[TensorInfo, ...]:
    return spec.tensors if spec.tensors is not None else synthesize_tensors(spec.geometry, quant)


_Moved = tuple[dict[LayerFraction, tuple[int, ...]], tuple[int, ...]]
# per model (by identity) and quantization
_moved_of: ByIdentity[ModelSpec, dict[str, _Moved]] = ByIdentity(lambda _: {})


def _moved_bytes(spec: ModelSpec, quant: str) -> _Moved:
    """Per fraction, the bytes of each layer an override of that fraction moves; and each
    layer's routed-expert bytes."""
    cached = _moved_of(spec)
    if quant not in cached:
        cached[quant] = _count_moved(spec, quant)
    return cached[quant]


def _count_moved(spec: ModelSpec, quant: str) -> _Moved:
    n = spec.geometry.n_layer
    moved = {f: [0] * n for f in _MOVED}
    for t in _tensors(spec, quant):
        if t.group is not TensorGroup.BLOCK or t.layer is None or t.layer >= n:
            continue
        size = gguf_padded(t.n_bytes)
        for f, pattern in _MOVED.items():
            if pattern.search(t.name):
                moved[f][t.layer] += size
    return {f: tuple(v) for f, v in moved.items()}, tuple(moved[LayerFraction.MOE])


def _host_model_bytes(spec: ModelSpec, quant: str, features: tuple[str, ...]) -> int:
    """The host row's model part on a machine without GPUs: every tensor but those the
    CPU backend repacks (their CPU_REPACK buffer is in no row of fit's accounting)."""
    types = repack_types(features)
    # tied embeddings: the head duplicates the token table in the same host buffer,
    # counted once (b11434's -fitp host row of a tied F16 model is its file's weights)
    return sum(gguf_padded(t.n_bytes) for t in _tensors(spec, quant) if not is_repacked(t, types))


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
        self._moved, self._experts = _moved_bytes(spec, quant)
        self._evaluators: dict[int, FitEvaluator] = {}
        self._features = tuple(rig.cpu.features)

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
            else Use(weights[d], 0, 0)
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
        return device_compute_bytes(self.g, s, layers, head, copies=copies, rpc_cpu=True)

    def _apply(self, o: Override, layer_dev: dict[int, str], weights: dict[str, int]) -> None:
        d = layer_dev.get(o.layer, CPU)
        if d == CPU or o.layer >= self.g.n_layer:
            return
        moved = self._moved[o.keep][o.layer]
        weights[d] -= moved
        if o.to_device is not None:
            weights[self.devices[o.to_device]] += moved

    def _host(self, probe: Probe, ranges: list[tuple[str, int, int]]) -> Use:
        """The host row; exact only without GPUs, where it is all fit reads of it."""
        if self.devices:
            return Use(0, 0, 0)
        s = replace(self.s, context=probe.context)
        layers = list(range(self.g.n_layer))
        compute = device_compute_bytes(self.g, s, layers, True, cpu=True)
        model = _host_model_bytes(self.spec, self.quant, self._features)
        return Use(model, kv_total_bytes(self.g, s), compute)


__all__ = ["FitMeasure"]
