"""Weights as a serving engine loads them: the Hugging Face checkpoint's own dtype, every
tensor on the GPUs, sharded by tensor parallelism and split into pipeline stages.

Formats (bytes per element of a linear layer's weight, plus its scales):
- BF16: 2 bytes. FP8 (W8A8, per-channel scales as compressed-tensors and
  `--quantization fp8` store them): 1 byte + 4 bytes per output channel.
- INT8 (compressed-tensors w8a8): 1 byte + 4 bytes per output channel.
- AWQ / GPTQ 4-bit, group 128: 0.5 byte + per group an fp16 scale and a packed 4-bit
  zero point; GPTQ also keeps an int32 group index per input row.
- MXFP4 (gpt-oss as released): routed experts at 0.5 byte + a 1-byte scale per 32
  values; attention and the rest BF16.
Embeddings, the LM head, norms and MoE routers stay 16-bit in every format (vLLM and
SGLang do not quantize them).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.memory import synthesize_tensors
from rigspark_gui.core.model import Geometry, TensorGroup

GROUP = 128


class ServingFormat(NamedTuple):
    name: str
    label: str
    linear_bytes: float  # per weight element
    per_channel_bytes: int  # per output channel (scales)
    per_group_bytes: float  # per group of GROUP input elements and output channel
    per_input_row_bytes: int  # GPTQ's g_idx
    quant_method: str  # vLLM --quantization / config quant_method ("" = none)
    words: str
    experts_only: bool = False  # only routed experts take the format; the rest is 16-bit
    # share of the bandwidth roofline its kernels reach at small batches, relative to
    # BF16 (validation/serving_speed.py: 4-bit fitted on two vLLM runs, four held out)
    decode_factor: float = 1.0


# vLLM's 4-bit kernels dequantize as they read: at one request they reach ~0.69 of the
# share of bandwidth BF16 does. Fitted (geometric mean) on Qwen2.5-7B-Instruct-AWQ and
# Qwen2.5-32B-Instruct-AWQ (Qwen's speed benchmark, vLLM 0.6.3, A100 80GB); the 14B AWQ,
# 7B and 32B GPTQ-Int4 and 72B AWQ TP 2 runs of the same page are held out.
FOUR_BIT_DECODE = 0.69

FORMATS: dict[str, ServingFormat] = {
    f.name: f
    for f in (
        ServingFormat("BF16", "BF16", 2.0, 0, 0.0, 0, "", "the model's own 16-bit weights"),
        ServingFormat("FP8", "FP8", 1.0, 4, 0.0, 0, "fp8", "8-bit float weights (W8A8)"),
        ServingFormat("INT8", "INT8 W8A8", 1.0, 4, 0.0, 0, "compressed-tensors", "8-bit int"),
        ServingFormat(
            "AWQ",
            "AWQ 4-bit",
            0.5,
            0,
            2.5,
            0,
            "awq",
            "4-bit AWQ, group 128",
            decode_factor=FOUR_BIT_DECODE,
        ),
        ServingFormat(
            "GPTQ",
            "GPTQ 4-bit",
            0.5,
            0,
            2.5,
            4,
            "gptq",
            "4-bit GPTQ, group 128",
            decode_factor=FOUR_BIT_DECODE,
        ),
        # gpt-oss ships its routed experts in MXFP4 (4-bit values, an 8-bit scale per 32)
        # and everything else in BF16
        ServingFormat("MXFP4", "MXFP4 experts", 0.5, 0, 4.0, 0, "mxfp4", "MXFP4 experts", True),
    )
}
# Auto's order, best quality first (AWQ and GPTQ are the same size class; AWQ is the
# one most 4-bit checkpoints on the Hub ship).
AUTO_FORMATS = ("BF16", "FP8", "INT8", "AWQ")


class RankWeights(NamedTuple):
    """Weight bytes by where they live, before any split."""

    embedding: int  # vocab-parallel: sharded by TP, on the first pipeline stage
    head: int  # LM head and final norm: sharded by TP, on the last stage (0 when tied)
    layers: tuple[int, ...]  # per block, the TP-sharded part (already divided by tp)
    n_params: int
    active_params: int  # read per token (MoE: the routed share of experts)


def _is_linear(name: str, shape: tuple[int, ...]) -> bool:
    return len(shape) >= 2 and "ffn_gate_inp" not in name and "norm" not in name


class _Sums(NamedTuple):
    """What a format's bytes are linear in, summed over some tensors: elements, output
    channels, groups of GROUP inputs per output channel, input rows (each per expert)."""

    elements: int
    channels: int
    groups: int
    rows: int

    def bytes_as(self, fmt: ServingFormat) -> float:
        return (
            fmt.linear_bytes * self.elements
            + fmt.per_channel_bytes * self.channels
            + fmt.per_group_bytes * self.groups
            + fmt.per_input_row_bytes * self.rows
        )


class _Shape(NamedTuple):
    """A model's tensors summed by where they live: 16-bit parts (embedding, head and
    norm, per-layer norms and routers) and each layer's linear weights (K/V apart)."""

    embedding: int  # elements
    head_matrix: int  # elements of 2-D head tensors (TP-sharded)
    head_rest: int  # elements of the final norm (replicated)
    layer_plain: tuple[int, ...]  # elements per layer kept 16-bit (replicated 1-D, routers)
    layer_router: tuple[int, ...]  # 2-D 16-bit per layer (routers: sharded)
    layer_kv: tuple[_Sums, ...]
    layer_other: tuple[_Sums, ...]
    layer_experts: tuple[_Sums, ...]  # routed experts (part of layer_other too)
    n_params: int
    active: float


