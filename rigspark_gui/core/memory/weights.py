"""Weights of a model, grouped into the units llama.cpp places: input, blocks, output.

With a GGUF header the real tensors are summed. A catalog model's layout is summed from
its synthesized tensors (`tensors`), typed with llama-quantize's recipe: each group of
alike layers is typed once, for its first layer. Also the GGUF file size, and a cheap lower
bound of the weights that lets a search skip a quantization without synthesizing it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.memo import ByIdentity
from rigspark_gui.core.memory.arch_gemma4 import unquantized_type
from rigspark_gui.core.memory.params import count_params, param_count, synth_param_count
from rigspark_gui.core.memory.tensors import (
    BlockTensor,
    TensorRow,
    attn_v_ffn_down_counts,
    block_kinds,
    gguf_padded,
    global_tensors,
    recipe_context,
)
from rigspark_gui.core.model import (
    FTYPE_ALIASES,
    FTYPE_DEFAULT,
    GGML_TYPES,
    Geometry,
    ModelSpec,
    TensorGroup,
    TensorInfo,
    chooser,
    position_facts,
    quantizable,
    require_quant,
    row_bytes,
)

_sum_of: ByIdentity[tuple[int, ...], int] = ByIdentity(sum)


class WeightsLayout(NamedTuple):
    """Bytes per placeable unit, as stored (each tensor padded to the GGUF alignment).
    Derived by the engine, never read from outside, so a plain record."""

    quant: str
    input_bytes: int  # token embeddings (always on the CPU)
    output_bytes: int  # output norm and head (the last slot)
    tied_head_bytes: int  # tied embeddings: the token table loaded again as the head off the CPU
    block_bytes: tuple[int, ...]
    block_expert_bytes: tuple[int, ...]  # routed-expert share of each block
    expert_fraction_active: float  # n_expert_used / n_expert
    n_params: int
    n_active_params: int  # parameters read per token (MoE: active)
    tensor_types: dict[str, int]  # bytes per ggml type, for display

    @property
    def total_bytes(self) -> int:
        return self.input_bytes + self.output_bytes + _sum_of(self.block_bytes)

    def block_read_bytes(self, layer: int) -> float:
        """Bytes one decode step reads from a block: dense part plus active experts."""
        experts = self.block_expert_bytes[layer]
        return self.block_bytes[layer] - experts + experts * self.expert_fraction_active


def layout_from_tensors(g: Geometry, tensors: tuple[TensorInfo, ...], quant: str) -> WeightsLayout:
    rows = [
        TensorRow(t.name, t.type, t.shape, t.group, t.layer, t.expert, t.n_elements, t.n_bytes)
        for t in tensors
    ]
    return _layout_from_rows(g, rows, quant)


def _layout_from_rows(g: Geometry, rows: Sequence[TensorRow], quant: str) -> WeightsLayout:
    blocks = [0] * g.n_layer
    experts = [0] * g.n_layer
    input_b = output_b = 0
    types: dict[str, int] = {}
    for t in rows:
        b = gguf_padded(t.n_bytes)
        types[t.type] = types.get(t.type, 0) + t.n_bytes
        if t.group is TensorGroup.INPUT:
            input_b += b
        elif t.group is TensorGroup.OUTPUT or t.layer is None:
            output_b += b
        else:
            blocks[t.layer] += b
            if t.expert:
                experts[t.layer] += b
    tied = not any(t.name == "output.weight" for t in rows)
    embd = next((t for t in rows if t.name == "token_embd.weight"), None)
    # Tied: llama.cpp loads the token table a second time as the head (TENSOR_DUPLICATED);
    # it costs memory only where the head is not the memory-mapped file itself.
    tied_head = gguf_padded(embd.n_bytes) if tied and embd is not None else 0
    params = count_params(g, ((t.name, t.n_elements, t.group, t.layer, t.expert) for t in rows))
    return WeightsLayout(
        quant=quant,
        input_bytes=input_b,
        output_bytes=output_b,
        tied_head_bytes=tied_head,
        block_bytes=tuple(blocks),
        block_expert_bytes=tuple(experts),
        expert_fraction_active=g.n_expert_used / g.n_expert if g.n_expert else 1.0,
        n_params=params.total,
        n_active_params=params.active,
        tensor_types=types,
    )


def _counted(t: BlockTensor) -> bool:
    """A tensor whose type llama-quantize may choose by its position (attn_v and ffn_down
    by count or layer, ffn_gate/ffn_up by layer)."""
    return t.quantizable and (t.attn_v or t.ffn_down or t.gate_up)


# A group of layers: their kind, and for each counted tensor of the kind, what its
# position decides and the position (attn_v count, ffn_down count, layer) in the
# group's first layer.
_Group = tuple[int, tuple[tuple[tuple[bool, ...], tuple[int, int, int]], ...]]


@lru_cache(maxsize=512)
def _layer_groups(g: Geometry) -> tuple[tuple[_Group, ...], tuple[int, ...]]:
    """Layers whose tensors get the same types at every file type: the same kind, and
    the same `position_facts` for each counted tensor. Returns the groups and every
    layer's group; a model has a handful, however many layers it has."""
    ctx = recipe_context(g)
    kinds, of_layer = block_kinds(g)
    # per kind: each counted tensor with the attn_v/ffn_down tensors before it in the
    # block, and the block's own attn_v/ffn_down count
    counted_of: list[list[tuple[str, int, int]]] = []
    steps: list[tuple[int, int]] = []
    for block in kinds:
        wv = down = 0
        counted = []
        for t in block:
            if _counted(t):
                counted.append((t.name, wv, down))
            wv += t.attn_v  # llama.cpp counts every attn_v/ffn_down tensor it meets
            down += t.ffn_down
        counted_of.append(counted)
        steps.append((wv, down))
    index: dict[tuple[object, ...], int] = {}
    groups: list[_Group] = []
    of_group: list[int] = []
    i_wv = i_down = 0
    for il, k in enumerate(of_layer):
        where = [
            (
                position_facts(ctx, name, i_wv + wv, i_down + down, il),
                (i_wv + wv, i_down + down, il),
            )
            for name, wv, down in counted_of[k]
        ]
        key = (k, tuple(f for f, _ in where))
        gi = index.get(key)
        if gi is None:
            gi = index[key] = len(groups)
            groups.append((k, tuple(where)))
        of_group.append(gi)
        i_wv += steps[k][0]
        i_down += steps[k][1]
    return tuple(groups), tuple(of_group)


