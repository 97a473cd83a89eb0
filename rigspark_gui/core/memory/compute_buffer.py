"""Compute (scratch) buffer per device, an estimate of ggml-alloc's peak.

llama.cpp reserves the graph for min(n_ctx, n_ubatch) tokens against the full KV.
On a GPU the peak is the largest of three phases, each with what stays alive beside it
(an f32 row is 4 * n_embd * n_tokens bytes):
- attention without flash attention: the f32 scores 4 * n_kv * n_tokens * n_head, the
  f32 KQ mask 4 * n_kv * n_tokens and four rows (six where Q, K and V come out of one
  fused matrix); with flash attention the f16 mask, the output and the same rows;
- the FFN: gate and up activations 2 * 4 * n_ff * n_tokens beside three rows;
- on the device holding the output head, the logits 4 * n_vocab * n_tokens and a row.
These reproduce llama.cpp's CUDA0 compute buffer to the MiB in ten published full-offload
logs (Llama, Mistral, Qwen2, GPT-NeoX; 512 to 81920 cells; flash attention on and off;
tests/core/test_compute_buffer.py), and with pipeline parallelism (several GPUs) the
per-device buffers of three more. The pinned host buffer holds the input row and the
f32 mask. The CPU backend has its own fitted formula (`_cpu_compute_bytes`).
Gemma 3n, DeepSeek V4 and Kimi Linear add a peak phase of their own graphs
(compute_gemma3n, compute_dsv4, compute_kimi), taken beside these.
"""

from __future__ import annotations

from rigspark_gui.core.memory.arch_dsa import dsa_indexer_compute_bytes
from rigspark_gui.core.memory.arch_gemma4 import ple_compute_bytes
from rigspark_gui.core.memory.compute_dsv4 import DSV4_ARCHS, dsv4_compute_bytes
from rigspark_gui.core.memory.compute_gemma3n import GEMMA3N_ARCHS, gemma3n_projection_bytes
from rigspark_gui.core.memory.compute_kimi import KDA_ARCHS, kimi_compute_bytes
from rigspark_gui.core.memory.kv_cache import attention_kinds, kv_cells_per_stream
from rigspark_gui.core.memory.tensors import FUSED_QKV_ARCHS
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.settings import Backend, PlanSettings

# f32 rows of n_embd per token alive beside the attention scores (fused QKV: more),
# fitted on llama.cpp's CUDA logs (see the module docstring), and beside the FFN
# activations. No published log has the FFN phase as its peak: 3 rows is the most the
# open-llama 512-cell log allows (its logits phase, 70.50 MiB, must stay the larger),
# so FFN-bound models (wide n_ff, small vocabulary, flash attention) are the least
# checked case. The flash-attention phase uses the same rows, unchecked for the same
# reason (every flash-attention log peaks at the logits).
_ATTN_ROWS = 4
_FUSED_QKV_ATTN_ROWS = 6
_FFN_ROWS = 3
_VLLM_ACT_ROWS = 6
# CPU backend (fitted, see _cpu_compute_bytes): f32 rows of n_embd per token alive beside
# the FFN activations (7.0 measured at n_embd 512) and beside the attention scores (5.5).
_CPU_FFN_ROWS = 7
_CPU_ATTN_ROWS = 6
# vLLM profiles a peak activation before sizing its KV pool; its sampler and
# activations at max_num_batched_tokens (8192 by default in V1) dominate.
_VLLM_BATCH_TOKENS = 8192
# ggml-backend.cpp GGML_SCHED_MAX_COPIES: input copies per device under pipeline parallelism
PIPELINE_COPIES = 4


def n_graph_tokens(s: PlanSettings) -> int:
    return min(s.context, s.n_ubatch)