def _sums(shape: tuple[int, ...]) -> _Sums:
    n = 1
    for d in shape:
        n *= d
    inp, out = shape[0], shape[1]
    rest = n // (inp * out)  # experts
    return _Sums(n, out * rest, -(-inp // GROUP) * out * rest, inp * rest)


def _add(a: _Sums, b: _Sums) -> _Sums:
    return _Sums(
        a.elements + b.elements, a.channels + b.channels, a.groups + b.groups, a.rows + b.rows
    )


@lru_cache(maxsize=256)
def _shape_of(g: Geometry) -> _Shape:
    """One pass over the 16-bit tensor list per model; every format and TP is then sums."""
    zero = _Sums(0, 0, 0, 0)
    plain = [0] * g.n_layer
    router = [0] * g.n_layer
    kv = [zero] * g.n_layer
    other = [zero] * g.n_layer
    experts = [zero] * g.n_layer
    embedding = head_matrix = head_rest = n_params = 0
    active = 0.0
    share_used = g.n_expert_used / g.n_expert if g.n_expert else 1.0
    for t in synthesize_tensors(g, "BF16"):
        n = t.n_elements
        n_params += n
        active += n * (share_used if t.expert else 1.0)
        if t.group is TensorGroup.INPUT:
            embedding += n
        elif t.group is TensorGroup.OUTPUT:
            if len(t.shape) >= 2:
                head_matrix += n
            else:
                head_rest += n
        elif t.layer is not None:
            il = t.layer
            if len(t.shape) < 2:
                plain[il] += n
            elif not _is_linear(t.name, t.shape):
                router[il] += n
            elif "attn_k" in t.name or "attn_v" in t.name:
                kv[il] = _add(kv[il], _sums(t.shape))
            else:
                other[il] = _add(other[il], _sums(t.shape))
                if t.expert:
                    experts[il] = _add(experts[il], _sums(t.shape))
    return _Shape(
        embedding, head_matrix, head_rest, tuple(plain), tuple(router), tuple(kv),
        tuple(other), tuple(experts), n_params, active,
    )  # fmt: skip


def _kv_share(g: Geometry, layer: int, tp: int) -> float:
    """The share of a layer's K/V projection one rank holds: 1/tp, or whole heads
    replicated when TP exceeds the KV heads (vLLM and SGLang both do this)."""
    heads = g.kv_heads(layer)
    if heads == 0:
        return 1.0 / tp
    return max(heads // tp, 1) / heads if heads >= tp else 1.0 / heads


@lru_cache(maxsize=1024)
def rank_weights(g: Geometry, fmt_name: str, tp: int, *, padded: bool = True) -> RankWeights:
    """Bytes one tensor-parallel rank holds, per block and for the embedding and head
    (`padded=False`: as the checkpoint stores them, without the engine's padding)."""
    fmt = FORMATS[fmt_name]
    sh = _shape_of(g)

    pad = mxfp4_expert_padding(g, tp) if padded and fmt.name == "MXFP4" else 1.0

    def linear(il: int) -> float:
        """The layer's sharded linear weights (not K/V) in this format."""
        if not fmt.experts_only:
            return sh.layer_other[il].bytes_as(fmt)
        ex = sh.layer_experts[il]
        return (sh.layer_other[il].elements - ex.elements) * 2.0 + ex.bytes_as(fmt) * pad

    dense = FORMATS["BF16"] if fmt.experts_only else fmt
    layers = tuple(
        int(
            2.0 * sh.layer_plain[il]
            + 2.0 * sh.layer_router[il] / tp
            + sh.layer_kv[il].bytes_as(dense) * _kv_share(g, il, tp)
            + linear(il) / tp
        )
        for il in range(g.n_layer)
    )
    return RankWeights(
        int(2.0 * sh.embedding / tp) + rope_bytes(g),
        int(2.0 * sh.head_matrix / tp + 2.0 * sh.head_rest),
        layers,
        sh.n_params,
        int(sh.active),
    )


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


def mxfp4_expert_padding(g: Geometry, tp: int) -> float:
    """How much larger vLLM allocates MXFP4 experts than the checkpoint stores them.

    vLLM (model_executor/layers/quantization/mxfp4.py, Mxfp4MoEMethod.create_weights)
    allocates w13/w2 with the expert intermediate size per TP rank and the hidden size
    padded for its MoE kernel; on GPUs without native FP4 (Hopper and older) 0.10's
    backend is Marlin ("Weight-only FP4 compression will be used leveraging the Marlin
    kernel"), which needs intermediate % 128 == 0 and hidden % 256 == 0. gpt-oss-120b:
    2880 -> 2944 and 2880 -> 3072, +9 % on the experts (65.97 GiB loaded on one H100 in
    vllm#23278 against 60.8 unpadded). Blackwell's FlashInfer backends pad both to 256,
    the Triton backend of later versions only the intermediate size to 64: Marlin's is
    the figure planned (the largest on the GPUs most plans are for)."""
    if not g.n_expert or not g.n_ff_expert or not g.n_embd:
        return 1.0
    inter = max(g.n_ff_expert // tp, 1)
    return (_round_up(inter, 128) / inter) * (_round_up(g.n_embd, 256) / g.n_embd)


def mxfp4_triton_saving(g: Geometry, tp: int) -> int:
    """Bytes a rank's MXFP4 experts take less under vLLM's Triton backend than under
    the Marlin layout planned. mxfp4.py picks Triton on Hopper when triton_kernels is
    installed (vLLM's images): the intermediate size is padded to 64 only and the hidden
    size not at all, but process_weights_after_loading keeps the checkpoint's scales
    registered beside the swizzled copy it hands the kernel (1/32 byte an element
    twice). gpt-oss-120b on one H100: 60.78 GiB unpadded + 3.41 of scales held twice =
    64.19 GiB, against 64.38 logged (llm-d-benchmark; vllm#33155); Marlin's layout is 65.92."""
    if not g.n_expert or not g.n_ff_expert:
        return 0
    fmt = FORMATS["MXFP4"]
    inter = max(g.n_ff_expert // tp, 1)
    triton_pad = _round_up(inter, 64) / inter
    marlin_pad = mxfp4_expert_padding(g, tp)
    saving = 0.0
    for ex in _shape_of(g).layer_experts:
        scales = fmt.per_group_bytes * ex.groups
        saving += ex.bytes_as(fmt) * (marlin_pad - triton_pad) - scales
    return int(saving / tp)


def pp_partition(n_layer: int, pp: int) -> tuple[int, ...]:
    """Blocks per pipeline stage as vLLM splits them (vllm/distributed/utils.py
    get_pp_indices): even, the remainder going to the stages before the last."""
    base = [n_layer // pp] * pp
    for i in range(2, n_layer % pp + 2):
        base[-i] += 1
    return tuple(base)


def stage_weights(
    w: RankWeights, stages: tuple[int, ...], tied_embedding: int = 0
) -> tuple[int, ...]:
    """Bytes one GPU of each pipeline stage holds. `tied_embedding`: a tied model's
    embedding shard, which the last stage loads again as its head when it is not the
    first (vLLM builds `embed_tokens` there and ties `lm_head` to it)."""
    out = []
    start = 0
    for i, n in enumerate(stages):
        b = sum(w.layers[start : start + n])
        if i == 0:
            b += w.embedding
        if i == len(stages) - 1:
            b += w.head + (tied_embedding if i > 0 else 0)
        out.append(b)
        start += n
    return tuple(out)


def tied_embedding_bytes(g: Geometry, tp: int) -> int:
    """A tied model's embedding, per TP rank (0 when the head has weights of its own)."""
    return int(2.0 * _shape_of(g).embedding / tp) if g.tied_embeddings else 0


def rope_bytes(g: Geometry) -> int:
    """The rotary cos/sin table vLLM and SGLang build for the trained context, 16-bit."""
    return g.context_length * (g.rope_head_dim or g.head_dim_k) * 2


def checkpoint_bytes(g: Geometry, fmt_name: str, *, with_rope: bool = True) -> int:
    """The whole checkpoint as loaded (TP 1, one stage); `with_rope=False`: as stored
    (no rotary table, no engine padding: what a read checkpoint's bytes compare with)."""
    w = rank_weights(g, fmt_name, 1, padded=with_rope)
    total = w.embedding + w.head + sum(w.layers)
    return total if with_rope else total - rope_bytes(g)
