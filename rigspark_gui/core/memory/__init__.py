"""How many bytes llama.cpp allocates: weights (per tensor, with llama-quantize's type
rules and the CPU repack copy), the KV cache and the compute buffers.

The public face of memory sizing; other packages import from here only."""

from rigspark_gui.core.memory.arch_hybrid import (
    DELTANET_ARCHS,
    HYBRID_ARCHS,
    ROLLBACK_ARCHS,
    STATE_PASSES,
    state_rows,
)
from rigspark_gui.core.memory.arch_kimi import KDA_ARCHS
from rigspark_gui.core.memory.compute_buffer import (
    PIPELINE_COPIES,
    device_compute_bytes,
    host_compute_bytes,
    n_graph_tokens,
    output_buffer_bytes,
    pipeline_copies,
)
from rigspark_gui.core.memory.compute_coverage import compute_note
from rigspark_gui.core.memory.kv_cache import (
    kv_bytes_per_layer,
    kv_bytes_per_token,
    kv_cells,
    kv_cells_per_stream,
    kv_row_pair_bytes,
    kv_streams,
    kv_total_bytes,
    recurrent_state_bytes,
    state_bytes_per_layer,
    state_total_bytes,
)
from rigspark_gui.core.memory.params import param_count
from rigspark_gui.core.memory.projector import (
    ProjectorLoad,
    max_image_size,
    projector_load,
    warmup_image_size,
)
from rigspark_gui.core.memory.repack import (
    ENGINE_LOADING,
    KOBOLD_MMAP_FLAG,
    LOAD_FLAG_BACKENDS,
    MMAP_CHOICE_BACKENDS,
    NO_MMAP_FLAG,
    NO_REPACK_FLAG,
    CpuLoading,
    RepackBytes,
    cpu_repack_bytes,
    is_repacked,
    loading_note,
    reads_in,
    repack_for,
    repack_types,
)
from rigspark_gui.core.memory.tensors import (
    TensorRow,
    attn_v_ffn_down_counts,
    block_tensors,
    gguf_padded,
    recipe_context,
    synth_rows,
    synthesize_tensors,
)
from rigspark_gui.core.memory.weights import (
    WeightsLayout,
    file_bytes_estimate,
    weights_floor,
    weights_layout,
)

__all__ = [
    "DELTANET_ARCHS",
    "ENGINE_LOADING",
    "HYBRID_ARCHS",
    "KDA_ARCHS",
    "KOBOLD_MMAP_FLAG",
    "LOAD_FLAG_BACKENDS",
    "MMAP_CHOICE_BACKENDS",
    "NO_MMAP_FLAG",
    "NO_REPACK_FLAG",
    "PIPELINE_COPIES",
    "ROLLBACK_ARCHS",
    "STATE_PASSES",
    "CpuLoading",
    "ProjectorLoad",
    "RepackBytes",
    "TensorRow",
    "WeightsLayout",
    "attn_v_ffn_down_counts",
    "block_tensors",
    "compute_note",
    "cpu_repack_bytes",
    "device_compute_bytes",
    "file_bytes_estimate",
    "gguf_padded",
    "host_compute_bytes",
    "is_repacked",
    "kv_bytes_per_layer",
    "kv_bytes_per_token",
    "kv_cells",
    "kv_cells_per_stream",
    "kv_row_pair_bytes",
    "kv_streams",
    "kv_total_bytes",
    "loading_note",
    "max_image_size",
    "n_graph_tokens",
    "output_buffer_bytes",
    "param_count",
    "pipeline_copies",
    "projector_load",
    "reads_in",
    "recipe_context",
    "recurrent_state_bytes",
    "repack_for",
    "repack_types",
    "state_bytes_per_layer",
    "state_rows",
    "state_total_bytes",
    "synth_rows",
    "synthesize_tensors",
    "warmup_image_size",
    "weights_floor",
    "weights_layout",
]