def device_compute_bytes(
    g: Geometry,
    s: PlanSettings,
    layers: list[int],
    has_output: bool,
    cpu: bool = False,
    copies: int = 1,
    rpc_cpu: bool = False,
    first: bool | None = None,
    last: bool | None = None,
) -> int:
    """Peak scratch bytes on a device that runs `layers` (and the head if `has_output`).

    `rpc_cpu`: the device is another host's CPU behind ggml-rpc-server (`rpc-cpu:HOST`),
    see `_rpc_compute_bytes`; `first` / `last`: it runs layer 0 / the last layer (by
    default read off `layers`, which callers passing one representative layer get wrong).

    `copies` > 1: llama.cpp's pipeline parallelism (see `pipeline_copies`) keeps that
    many copies of each input the device receives (the activation row and the f32 KQ
    mask) for the whole graph, beside the peak phase."""
    if not layers and not has_output:
        return 0
    if s.backend is Backend.VLLM:
        t = _VLLM_BATCH_TOKENS
        return 4 * t * (g.n_embd * _VLLM_ACT_ROWS + 2 * max(g.n_ff, g.n_ff_expert)) + (
            4 * g.n_vocab * 256 if has_output else 0
        )
    # DeepSeek sparse attention: the indexer's mask and scores beside the attention's
    dsa = dsa_indexer_compute_bytes(
        g,
        s.flash_attn,
        max((kv_cells_per_stream(g, il, s) for il in layers), default=0),
        n_graph_tokens(s),
    )
    if g.architecture in DSV4_ARCHS:  # DeepSeek V4's indexer: in compute_dsv4
        dsa = 0
    # Gemma's per-layer inputs: live through every layer of the graph
    dsa += ple_compute_bytes(g, n_graph_tokens(s)) if layers else 0
    own = _own_graph_bytes(g, s, layers, cpu)
    if cpu:
        return max(_cpu_compute_bytes(g, s, layers, has_output) + dsa, own)
    if rpc_cpu:
        first = 0 in layers if first is None else first
        last = g.n_layer - 1 in layers if last is None else last
        return max(_rpc_compute_bytes(g, s, layers, has_output, first, last, copies), own)
    t = n_graph_tokens(s)
    row = 4 * g.n_embd * t
    peak = 0
    inputs = row  # the activations (or embeddings) the device receives
    if layers:
        n_kv = max(kv_cells_per_stream(g, il, s) for il in layers)
        mask = 4 * n_kv * t
        inputs += mask
        rows = _FUSED_QKV_ATTN_ROWS if g.architecture in FUSED_QKV_ARCHS else _ATTN_ROWS
        if s.flash_attn:
            attn = 2 * n_kv * _pad(t, 64) + 4 * g.head_dim_v * g.n_head * t + rows * row
        else:
            # a single copy of the mask lives through the attention; pipeline copies
            # are counted with the inputs below
            attn = 4 * n_kv * t * g.n_head + (mask if copies == 1 else 0) + rows * row
        ffn = 2 * 4 * _ffn_width(g) * t + _FFN_ROWS * row
        peak = max(attn, ffn)
    if has_output:
        peak = max(peak, 4 * g.n_vocab * t + row)
    return max(peak + (copies * inputs if copies > 1 else 0) + dsa, own)


def _own_graph_bytes(g: Geometry, s: PlanSettings, layers: list[int], cpu: bool) -> int:
    """The peak phase of a graph unlike a plain transformer's (compute_gemma3n,
    compute_dsv4, compute_kimi), taken beside the generic phases; 0 for other
    architectures."""
    t = n_graph_tokens(s)
    if not layers:
        return 0
    if g.architecture in DSV4_ARCHS:
        return dsv4_compute_bytes(g, s, t, layers)
    if g.architecture in KDA_ARCHS:
        return kimi_compute_bytes(g, s, t, layers, cpu)
    if g.architecture in GEMMA3N_ARCHS:
        if cpu:
            inputs = _cpu_prefix_bytes(g, s, layers)
        else:  # the activations row and the f32 KQ mask the device receives
            n_kv = max(kv_cells_per_stream(g, il, s) for il in layers)
            inputs = 4 * g.n_embd * t + 4 * n_kv * t
        return gemma3n_projection_bytes(g, t, inputs, cpu)
    return 0


def pipeline_copies(gpus_seen: int, all_on_gpus: bool, s: PlanSettings) -> int:
    """Input copies llama.cpp's scheduler keeps per device: 4 (GGML_SCHED_MAX_COPIES)
    with pipeline parallelism, which llama-context.cpp turns on when the backend sees
    more than one GPU, every layer and the head are offloaded, layers are split (not
    rows), KV is offloaded and no -ot override is given, on devices with async compute
    and events (CUDA and HIP). `gpus_seen`: GPUs of that backend in the machine, used
    or not (a --tensor-split of 0 still counts a device)."""
    pp = s.backend.ggml_based and gpus_seen > 1 and all_on_gpus
    return PIPELINE_COPIES if pp else 1


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _ffn_width(g: Geometry) -> int:
    return max(g.n_ff, g.n_ff_expert * max(g.n_expert_used, 1), g.n_ff_shared_expert)


