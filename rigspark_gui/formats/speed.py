"""The speed model's fitted parameters (data/perf.json) and a machine's own calibration."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from rigspark_gui.core import speed as core_speed
from rigspark_gui.core.speed import CpuIsa, DeviceClass, QuantFamily
from rigspark_gui.formats.base import Boundary


class Band(Boundary):
    record: ClassVar[type] = core_speed.Band
    low: float = Field(gt=0, le=1)
    high: float = Field(ge=1)
    rows: int = Field(ge=0, description="held-out rows the band was taken from")


class DecodeParams(Boundary):
    record: ClassVar[type] = core_speed.DecodeParams
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
    cpu_isa_quant_factor: dict[str, float] = Field(
        default_factory=dict, description='"isa:family" -> adjustment of cpu_quant_factor'
    )
    cpu_measured_efficiency: float | None = Field(
        default=None, gt=0, le=1.5, description="share of a measured RAM bandwidth"
    )
    cpu_vcpu_factor: float | None = Field(
        default=None, gt=0, description="a VM's vCPU against a physical core"
    )


class PrefillParams(Boundary):
    record: ClassVar[type] = core_speed.PrefillParams
    efficiency: dict[DeviceClass, float] = Field(description="share of dense FP16 FLOPS")
    quant_factor: dict[QuantFamily, float]
    cpu_core_flops: dict[CpuIsa, float] = Field(description="FLOP/s per core, prompt matmuls")
    band: Band
    cpu_quant_factor: dict[str, float] = Field(
        default_factory=dict, description='"isa:family" -> CPU prompt-rate factor'
    )
    cpu_vcpu_factor: float | None = Field(
        default=None, gt=0, description="a VM's vCPU prompt rate against a physical core's"
    )


class SpeedModelFile(Boundary):
    record: ClassVar[type] = core_speed.SpeedModel
    decode: DecodeParams | None = None
    prefill: PrefillParams | None = None
    basis: str = Field(default="", description="which calibration, in words")
    source: str = ""
    local_decode_scale: dict[str, dict[str, float]] = Field(default_factory=dict)
    local_prefill_scale: dict[str, dict[str, float]] = Field(default_factory=dict)
    local_basis: str = ""
    local_band: Band | None = Field(
        default=None, description="band of an estimate on a calibrated device"
    )