@lru_cache(maxsize=4096)
def _synth_layout(g: Geometry, quant: str) -> WeightsLayout:
    """`_layout_from_rows` of the synthesized tensors without walking them one by one:
    each group of alike layers (`_layer_groups`) is typed once, for its first layer.
    Parameters do not depend on the type."""
    ctx = recipe_context(g)
    kinds, of_layer = block_kinds(g)
    groups, of_group = _layer_groups(g)
    choose = chooser(quant)
    types: dict[str, int] = {}
    layers_of_kind = [0] * len(kinds)
    for k in of_layer:
        layers_of_kind[k] += 1
    # what a block of each kind holds whatever its position: padded bytes, of which experts
    fixed: list[tuple[int, int]] = []
    counted_of_kind: list[list[tuple[int, BlockTensor]]] = []
    # the types of each kind's tensors, and of each group's counted ones, by place in
    # the block: the layout lists types in the order the file first holds them
    types_in_kind: list[list[tuple[int, str]]] = []
    for k, block in enumerate(kinds):
        total = experts = 0
        counted = []
        seen_here: list[tuple[int, str]] = []
        for place, t in enumerate(block):
            if _counted(t):
                counted.append((place, t))
                continue
            kind = (
                choose(t.name, t.ne0, t.three, ctx, 0, 0, 0)
                if t.quantizable
                else unquantized_type(t.name)
            )
            seen_here.append((place, kind))
            size = row_bytes(kind, t.n)
            types[kind] = types.get(kind, 0) + size * layers_of_kind[k]
            total += gguf_padded(size)
            if t.expert:
                experts += gguf_padded(size)
        fixed.append((total, experts))
        counted_of_kind.append(counted)
        types_in_kind.append(seen_here)
    uses = [0] * len(groups)
    for gi in of_group:
        uses[gi] += 1
    # a counted tensor's type, bytes and padded bytes, by kind, tensor and position facts
    typed: dict[tuple[object, ...], tuple[str, int, int]] = {}
    sums: list[tuple[int, int]] = []  # per group: padded bytes of a block, of which experts
    order: list[str] = []  # types as the blocks first hold them (groups are in layer order)
    for gi, (k, positions) in enumerate(groups):
        total, experts = fixed[k]
        in_group = list(types_in_kind[k])
        for j, ((place, t), (facts, (i_wv, i_down, il))) in enumerate(
            zip(counted_of_kind[k], positions, strict=True)
        ):
            key = (k, j, facts)
            entry = typed.get(key)
            if entry is None:
                kind = choose(t.name, t.ne0, t.three, ctx, i_wv, i_down, il)
                size = row_bytes(kind, t.n)
                entry = typed[key] = (kind, size, gguf_padded(size))
            kind, size, padded = entry
            types[kind] = types.get(kind, 0) + size * uses[gi]
            in_group.append((place, kind))
            total += padded
            if t.expert:
                experts += padded
        sums.append((total, experts))
        order += (kind for _, kind in sorted(in_group))
    blocks = tuple(sums[gi][0] for gi in of_group)
    block_experts = tuple(sums[gi][1] for gi in of_group)
    i_wv, i_down = attn_v_ffn_down_counts(g)  # where the blocks leave the counts, for the head
    input_b = output_b = embd = 0
    first: list[str] = []  # the token table's type: the file's first tensor
    for name, shape, group, _ in global_tensors(g):
        n = math.prod(shape)
        kind = (
            choose(name, shape[0], len(shape) == 3, ctx, i_wv, i_down, None)
            if quantizable(name, len(shape))
            else unquantized_type(name)
        )
        size = row_bytes(kind, n)
        types[kind] = types.get(kind, 0) + size
        # the token table leads the file; every other global tensor (Gemma's per-layer
        # table too) follows the blocks
        if name == "token_embd.weight":
            first.append(kind)
        else:
            order.append(kind)
        if group is TensorGroup.INPUT:
            input_b += gguf_padded(size)
            if name == "token_embd.weight":
                embd = gguf_padded(size)
        else:
            output_b += gguf_padded(size)
    types = {kind: types[kind] for kind in dict.fromkeys([*first, *order])}
    params = synth_param_count(g)
    return WeightsLayout(
        quant=quant,
        input_bytes=input_b,
        output_bytes=output_b,
        tied_head_bytes=embd if g.tied_embeddings else 0,
        block_bytes=blocks,
        block_expert_bytes=block_experts,
        expert_fraction_active=g.n_expert_used / g.n_expert if g.n_expert else 1.0,
        n_params=params.total,
        n_active_params=params.active,
        tensor_types=types,
    )