def _rpc_compute_bytes(
    g: Geometry,
    s: PlanSettings,
    layers: list[int],
    has_output: bool,
    first: bool,
    last: bool,
    copies: int,
) -> int:
    """An RPC device's buffer as llama.cpp b11434 reserves it (ggml-rpc-server on a CPU).

    To llama.cpp the device is a GPU: the token embeddings are looked up on the host (the
    input layer stays on the CPU) and the scheduler (ggml-backend.cpp, split_graph) copies
    into each of the device's splits every tensor it reads from another backend. The
    copies are allocated first, at the bottom of the buffer:
    - the device running layer 0: three f32 rows (build_inp_embd's mixed-batch embeddings,
      the token embeddings and the row the unused embeddings-input branch adds) and the
      mixed-batch slots (8 B a token); any later device: two rows (the residual and the
      first norm of its first layer, which the previous device computes);
    - the positions (4 B a token) and, for each cache its layers use (full and sliding
      window), the K and V row indices (8 B a token each; V per element without flash
      attention, as V is stored transposed) and the KQ mask (f16 with flash attention,
      else f32); the Hadamard matrices of a quantized cache
      (`_rot_bytes`) and, on the device running the last layer, out_ids.
    With pipeline parallelism (`copies` > 1) the copies are graph leafs, kept in
    GGML_SCHED_MAX_COPIES copies for the whole graph; without it they are nodes that
    ggml-alloc frees once read, and their rows are reused by the layers above.
    The device running layer 0 also keeps the mixed path's ggml_dup row (node_2: it ends
    in a set_rows view nobody reads, so it is never freed) just above the copies.
    On top of that (measured with a logging ggml-alloc.c on llama-fit-params -fitp,
    validation/fit_cases.json traces; RPC rows of docs/validation.md) the largest of:
    - the FFN: gate, up and swiglu, 3 x 4 * n_ff * n_tokens; with pipeline copies two
      rows and Q (n_head x head_dim per token) stay below them: from the second layer on
      the residual, the attention norm and Q's matmul output each take a slot in turn,
      and gate reuses the rope'd Q's above them (one row fewer when both K and V are
      rotated: Q's rotation frees a slot); without them the residual and norm take the
      freed input rows;
    - attention without flash attention: Q and the f32 scores (soft_max works in place),
      over three rows (pipeline) or one (the dup row, or a freed input row);
    - the head: the logits 4 * n_vocab * n_tokens over the last row; without pipeline
      copies on a later device everything under them is freed by then (just the row
      below); on the device running layer 0 they sit on the dup row unless they fit in
      the hole the freed copies leave under it (all but the last row, at the bottom)."""
    t = n_graph_tokens(s)
    row = 4 * g.n_embd * t
    fa = s.flash_attn
    n_kv = max((kv_cells_per_stream(g, il, s) for il in layers), default=0)
    if layers:
        # per cache the device's layers use (sliding window and full: two of each)
        per_cache = 0
        for rep in {g.is_sliding(il): il for il in layers}.values():
            v_idxs = 8 * t * (1 if fa else g.head_dim_v * g.n_head_kv)
            mask = (2 if fa else 4) * kv_cells_per_stream(g, rep, s) * t
            per_cache += 8 * t + v_idxs + mask
        rows = 3 * row + 8 * t if first else 2 * row
        inputs = rows + 4 * t + per_cache + (4 * t if last else 0) + _rot_bytes(g, s)
    else:  # the head alone: the last layer's output row
        inputs = row if has_output else 0
    pipeline = copies > 1
    base = copies * inputs + (row if first else 0)
    peak = base
    if layers:
        ffn = 3 * 4 * _ffn_width(g) * t
        if any(g.is_moe_layer(il) for il in layers):
            # mul_mat_id's down output, n_expert_used rows, does not fit in the hole gate
            # and up leave below swiglu
            moe = 3 * 4 * g.n_ff_expert * g.n_expert_used * t + row * g.n_expert_used
            ffn = max(ffn, moe)
        q = 4 * g.n_head * g.head_dim_k * t
        # rotated K and V (quantized caches) reorder the layer's rows: one row fewer
        below = (1 if _rotated(g, s) == (True, True) else 2) * row + q
        peak = max(peak, base + (below if pipeline else 0) + ffn)
        if not fa:
            attn = q + 4 * n_kv * t * g.n_head
            peak = max(peak, (base + 3 * row if pipeline else inputs + row) + attn)
    if has_output:
        logits = 4 * g.n_vocab * t
        if pipeline:
            head = base + row + logits
        elif first:  # the freed copies under the dup row, but the last row, form a hole
            head = base + (logits if logits > inputs - row else 0)
        else:
            head = row + logits
        peak = max(peak, head)
    return peak


