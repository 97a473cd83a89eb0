"""Decode and prefill estimates of one placement: a point with its calibrated band."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rigspark_gui.core.flash_attn import FaShape, FaWhere, device_support
from rigspark_gui.core.memo import ByIdentity
from rigspark_gui.core.memory import WeightsLayout
from rigspark_gui.core.rig import VM_FEATURE, Basis, Cpu, Gpu, Rig, Vendor, rpc_cpu_host
from rigspark_gui.core.settings import Backend, GpuBackend, PlanSettings
from rigspark_gui.core.speed.devices import (
    RUNS_ON,
    backend_for,
    cpu_isa,
    cpu_label,
    device_class,
    family_mix,
    geforce_accumulate_factor,
    mixed_factor,
)
from rigspark_gui.core.speed.model import (
    CPU_BACKEND,
    ISA_FALLBACK,
    Band,
    CpuIsa,
    DecodeParams,
    PrefillParams,
    QuantFamily,
    SpeedModel,
    isa_value,
)

CPU = "cpu"


@dataclass(frozen=True, slots=True, kw_only=True)
class Throughput:
    """Decode speed: a point, its band and the basis of both."""

    tok_s: float | None = None
    low_tok_s: float | None = None
    high_tok_s: float | None = None
    known: bool = False
    basis: str
    limiting_device: str | None = None
    depth: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Prefill:
    prompt_tokens: int
    seconds: float | None = None
    low_seconds: float | None = None
    high_seconds: float | None = None
    known: bool = False
    basis: str


class DecodeShape(NamedTuple):
    """What one decode step does on each device."""

    reads: dict[str, float]  # bytes streamed per token (weights, active experts, KV)
    layers: dict[str, int]  # blocks on each device
    boundaries: int  # device hand-offs per token
    depth: int  # tokens of context the KV reads were taken at


class _DeviceTime(NamedTuple):
    seconds: float
    note: str


def _cpu_of(rig: Rig, device: str) -> Cpu | None:
    """The CPU a device computes on: this machine's for `cpu`, another host's for
    `rpc-cpu:HOST` (rpc-server on a CPU box); None for a GPU."""
    if device == CPU:
        return rig.cpu
    host = rpc_cpu_host(device)
    if host is None:
        return None
    h = rig.host(host)
    return h.cpu if h is not None else Cpu()


def _gpu(rig: Rig, device: str) -> Gpu:
    return rig.gpus[int(device.split(":")[1])]


def _backend_key(gpu: Gpu, s: PlanSettings) -> tuple[GpuBackend, str | None]:
    """The GPU backend and, for engines that are not llama.cpp, the engine's factor key."""
    b = backend_for(gpu, s.gpu_backend)
    if s.backend is Backend.MLX:
        return GpuBackend.METAL, "mlx"
    if s.backend is Backend.VLLM:
        return b, "vllm"
    return b, None


# A layout's family mix, and the factors derived from it, are asked for on every trial of
# every path: computed once per layout (layouts are memoised, so identity is stable).
_layout_mix: ByIdentity[WeightsLayout, dict[QuantFamily, float]] = ByIdentity(
    lambda layout: family_mix(layout.tensor_types)
)
_factors: ByIdentity[DecodeParams, dict[tuple[int, str], tuple[object, float]]] = ByIdentity(
    lambda _p: {}
)


def _cpu_isa_adjust(p: DecodeParams, isa: CpuIsa, family: QuantFamily) -> float:
    """The ISA's own adjustment of a family's CPU dot rate (nearest fitted ISA's)."""
    at: CpuIsa | None = isa
    while at is not None:
        v = p.cpu_isa_quant_factor.get(f"{at.value}:{family.value}")
        if v is not None:
            return v
        at = ISA_FALLBACK.get(at)
    return 1.0


def _gpu_quant(p: DecodeParams, mix: dict[QuantFamily, float], backend: str) -> float:
    """The quantization factor of a file's mix under one backend (its kernels differ:
    K-quants run relatively slower under Metal than under CUDA); "cpu:ISA" for the CPU's
    dequantize-and-dot kernels of that ISA."""
    cache = _factors(p)
    if len(cache) > 512:
        cache.clear()  # each entry keeps its mix alive: bounded like the layouts' memo
    hit = cache.get((id(mix), backend))
    if hit is not None and hit[0] is mix:
        return hit[1]
    if backend.startswith(CPU_BACKEND + ":"):
        isa = CpuIsa(backend.split(":", 1)[1])
        cpu_factors = {f: p.cpu_quant_factor.get(f, 1.0) * _cpu_isa_adjust(p, isa, f) for f in mix}
        value = mixed_factor(mix, cpu_factors)
    else:
        adj = p.backend_quant_factor
        factors = {
            f: p.quant_factor.get(f, 1.0) * adj.get(f"{backend}:{f.value}", 1.0) for f in mix
        }
        value = mixed_factor(mix, factors)
    cache[(id(mix), backend)] = (mix, value)
    return value