# a model's layouts by quantization, kept with the (immutable) spec itself
_layouts_of: ByIdentity[ModelSpec, dict[str, WeightsLayout]] = ByIdentity(lambda _: {})


def weights_layout(spec: ModelSpec, quant: str) -> WeightsLayout:
    layouts = _layouts_of(spec)
    layout = layouts.get(quant)
    if layout is None:
        require_quant(spec, quant)
        if spec.tensors is not None:
            layout = layout_from_tensors(spec.geometry, spec.tensors, quant)
        else:
            layout = _synth_layout(spec.geometry, quant)
        layouts[quant] = layout
    return layout


def file_bytes_estimate(layout: WeightsLayout, g: Geometry) -> int:
    """GGUF file size: tensor data plus a header dominated by the tokenizer vocabulary
    (token text, score and type per entry: ~24 bytes on average for BPE vocabularies)."""
    return layout.total_bytes + g.n_vocab * 24 + (1 << 20)


# llama-quantize gives a few small tensors fewer bits than a type's default (attn_k of
# some I-quant mixes) and most of them more: 85 % of the default's size is a safe floor
_FLOOR_SHARE = 0.85


def weights_floor(spec: ModelSpec, quant: str, without_embeddings: bool = False) -> int:
    """A lower bound of a synthesized model's weights at `quant`, without synthesizing
    it: parameters at the type's default bits, less a margin. 0 for a model read from a
    file (its exact layout is at hand anyway)."""
    if spec.tensors is not None:
        return 0
    base = FTYPE_DEFAULT.get(FTYPE_ALIASES.get(quant, quant))
    if base is None:
        return 0
    t = GGML_TYPES[base]
    n = param_count(spec).total
    if without_embeddings:
        n -= spec.geometry.n_embd * spec.geometry.n_vocab
    return int(max(n, 0) * t.bytes_per_block / t.block_size * _FLOOR_SHARE)
