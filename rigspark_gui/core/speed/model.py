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

from enum import StrEnum

from rigspark_gui.core.model_spec import Frozen
from rigspark_gui.core.record import Field
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
    AVX512 = "avx512"
    AVX2 = "avx2"
    NEON = "neon"
    OTHER = "other"


class Band(Frozen):
    """Multiplicative band around a point estimate: the 10th and 90th percentile of
    measured / predicted on rows held out of the fit."""

    low: float = Field(gt=0, le=1)
    high: float = Field(ge=1)
    rows: int = Field(ge=0, description="held-out rows the band was taken from")


class DecodeParams(Frozen):
    efficiency: dict[DeviceClass, float] = Field(description="share of bandwidth, F16 reads")
    backend_factor: dict[str, float] = Field(description="relative to the vendor's own backend")
    quant_factor: dict[QuantFamily, float] = Field(description="GPU kernels, relative to F16")
    backend_quant_factor: dict[str, float] = Field(
        default_factory=dict, description='"backend:family" -> adjustment of quant_factor'
    )
    layer_seconds: dict[str, float] = Field(description="fixed cost per layer per token")
    hop_seconds: float = Field(ge=0, description="per device boundary, per token")
    cpu_efficiency: float = Field(gt=0, le=1.5, description="share of the RAM bandwidth figure")
    cpu_core_bandwidth: dict[CpuIsa, float] = Field(
        default_factory=dict, description="bytes/s one core streams: few threads cap RAM use"
    )
    cpu_core_rate: dict[CpuIsa, float] = Field(description="F16 weights' elements/s per core")
    cpu_quant_factor: dict[QuantFamily, float] = Field(description="CPU dot rate vs F16")
    band: Band
    cpu_band: Band


class PrefillParams(Frozen):
    efficiency: dict[DeviceClass, float] = Field(description="share of dense FP16 FLOPS")
    quant_factor: dict[QuantFamily, float]
    cpu_core_flops: dict[CpuIsa, float] = Field(description="FLOP/s per core, prompt matmuls")
    band: Band


class SpeedModel(Frozen):
    """Fitted parameters with their provenance. An empty model (no data file) makes
    every estimate `unknown`."""

    decode: DecodeParams | None = None
    prefill: PrefillParams | None = None
    basis: str = Field(default="", description="which calibration, in words")
    source: str = ""
    # Measured / predicted on this machine (`rigspark-plan calibrate`), by device
    # ("cpu:NAME", "gpu:NAME") and quantization family ("*": over the families measured);
    # a plan's time on that device is divided by it.
    local_decode_scale: dict[str, dict[str, float]] = Field(default_factory=dict)
    local_prefill_scale: dict[str, dict[str, float]] = Field(default_factory=dict)
    local_basis: str = ""
    local_band: Band | None = Field(
        default=None, description="band of an estimate on a calibrated device"
    )