def _rotated(g: Geometry, s: PlanSettings) -> tuple[bool, bool]:
    """Whether llama-kv-cache.cpp rotates K and V (attn_rot_k / attn_rot_v): a quantized
    cache type and a head size that is a multiple of 64."""
    k = s.kv_k.quantized and g.head_dim_k % 64 == 0
    return k, s.kv_v.quantized and g.head_dim_v % 64 == 0


def _rot_bytes(g: Geometry, s: PlanSettings) -> int:
    """The f32 Hadamard inputs attn_inp_k_rot (n_rot_k squared: the largest power of two
    from 64 dividing the K head size) and attn_inp_v_rot (64 x 64)."""
    k, v = _rotated(g, s)
    n_rot = 64
    while k and g.head_dim_k % (2 * n_rot) == 0:
        n_rot *= 2
    return (4 * n_rot * n_rot if k else 0) + (4 * 64 * 64 if v else 0)


def _cpu_compute_bytes(g: Geometry, s: PlanSettings, layers: list[int], has_output: bool) -> int:
    """The CPU backend's buffer as llama.cpp b11434 reserves it (ggml-alloc's best fit).

    Read off the graph (src/llama-graph.cpp, src/models/llama.cpp) and ggml-alloc.c, and
    checked byte for byte on validation/compute_b11434.json (docs/validation.md).
    ggml_gallocr_alloc_graph_impl allocates every graph input first, in graph order, at
    the bottom of the buffer; a freed input leaves a hole that only a tensor no larger
    than it can reuse. So every phase sits on the same prefix:
    - the inputs: token ids, out_ids, positions (4 B a token each), the mixed-batch token
      ids and slots (4 + 8 B), the K row indices (8 B), the V indices (8 B a token with
      flash attention, 8 B per V element without it: V is stored transposed), the KQ
      mask (f32, f16 with flash attention: n_kv x n_tokens over all streams) and two
      f32 rows: the embeddings input of the unused branch, never consumed so never freed,
      and the mixed-batch copy (build_inp_embd);
    - three rows: the token embeddings, the mixed path's get_rows (freed: a one-row
      hole) and its ggml_dup, which ends in a set_rows view nobody reads, so it is never
      freed either and pins everything after it above the prefix.
    On top of the prefix the largest of:
    - attention without flash attention, in the first layer: Q (n_head x head_dim per
      token) and the f32 scores 4 * n_kv * n_tokens * n_head (soft_max works in place);
      the K and V projections are freed into the tail before the scores are placed;
    - the FFN: gate, up and their swiglu, 3 x 4 * n_ff * n_tokens;
    - the head: the logits 4 * n_vocab * n_tokens, unless they fit in the hole the KQ
      mask leaves once the last layer has read it, plus the last row when the last
      layer's FFN leaves a hole of its own size just above the prefix (`_head_row`)."""
    t = n_graph_tokens(s)
    row = 4 * g.n_embd * t
    n_kv = max((kv_cells_per_stream(g, il, s) for il in layers), default=0)
    mask = (2 if s.flash_attn else 4) * n_kv * t if layers else 0
    v_idxs = 8 * t * (1 if s.flash_attn else g.head_dim_v * g.n_head_kv)
    prefix = _cpu_prefix_bytes(g, s, layers)
    peak = 0
    ffn_t = 4 * _ffn_width(g) * t
    if layers:
        q = 4 * g.n_head * g.head_dim_k * t
        attn = 0 if s.flash_attn else q + 4 * n_kv * t * g.n_head
        peak = max(attn, 3 * ffn_t)
    if has_output:
        logits = 4 * g.n_vocab * t
        # the hole from the mixed-batch ids to the dup row, less the residual row
        hole = mask + 2 * row + 28 * t + v_idxs
        if logits > hole:
            peak = max(peak, logits + (row if _head_row(mask + row + v_idxs, ffn_t, row) else 0))
    return prefix + peak