def _device_key(rig: Rig, device: str) -> str:
    cpu = _cpu_of(rig, device)
    return f"cpu:{cpu_label(cpu)}" if cpu is not None else f"gpu:{_gpu(rig, device).name}"


def local_scale(
    scales: dict[str, dict[str, float]], key: str, mix: dict[QuantFamily, float]
) -> float | None:
    """This machine's measured / predicted for a device and a file's mix of families."""
    per = scales.get(key)
    if not per:
        return None
    fallback = per.get("*", 1.0)
    return sum(share * per.get(f.value, fallback) for f, share in mix.items()) or fallback


def _unknown(what: str) -> Throughput:
    return Throughput(basis=f"unknown: {what}")


def _backend_factor(model: SpeedModel, gpu: Gpu, backend: GpuBackend, engine: str | None) -> float:
    assert model.decode is not None
    f = model.decode.backend_factor
    factor = f.get(f"{backend.value}:{gpu.vendor.value}", f.get(backend.value, 1.0))
    if engine is not None:
        factor *= f.get(engine, 1.0)
    return factor


class DecodeTime(NamedTuple):
    """One decode step's time on a placement, before it is dressed as a Throughput (the
    planner compares many of these and shows one)."""

    seconds: float
    limiting_device: str
    cpu_limited: bool  # the CPU takes the longest: its (wider) band applies
    cpu_bound: bool
    local: bool  # some device is calibrated on this machine (its basis is said)
    all_local: bool  # every device is: the calibrated band applies

    @property
    def tok_s(self) -> float:
        return 1.0 / self.seconds


class _DeviceSpeed(NamedTuple):
    """What decode time on one device needs beyond the bytes: worked out once per rig,
    settings and model, since every trial of every path asks again."""

    rate: float  # bytes/s before the quantization factor (CPU: the memory stream)
    ceiling: float  # bytes/s no factor can exceed: the full bandwidth
    backend: str  # factor key for the quantization mix: a GPU backend, or "cpu:ISA"
    layer_seconds: float
    cpu: bool
    cores: int  # CPU only: threads that compute
    core_rate: float  # CPU only: F16 elements/s per core (0: no compute bound)
    local_key: str


_tables: dict[tuple[int, int, int], tuple[object, object, object, dict[str, _DeviceSpeed | str]]]
_tables = {}


def _device_speed(rig: Rig, s: PlanSettings, model: SpeedModel, device: str) -> _DeviceSpeed | str:
    key = (id(rig), id(s), id(model))
    hit = _tables.get(key)
    if hit is None or hit[0] is not rig or hit[1] is not s or hit[2] is not model:
        if len(_tables) > 64:
            _tables.clear()
        hit = (rig, s, model, {})
        _tables[key] = hit
    table = hit[3]
    found = table.get(device)
    if found is None:
        found = table[device] = _work_out(rig, s, model, device)
    return found


def core_share(cpu: Cpu, cores: int, vcpu_factor: float | None) -> float:
    """Each counted core's share of a whole core's vector work: measured where the
    hardware layer timed the threads together (`Cpu.compute_cores`), else a VM's fitted
    vCPU share (its vCPUs may be hyperthread pairs), else a whole core."""
    if cpu.compute_cores and cores:
        return min(cpu.compute_cores / cores, 1.0)
    return (vcpu_factor or 1.0) if VM_FEATURE in cpu.features else 1.0


