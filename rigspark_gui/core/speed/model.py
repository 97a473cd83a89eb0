"""The speed model's parameters and the vocabulary it is fitted in (DESIGN §4).

Decode, per token and per device: bytes read / (bandwidth x efficiency of the device
class x factor of the GPU backend x factor of the quantization family) plus a fixed cost
per layer of the backend; on the CPU, the larger of that memory time and the compute time
(weights' elements / (cores x per-core rate of the vector ISA x quantization factor)).
Devices run one after another (layer split), with a hand-off per device boundary.

Prefill: 2 x active parameters x prompt tokens / (FLOPS x prefill efficiency of the
class x quantization factor), plus the same per-layer cost once per ubatch.

The parameters are fitted by `scripts/calibrate_speed.py` on the cited rows of
`data/perf.json` and stored in `data/speed_model.json` with the band of their held-out
residuals; the engine only evaluates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from rigspark_gui.core.settings import GpuBackend

__all__ = ["GpuBackend"]

CPU_BACKEND = "cpu"


class DeviceClass(StrEnum):
    """Groups of devices that reach a similar share of their memory bandwidth."""

    NVIDIA = "nvidia"  # GeForce / RTX workstation cards, GDDR
    NVIDIA_HBM = "nvidia-hbm"  # data-centre cards with HBM (P100, V100, A100, H100 ...)
    AMD = "amd"  # Radeon, GDDR
    AMD_HBM = "amd-hbm"  # Instinct, Radeon VII
    INTEL = "intel"  # Arc
    APPLE = "apple"  # M-series GPU over unified memory
    CPU = "cpu"


class QuantFamily(StrEnum):
    """Quantization families whose kernels read memory at a similar rate."""

    FLOAT = "float"  # F32, F16, BF16
    Q8 = "q8"  # Q8_0
    LEGACY = "legacy"  # Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
    KQUANT = "kquant"  # Q2_K ... Q6_K and their mixes
    IQ = "iq"  # IQ1 ... IQ3, IQ4_XS (codebook lookups)
    MXFP4 = "mxfp4"


class CpuIsa(StrEnum):
    """The vector ISA llama.cpp's CPU kernels use, most capable first; a fitted figure
    missing for one falls back along `ISA_FALLBACK`."""

    AMX = "amx"  # AMX-INT8/BF16 tiles (Sapphire Rapids and later)
    AVX512_VNNI = "avx512-vnni"  # AVX-512 with VNNI/BF16 dot products (Ice Lake, Zen 4+)
    AVX512 = "avx512"  # AVX-512F without VNNI (Skylake-SP)
    AVX2 = "avx2"
    SVE = "sve"  # Arm SVE (Graviton 3/4, Grace, Neoverse V)
    # Apple's M-series performance cores: NEON too, but four 128-bit pipes and i8mm at
    # 3.2-4.4 GHz do about twice the work per core of a Cortex-A7x or X1
    APPLE = "apple"
    NEON = "neon"
    OTHER = "other"


# Where a figure fitted for no CPU of an ISA is taken from instead: the next ISA down,
# whose kernels the newer one also runs.
ISA_FALLBACK: dict[CpuIsa, CpuIsa] = {
    CpuIsa.AMX: CpuIsa.AVX512_VNNI,
    CpuIsa.AVX512_VNNI: CpuIsa.AVX512,
    CpuIsa.AVX512: CpuIsa.AVX2,
    CpuIsa.SVE: CpuIsa.NEON,
    CpuIsa.APPLE: CpuIsa.NEON,
}


def isa_value(table: Mapping[CpuIsa, float], isa: CpuIsa) -> float | None:
    """A per-ISA figure, or the nearest fallback ISA's."""
    at: CpuIsa | None = isa
    while at is not None:
        if at in table:
            return table[at]
        at = ISA_FALLBACK.get(at)
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    """Multiplicative band around a point estimate: the 10th and 90th percentile of
    measured / predicted on rows held out of the fit."""

    low: float
    high: float
    # held-out rows the band was taken from
    rows: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeParams:
    # share of bandwidth, F16 reads
    efficiency: dict[DeviceClass, float]
    # relative to the vendor's own backend
    backend_factor: dict[str, float]
    # GPU kernels, relative to F16
    quant_factor: dict[QuantFamily, float]
    # "backend:family" -> adjustment of quant_factor
    backend_quant_factor: dict[str, float] = field(default_factory=dict)
    # fixed cost per layer per token
    layer_seconds: dict[str, float]
    # per device boundary, per token
    hop_seconds: float
    # share of the RAM bandwidth figure (a spec sheet's theoretical peak)
    cpu_efficiency: float
    # bytes/s one core streams: few threads cap RAM use (fitted as one figure for every
    # ISA: a core's outstanding line fills over the memory latency, not its vector width)
    cpu_core_bandwidth: dict[CpuIsa, float] = field(default_factory=dict)
    # F16 weights' elements/s per core
    cpu_core_rate: dict[CpuIsa, float]
    # CPU dot rate vs F16
    cpu_quant_factor: dict[QuantFamily, float]
    band: Band
    cpu_band: Band
    # "isa:family" -> adjustment of cpu_quant_factor (each ISA's dequantize-and-dot kernels
    # differ: IQ codebooks are cheap on NEON, costly on AVX2)
    cpu_isa_quant_factor: dict[str, float] = field(default_factory=dict)
    # share of a *measured* RAM bandwidth (a read stream over all cores, as the hardware
    # probe runs it): decode gets nearer to that than to a theoretical peak
    cpu_measured_efficiency: float | None = None
    # a virtual machine's vCPU against a physical core (compute and stream): a vCPU is a
    # host thread, often the sibling of another vCPU on one core
    cpu_vcpu_factor: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillParams:
    # share of dense FP16 FLOPS
    efficiency: dict[DeviceClass, float]
    quant_factor: dict[QuantFamily, float]
    # FLOP/s per core, prompt matmuls
    cpu_core_flops: dict[CpuIsa, float]
    band: Band
    # "isa:family" -> the CPU's prompt-rate factor (its GEMM kernels: repacked, AMX, KleidiAI
    # or plain dot products, differ by ISA far more than a GPU's)
    cpu_quant_factor: dict[str, float] = field(default_factory=dict)
    # a vCPU's prompt rate against a physical core's
    cpu_vcpu_factor: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedModel:
    """Fitted parameters with their provenance. An empty model (no data file) makes
    every estimate `unknown`."""

    decode: DecodeParams | None = None
    prefill: PrefillParams | None = None
    # which calibration, in words
    basis: str = ""
    source: str = ""
    # Measured / predicted on this machine (`rigspark-plan calibrate`), by device
    # ("cpu:NAME", "gpu:NAME") and quantization family ("*": over the families measured);
    # a plan's time on that device is divided by it.
    local_decode_scale: dict[str, dict[str, float]] = field(default_factory=dict)
    local_prefill_scale: dict[str, dict[str, float]] = field(default_factory=dict)
    local_basis: str = ""
    # band of an estimate on a calibrated device
    local_band: Band | None = None