def _cpu_prefix_bytes(g: Geometry, s: PlanSettings, layers: list[int]) -> int:
    """The inputs and embedding rows every CPU phase sits on (see _cpu_compute_bytes)."""
    t = n_graph_tokens(s)
    row = 4 * g.n_embd * t
    n_kv = max((kv_cells_per_stream(g, il, s) for il in layers), default=0)
    mask = (2 if s.flash_attn else 4) * n_kv * t if layers else 0
    v_idxs = 8 * t * (1 if s.flash_attn else g.head_dim_v * g.n_head_kv)
    small = 4 * t * 3 + 12 * t + 8 * t  # tokens, out_ids, pos; mixed ids + slots; K rows
    return 5 * row + small + v_idxs + mask + _other_caches_bytes(g, s, layers)


def _other_caches_bytes(g: Geometry, s: PlanSettings, layers: list[int]) -> int:
    """The inputs of a second cache (sliding-window layers beside full ones, as Gemma-2
    has): its own K and V row indices and KQ mask, allocated with the first cache's at
    the bottom of the buffer (ggml-alloc placements on llama-fit-params b11434)."""
    kinds = attention_kinds(g)  # the graph builds both caches' inputs, whatever it runs
    if not layers or len(kinds) < 2:
        return 0
    t = n_graph_tokens(s)
    n_kv = min(kv_cells_per_stream(g, il, s) for il in kinds)
    v_idxs = 8 * t * (1 if s.flash_attn else g.head_dim_v * g.n_head_kv)
    return 8 * t + v_idxs + (2 if s.flash_attn else 4) * n_kv * t


def _head_row(low: int, ffn_t: int, row: int) -> bool:
    """Whether the last layer's output row lands just above the prefix (under the logits).

    In the last layer the mask's hole (`low`: mask, V indices and a row, beside the FFN
    norm's row) takes by best fit the FFN's gate, then up, then swiglu while they fit.
    The output row then takes the smallest hole it fits: the one gate or up left above
    the prefix when exactly one of the three went low, or the tail (at the prefix) when
    only swiglu did; otherwise a hole below."""
    gate_low = ffn_t <= low
    up_low = gate_low and 2 * ffn_t <= low
    if up_low:
        swiglu_low = low - 2 * ffn_t >= ffn_t
    elif gate_low:
        swiglu_low = low - ffn_t >= ffn_t
    else:  # the FFN norm's row, freed by then, joins the hole
        swiglu_low = low + row >= ffn_t
    return (gate_low, up_low, swiglu_low) in ((False, False, True), (True, False, False))


def _cpu_compute_bytes_legacy(
    g: Geometry, s: PlanSettings, layers: list[int], has_output: bool
) -> int:
    """The formula fitted on the llama.cpp of validation/cases.json (llama-cpp-python
    0.3.36), kept for those recorded cases: the KQ mask beside the largest of the scores
    (+ _CPU_ATTN_ROWS rows), the FFN (2 x n_ff + _CPU_FFN_ROWS rows) and the logits."""
    t = n_graph_tokens(s)
    row = 4 * g.n_embd * t
    peak = 0
    mask = 0
    if layers:
        n_kv = max(kv_cells_per_stream(g, il, s) for il in layers)
        mask = (2 if s.flash_attn else 4) * n_kv * t
        ffn = 2 * 4 * _ffn_width(g) * t + _CPU_FFN_ROWS * row
        attn = 0 if s.flash_attn else 4 * n_kv * t * g.n_head + _CPU_ATTN_ROWS * row
        peak = max(ffn, attn)
    if has_output:
        peak = max(peak, 4 * g.n_vocab * t + row)
    return mask + peak


def output_buffer_bytes(g: Geometry, s: PlanSettings) -> int:
    """The logits buffer in host memory: n_vocab floats for each of n_seq outputs, which
    is what llama_context reserves at creation (src/llama-context.cpp, output_reserve
    called with n_seq_max). It grows only if a batch asks for more logits."""
    if s.backend is Backend.VLLM:
        return 0
    return 4 * g.n_vocab * s.parallel


def host_compute_bytes(g: Geometry, s: PlanSettings, copies: int = 1) -> int:
    """The pinned host buffer when layers run on a GPU: the input embeddings row and the
    f32 KQ mask (built on the host even for flash attention, which casts it on the GPU);
    with pipeline parallelism `copies` of the mask, a graph input."""
    t = n_graph_tokens(s)
    n_kv = max((kv_cells_per_stream(g, il, s) for il in attention_kinds(g)), default=0)
    return 4 * g.n_embd * t + copies * 4 * n_kv * t