def _work_out(rig: Rig, s: PlanSettings, model: SpeedModel, device: str) -> _DeviceSpeed | str:
    p = model.decode
    assert p is not None
    cpu = _cpu_of(rig, device)
    if cpu is not None:
        bw = cpu.memory_bandwidth_gbps
        if bw is None:
            where = "CPU" if device == CPU else f"{device} CPU"
            return f"{where} memory bandwidth is not known (measure it, or give it in the rig)"
        isa = cpu_isa(cpu)
        cores = cpu.cores or cpu.threads or 0
        measured = cpu.basis_of("memory_bandwidth_gbps").basis is Basis.MEASURED
        eff = p.cpu_measured_efficiency if measured else None
        stream = bw * 1e9 * (eff or p.cpu_efficiency)
        per_core = core_share(cpu, cores, p.cpu_vcpu_factor)
        core_bw = isa_value(p.cpu_core_bandwidth, isa)
        if cores and core_bw:
            stream = min(stream, cores * core_bw * per_core)
        rate = (isa_value(p.cpu_core_rate, isa) or 0.0) * per_core
        return _DeviceSpeed(
            stream, stream, f"{CPU_BACKEND}:{isa.value}", p.layer_seconds.get(CPU_BACKEND, 0.0),
            True, cores, rate, f"cpu:{cpu_label(cpu)}",
        )  # fmt: skip
    gpu = _gpu(rig, device)
    if gpu.bandwidth_gbps is None:
        return f"{device} ({gpu.name}) memory bandwidth is not known"
    backend, engine = _backend_key(gpu, s)
    if gpu.vendor not in RUNS_ON[backend]:
        return f"{backend.value} does not run on {gpu.vendor.value} GPUs"
    eff = p.efficiency.get(device_class(gpu))
    if eff is None:
        return f"no calibration for {gpu.name}'s device class"
    eff *= _backend_factor(model, gpu, backend, engine)
    full = gpu.bandwidth_gbps * 1e9
    return _DeviceSpeed(
        full * eff, full, backend.value, p.layer_seconds.get(backend.value, 0.0),
        False, 0, 0.0, f"gpu:{gpu.name}",
    )  # fmt: skip


def decode_time(
    shape: DecodeShape, layout: WeightsLayout, rig: Rig, s: PlanSettings, model: SpeedModel
) -> DecodeTime | str:
    """Seconds per token summed over the devices (layer split runs them in turn), or why
    it is unknown."""
    p = model.decode
    if p is None:
        return "no speed calibration loaded"
    mix = _layout_mix(layout)
    total = shape.boundaries * p.hop_seconds
    local = False
    all_local = True
    worst: tuple[float, str] | None = None
    cpu_bound = False
    for device, b in shape.reads.items():
        if b <= 0:
            continue
        d = _device_speed(rig, s, model, device)
        if isinstance(d, str):
            return d
        if d.cpu:
            t = b / d.rate
            if d.cores and d.core_rate and layout.total_bytes:
                elements = b * layout.n_params / layout.total_bytes
                compute = elements / (d.cores * d.core_rate * _gpu_quant(p, mix, d.backend))
                if compute > t:
                    t, cpu_bound = compute, True
        else:
            # the efficiency caps at the full bandwidth, whatever the factors multiply to
            t = b / min(d.rate * _gpu_quant(p, mix, d.backend), d.ceiling)
        t += shape.layers.get(device, 0) * d.layer_seconds
        if model.local_decode_scale:
            scale = local_scale(model.local_decode_scale, d.local_key, mix)
            if scale is not None:
                t /= scale
                local = True
            else:
                all_local = False
        else:
            all_local = False
        total += t
        if worst is None or t > worst[0]:
            worst = (t, device)
    if total <= 0 or worst is None:
        return "nothing to read"
    return DecodeTime(total, worst[1], worst[1] == CPU, cpu_bound, local, local and all_local)


def throughput_of(time: DecodeTime | str, depth: int, model: SpeedModel) -> Throughput:
    """A decode time as the plan shows it: point, calibrated band, basis."""
    if isinstance(time, str):
        return _unknown(time)
    assert model.decode is not None
    point = time.tok_s
    band: Band = model.decode.cpu_band if time.cpu_limited else model.decode.band
    if time.all_local and model.local_band is not None:
        band = model.local_band
    why = "compute-bound on the CPU, " if time.cpu_bound else ""
    basis = (
        f"estimated at {depth} tokens of context: {why}bytes read / (bandwidth x "
        f"efficiency) + per-layer cost; {model.local_basis if time.local else model.basis}"
    )
    if time.cpu_limited and not time.all_local:
        basis += (
            "; CPUs differ more than published runs describe: calibrating this machine "
            "(View > Calibrate speed, or rigspark-plan calibrate) narrows the band"
        )
    return Throughput(
        tok_s=point,
        low_tok_s=point * band.low,
        high_tok_s=point * band.high,
        known=True,
        basis=basis,
        limiting_device=time.limiting_device,
        depth=depth,
    )


def estimate_decode_shape(
    shape: DecodeShape, layout: WeightsLayout, rig: Rig, s: PlanSettings, model: SpeedModel
) -> Throughput:
    return throughput_of(decode_time(shape, layout, rig, s, model), shape.depth, model)


def _cpu_prompt_quant(p: PrefillParams, isa: CpuIsa, mix: dict[QuantFamily, float]) -> float:
    """A file's prompt-rate factor on a CPU of this ISA (nearest fitted ISA's; the GPU
    factor where no CPU figure was fitted)."""

    def one(f: QuantFamily) -> float:
        if f is QuantFamily.FLOAT:
            return 1.0
        at: CpuIsa | None = isa
        while at is not None:
            v = p.cpu_quant_factor.get(f"{at.value}:{f.value}")
            if v is not None:
                return v
            at = ISA_FALLBACK.get(at)
        return p.quant_factor.get(f, 1.0)

    return mixed_factor(mix, {f: one(f) for f in mix})


