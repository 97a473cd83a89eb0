"""Speed estimates: decode is memory-bound, prefill compute-bound (DESIGN §4).

Decode: seconds per token = sum over devices of bytes that device reads per token
(its weights, active experts only, plus its KV at the current depth) divided by its
bandwidth times the backend's efficiency, plus a hand-off per device boundary.
Prefill: 2 * active parameters * prompt tokens / (FLOPS * efficiency), per device share.
Efficiencies come from the calibration data (`data/perf.json`); with no sourced figure
the estimate is `unknown`, never a guess.
"""

from __future__ import annotations

from itertools import pairwise

from pydantic import Field

from rigspark_gui.core.kv_cache import kv_cells, kv_row_pair_bytes
from rigspark_gui.core.model_spec import Frozen, Geometry
from rigspark_gui.core.placement import CPU, INPUT, OUTPUT, Placement, kv_devices
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import Backend, PlanSettings
from rigspark_gui.core.weights import WeightsLayout


class EfficiencyRange(Frozen):
    low: float = Field(gt=0, le=1)
    high: float = Field(gt=0, le=1)


class BackendPerf(Frozen):
    decode_efficiency: EfficiencyRange
    prefill_efficiency: EfficiencyRange | None = None
    source: str = ""


class PerfProfile(Frozen):
    """Calibrated efficiencies by backend key: llama.cpp, vllm, mlx, cpu."""

    backends: dict[str, BackendPerf] = Field(default_factory=dict)
    hop_seconds: float = Field(default=0.0002, ge=0, description="per device boundary, per token")
    source: str = ""


class Throughput(Frozen):
    low_tok_s: float | None = None
    high_tok_s: float | None = None
    known: bool = False
    basis: str
    limiting_device: str | None = None


class Prefill(Frozen):
    prompt_tokens: int
    low_seconds: float | None = None
    high_seconds: float | None = None
    known: bool = False
    basis: str


def _perf_key(device: str, rig: Rig, s: PlanSettings) -> str:
    if device == CPU:
        return "cpu"
    if s.backend is Backend.VLLM:
        return "vllm"
    if s.backend is Backend.MLX:
        return "mlx"
    return "llama.cpp"


def _device_gpu(rig: Rig, device: str) -> int:
    return int(device.split(":")[1])


def _bandwidth(rig: Rig, device: str) -> float | None:
    if device == CPU:
        return rig.cpu.memory_bandwidth_gbps
    return rig.gpus[_device_gpu(rig, device)].bandwidth_gbps


def _flops(rig: Rig, device: str) -> float | None:
    """Dense FLOP/s of a device."""
    if device == CPU:
        g = rig.cpu.flops_gflops
        return g * 1e9 if g else None
    t = rig.gpus[_device_gpu(rig, device)].fp16_tflops
    return t * 1e12 if t else None


def bytes_read_per_token(
    placement: Placement, g: Geometry, layout: WeightsLayout, s: PlanSettings, depth: int
) -> dict[str, float]:
    """Bytes each device streams for one decode step at `depth` tokens of context."""
    read: dict[str, float] = {}
    kv_dev = kv_devices(placement, s)  # a block's cache may stay where -ngl put it
    for u in placement.units:
        if u.unit == INPUT:
            continue  # one embedding row per token: negligible
        if u.unit == OUTPUT:
            b = layout.output_bytes + layout.tied_head_bytes
            read[u.device] = read.get(u.device, 0.0) + b
            continue
        il = u.index
        experts = layout.block_expert_bytes[il] * layout.expert_fraction_active
        dense = layout.block_bytes[il] - layout.block_expert_bytes[il]
        cells = min(depth, kv_cells(g, il, s))
        kv = kv_row_pair_bytes(g, il, s.kv_k, s.kv_v) * cells
        read[u.device] = read.get(u.device, 0.0) + dense
        read[kv_dev[il]] = read.get(kv_dev[il], 0.0) + kv
        exp_dev = u.experts_device or u.device
        read[exp_dev] = read.get(exp_dev, 0.0) + experts
    return read


