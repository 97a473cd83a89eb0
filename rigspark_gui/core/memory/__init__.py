"""How many bytes llama.cpp allocates: weights (per tensor, with llama-quantize's type
rules and the CPU repack copy), the KV cache and the compute buffers.

The public face of memory sizing; other packages import from here only."""

from rigspark_gui.core.memory.compute_buffer import (
    PIPELINE_COPIES,
    device_compute_bytes,
    host_compute_bytes,
    output_buffer_bytes,
    pipeline_copies,
)
from rigspark_gui.core.memory.kv_cache import (
    kv_bytes_per_layer,
    kv_bytes_per_token,
    kv_cells,
    kv_row_pair_bytes,
    kv_total_bytes,
)
from rigspark_gui.core.memory.params import param_count
from rigspark_gui.core.memory.repack import (
    RepackBytes,
    cpu_repack_bytes,
    is_repacked,
    repack_for,
    repack_types,
)
from rigspark_gui.core.memory.tensors import TensorRow, gguf_padded, synth_rows, synthesize_tensors
from rigspark_gui.core.memory.weights import (
    WeightsLayout,
    file_bytes_estimate,
    weights_floor,
    weights_layout,
)

__all__ = [
    "PIPELINE_COPIES",
    "RepackBytes",
    "TensorRow",
    "WeightsLayout",
    "cpu_repack_bytes",
    "device_compute_bytes",
    "file_bytes_estimate",
    "gguf_padded",
    "host_compute_bytes",
    "is_repacked",
    "kv_bytes_per_layer",
    "kv_bytes_per_token",
    "kv_cells",
    "kv_row_pair_bytes",
    "kv_total_bytes",
    "output_buffer_bytes",
    "param_count",
    "pipeline_copies",
    "repack_for",
    "repack_types",
    "synth_rows",
    "synthesize_tensors",
    "weights_floor",
    "weights_layout",
]