def attention_off_gpu(
    layers: dict[str, int], rig: Rig, s: PlanSettings, shape: FaShape | None
) -> str:
    """Why flash attention leaves a GPU holding layers ('' when it does not): on, with a
    K/V pair or head size the GPU's backend refuses, llama.cpp's scheduler runs the op on
    the CPU (under -fa auto only a quantized V cache keeps it on there). No measurement
    says how much slower the prompt then is."""
    if shape is None or not (s.flash_attn and s.backend.ggml_based):
        return ""
    for device, n in layers.items():
        if n and device.startswith("gpu:"):
            a = device_support(rig, device, s.kv_k, s.kv_v, shape, s.gpu_backend)
            if a.where in (FaWhere.CPU, FaWhere.FAILS):
                return f"{device}: {a.reason}"
    return ""


def estimate_prefill_reads(
    weight_reads: dict[str, float],
    layers: dict[str, int],
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    model: SpeedModel,
    attn_width: int,
    *,
    shape: FaShape | None = None,
) -> Prefill:
    """Prompt processing: each device multiplies the share of active parameters it
    holds and runs the attention products of its layers (QK and PV over the prompt,
    causal); the devices run one after another. `attn_width`: the embedding width, as
    the calibration (validation/speed_fit.py) counts the attention products. `shape`:
    the model's flash-attention shape; given, a GPU whose flash attention would fall
    back to the CPU makes the estimate unknown rather than the GPU's."""
    tokens = min(s.prompt_tokens, s.context)
    off_gpu = attention_off_gpu(layers, rig, s, shape)
    if off_gpu:
        return Prefill(prompt_tokens=tokens, basis=f"unknown: {off_gpu}")
    p, d = model.prefill, model.decode
    if p is None or d is None:
        return Prefill(prompt_tokens=tokens, basis="unknown: no prefill calibration loaded")
    mix = _layout_mix(layout)
    q = mixed_factor(mix, p.quant_factor)
    local = False
    total_read = sum(weight_reads.values())
    ubatches = -(-tokens // s.n_ubatch)
    seconds = 0.0
    for device, b in weight_reads.items():
        if b <= 0 or total_read <= 0:
            continue
        params = layout.n_active_params * b / total_read
        cpu = _cpu_of(rig, device)
        if cpu is not None:
            isa = cpu_isa(cpu)
            rate = isa_value(p.cpu_core_flops, isa)
            cores = cpu.cores or cpu.threads
            if not cores:
                return Prefill(prompt_tokens=tokens, basis="unknown: CPU core count not known")
            if not rate:
                return Prefill(
                    prompt_tokens=tokens,
                    basis=f"unknown: no calibrated CPU prompt rate for {isa.value} cores",
                )
            flops = rate * cores * _cpu_prompt_quant(p, isa, mix) / q
            flops *= core_share(cpu, cores, p.cpu_vcpu_factor)
            layer_s = d.layer_seconds.get(CPU_BACKEND, 0.0)
        else:
            gpu = _gpu(rig, device)
            backend, _ = _backend_key(gpu, s)
            eff = p.efficiency.get(device_class(gpu))
            if gpu.fp16_tflops is None or eff is None:
                return Prefill(
                    prompt_tokens=tokens, basis=f"unknown: {gpu.name} FP16 FLOPS not known"
                )
            flops = gpu.fp16_tflops * 1e12 * eff
            if gpu.vendor is Vendor.NVIDIA:
                flops *= geforce_accumulate_factor(gpu.name)
            layer_s = d.layer_seconds.get(backend.value, 0.0)
        n = layers.get(device, 0)
        attn = 4.0 * n * attn_width * tokens * (tokens / 2)
        t = (2.0 * params * tokens + attn) / (flops * q) + ubatches * n * layer_s
        scale = local_scale(model.local_prefill_scale, _device_key(rig, device), mix)
        if scale is not None:
            t /= scale
            local = True
        seconds += t
    if seconds <= 0:
        return Prefill(prompt_tokens=tokens, basis="unknown: nothing to compute")
    return Prefill(
        prompt_tokens=tokens,
        seconds=seconds,
        # a faster-than-predicted run (band.high) takes less time
        low_seconds=seconds / p.band.high,
        high_seconds=seconds / p.band.low,
        known=True,
        basis=f"estimated: (2 x active parameters x prompt tokens + attention) / (FLOPS x "
        f"efficiency); {model.local_basis if local else model.basis}",
    )