def estimate_decode(
    placement: Placement,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    perf: PerfProfile,
) -> Throughput:
    depth_short = min(s.prompt_tokens, s.context)
    return decode_from_reads(
        bytes_read_per_token(placement, g, layout, s, s.context),
        bytes_read_per_token(placement, g, layout, s, depth_short),
        _boundaries(placement),
        rig,
        s,
        perf,
    )


def decode_from_reads(
    reads_long: dict[str, float],
    reads_short: dict[str, float],
    boundaries: int,
    rig: Rig,
    s: PlanSettings,
    perf: PerfProfile,
) -> Throughput:
    """Decode range from the bytes each device reads per token at the full context (slow
    end, low efficiency) and at the prompt's depth (fast end, high efficiency)."""
    slow = fast = 0.0
    worst_dev, worst_t = None, -1.0
    for device, b_long in reads_long.items():
        if b_long <= 0:
            continue
        bw = _bandwidth(rig, device)
        key = _perf_key(device, rig, s)
        entry = perf.backends.get(key)
        what = "CPU memory bandwidth" if device == CPU else f"{device} bandwidth"
        if bw is None:
            return Throughput(basis=f"unknown: {what} is not known (no measured or spec figure)")
        if entry is None:
            return Throughput(basis=f"unknown: no calibrated {key} decode efficiency")
        eff = entry.decode_efficiency
        t_slow = b_long / (bw * 1e9 * eff.low)
        slow += t_slow
        fast += reads_short.get(device, 0.0) / (bw * 1e9 * eff.high)
        if t_slow > worst_t:
            worst_dev, worst_t = device, t_slow
    hops = boundaries * perf.hop_seconds
    slow += hops
    fast += hops
    if slow <= 0 or fast <= 0:
        return Throughput(basis="unknown: nothing to read")
    depth_short = min(s.prompt_tokens, s.context)
    basis = (
        f"estimated: memory-bound decode at {depth_short}-{s.context} tokens of context, "
        "bandwidth x calibrated efficiency"
    )
    return Throughput(
        low_tok_s=1.0 / slow,
        high_tok_s=1.0 / fast,
        known=True,
        basis=basis,
        limiting_device=worst_dev,
    )


def _boundaries(placement: Placement) -> int:
    devices = [u.device for u in placement.units if u.unit != INPUT]
    return sum(1 for a, b in pairwise(devices) if a != b)


def estimate_prefill(
    placement: Placement,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    perf: PerfProfile,
) -> Prefill:
    return prefill_from_reads(
        bytes_read_per_token(placement, g, layout, s, 0), layout, rig, s, perf
    )


def prefill_from_reads(
    weight_reads: dict[str, float],
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    perf: PerfProfile,
) -> Prefill:
    """Prefill time; each device multiplies the share of active parameters it reads."""
    tokens = min(s.prompt_tokens, s.context)
    total = sum(weight_reads.values())
    slow = fast = 0.0
    for device, b in weight_reads.items():
        if b <= 0 or total <= 0:
            continue
        params = layout.n_active_params * b / total
        flops = _flops(rig, device)
        entry = perf.backends.get(_perf_key(device, rig, s))
        if flops is None:
            name = "CPU" if device == CPU else device
            return Prefill(prompt_tokens=tokens, basis=f"unknown: {name} FLOPS not known")
        if entry is None or entry.prefill_efficiency is None:
            return Prefill(prompt_tokens=tokens, basis="unknown: no calibrated prefill efficiency")
        work = 2.0 * params * tokens
        slow += work / (flops * entry.prefill_efficiency.low)
        fast += work / (flops * entry.prefill_efficiency.high)
    if slow <= 0:
        return Prefill(prompt_tokens=tokens, basis="unknown: nothing to compute")
    return Prefill(
        prompt_tokens=tokens,
        low_seconds=fast,
        high_seconds=slow,
        known=True,
        basis="estimated: 2 x active parameters x prompt tokens / (FLOPS x efficiency)",
    )
