"""How fast a placement runs: decode and prefill, a point with its calibrated band.

The public face of the speed model; other packages import from here only."""

from rigspark_gui.core.speed.devices import (
    cpu_isa,
    cpu_label,
    default_backend,
    device_class,
    quant_family,
)
from rigspark_gui.core.speed.estimate import (
    DecodeShape,
    DecodeTime,
    Prefill,
    Throughput,
    decode_time,
    estimate_decode_shape,
    estimate_prefill_reads,
    throughput_of,
)
from rigspark_gui.core.speed.model import (
    Band,
    CpuIsa,
    DecodeParams,
    DeviceClass,
    GpuBackend,
    PrefillParams,
    QuantFamily,
    SpeedModel,
)
from rigspark_gui.core.speed.network import (
    remote_runs,
    rpc_seconds,
    weights_transfer_seconds,
)
from rigspark_gui.core.speed.placed import (
    bytes_read_per_token,
    decode_depth,
    estimate_decode,
    estimate_prefill,
    layers_in_ranges,
)

__all__ = [
    "Band",
    "CpuIsa",
    "DecodeParams",
    "DecodeShape",
    "DecodeTime",
    "DeviceClass",
    "GpuBackend",
    "Prefill",
    "PrefillParams",
    "QuantFamily",
    "SpeedModel",
    "Throughput",
    "bytes_read_per_token",
    "cpu_isa",
    "cpu_label",
    "decode_depth",
    "decode_time",
    "default_backend",
    "device_class",
    "estimate_decode",
    "estimate_decode_shape",
    "estimate_prefill",
    "estimate_prefill_reads",
    "layers_in_ranges",
    "quant_family",
    "remote_runs",
    "rpc_seconds",
    "throughput_of",
    "weights_transfer_seconds",
]
