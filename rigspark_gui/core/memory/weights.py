"""Weights of a model, grouped into the units llama.cpp places: input, blocks, output.

With a GGUF header the real tensors are summed. Catalog models are synthesized tensor
by tensor from their geometry (tensor names and shapes as llama.cpp's converter writes
them) and typed with llama-quantize's recipe (`quant_recipe`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.memo import ByIdentity
from rigspark_gui.core.model import (
    FTYPE_ALIASES,
    FTYPE_DEFAULT,
    GGML_TYPES,
    Geometry,
    ModelSpec,
    RecipeContext,
    TensorGroup,
    TensorInfo,
    canonical_ftype,
    chooser,
    position_facts,
    quantizable,
    require_quant,
    row_bytes,
)

GGUF_ALIGNMENT = 32  # general.alignment default: every tensor's data starts on it
_UNGATED_FFN = frozenset({"falcon", "starcoder2", "gpt2", "phi2", "bloom", "mpt"})
# Q, K and V from one attn_qkv matrix
FUSED_QKV_ARCHS = frozenset({"phi3", "falcon", "bloom", "mpt", "gpt2", "phi2", "gptneox"})
_QKV_BIAS = frozenset({"qwen2", "qwen2moe", "starcoder2", "falcon", "gpt-oss"})
_QK_NORM = frozenset({"qwen3", "qwen3moe", "gemma3", "olmo2", "olmoe", "cohere2", "glm4moe"})
_POST_NORMS = frozenset({"gemma2", "gemma3", "olmo2", "glm4"})


_sum_of: ByIdentity[tuple[int, ...], int] = ByIdentity(sum)


def _pad(n: int) -> int:
    return -(-n // GGUF_ALIGNMENT) * GGUF_ALIGNMENT


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


def _block_tensors(g: Geometry, il: int) -> list[tuple[str, tuple[int, ...]]]:
    """Names and ggml shapes (ne0 first) of one block's tensors before typing."""
    e, arch = g.n_embd, g.architecture
    hk, hv = g.head_dim_k, g.head_dim_v
    kv = g.kv_heads(il)
    p = f"blk.{il}."
    out: list[tuple[str, tuple[int, ...]]] = [(p + "attn_norm.weight", (e,))]
    if il in g.recurrent_layers:
        pass
    elif g.is_mla:
        rank = g.kv_lora_rank or 0
        rope = g.rope_head_dim or 0
        nope = hk - rope
        if g.q_lora_rank:
            out += [
                (p + "attn_q_a.weight", (e, g.q_lora_rank)),
                (p + "attn_q_a_norm.weight", (g.q_lora_rank,)),
                (p + "attn_q_b.weight", (g.q_lora_rank, g.n_head * hk)),
            ]
        else:
            out.append((p + "attn_q.weight", (e, g.n_head * hk)))
        out += [
            (p + "attn_kv_a_mqa.weight", (e, rank + rope)),
            (p + "attn_kv_a_norm.weight", (rank,)),
            (p + "attn_kv_b.weight", (rank, g.n_head * (nope + hv))),
            (p + "attn_output.weight", (g.n_head * hv, e)),
        ]
    elif kv > 0:
        q, k, v = g.n_head * hk, kv * hk, kv * hv
        if arch in FUSED_QKV_ARCHS:
            out.append((p + "attn_qkv.weight", (e, q + k + v)))
        else:
            out += [
                (p + "attn_q.weight", (e, q)),
                (p + "attn_k.weight", (e, k)),
                (p + "attn_v.weight", (e, v)),
            ]
        if arch in _QKV_BIAS:
            out += [(p + "attn_q.bias", (q,)), (p + "attn_k.bias", (k,)), (p + "attn_v.bias", (v,))]
        if arch in _QK_NORM:
            out += [(p + "attn_q_norm.weight", (hk,)), (p + "attn_k_norm.weight", (hk,))]
        if arch == "gpt-oss":
            out += [(p + "attn_sinks.weight", (g.n_head,)), (p + "attn_output.bias", (e,))]
        out.append((p + "attn_output.weight", (g.n_head * hv, e)))
    if arch in _POST_NORMS:
        out += [(p + "post_attention_norm.weight", (e,)), (p + "post_ffw_norm.weight", (e,))]
    out.append((p + "ffn_norm.weight", (e,)))
    if g.is_moe_layer(il):
        n, f = g.n_expert, g.n_ff_expert
        out += [
            (p + "ffn_gate_inp.weight", (e, n)),
            (p + "ffn_gate_exps.weight", (e, f, n)),
            (p + "ffn_up_exps.weight", (e, f, n)),
            (p + "ffn_down_exps.weight", (f, e, n)),
        ]
        if g.n_shared_expert and g.n_ff_shared_expert:
            fs = g.n_ff_shared_expert
            out += [
                (p + "ffn_gate_shexp.weight", (e, fs)),
                (p + "ffn_up_shexp.weight", (e, fs)),
                (p + "ffn_down_shexp.weight", (fs, e)),
            ]
    elif g.n_ff:
        if arch not in _UNGATED_FFN:
            out.append((p + "ffn_gate.weight", (e, g.n_ff)))
        out += [(p + "ffn_up.weight", (e, g.n_ff)), (p + "ffn_down.weight", (g.n_ff, e))]
    return out


class _Row(NamedTuple):
    """A synthesized tensor, before it is a TensorInfo (the layout needs no more)."""

    name: str
    type: str
    shape: tuple[int, ...]
    group: TensorGroup
    layer: int | None
    expert: bool
    n_elements: int
    n_bytes: int


_Shapes = tuple[tuple[str, tuple[int, ...], TensorGroup, int | None], ...]


def _global_tensors(g: Geometry) -> _Shapes:
    """The tensors outside the blocks: token table first, output norm and head last."""
    head = () if g.tied_embeddings else (("output.weight", (g.n_embd, g.n_vocab)),)
    return (
        ("token_embd.weight", (g.n_embd, g.n_vocab), TensorGroup.INPUT, None),
        ("output_norm.weight", (g.n_embd,), TensorGroup.OUTPUT, None),
        *((n, s, TensorGroup.OUTPUT, None) for n, s in head),
    )


@lru_cache(maxsize=512)
def _recipe_context(g: Geometry) -> RecipeContext:
    """What the quantization recipe needs to know about the model."""
    kv0 = g.kv_heads(0) if g.n_layer else g.n_head_kv
    return RecipeContext(
        architecture=g.architecture,
        n_gqa=g.n_head // kv0 if kv0 else 0,  # hparams.n_gqa(): layer 0, 0 without KV heads
        n_expert=g.n_expert,
        n_attention_wv=_counts(g)[0],
        # llama.cpp takes n_layer, not the ffn_down count (MoE blocks with a shared
        # expert hold two ffn_down tensors)
        n_ffn_down=g.n_layer,
        # LLM_TYPE_70B: 80-layer Llama with grouped KV heads (65B when not), Qwen2-72B
        is_70b=g.n_layer == 80
        and (g.architecture == "qwen2" or (g.architecture == "llama" and kv0 != g.n_head)),
        has_output=not g.tied_embeddings,
    )


@lru_cache(maxsize=512)
def _shapes(g: Geometry) -> tuple[_Shapes, RecipeContext]:
    """Every tensor's name, shape, group and layer in file order (the same at every
    quantization), and the recipe's view of the model."""
    first, *last = _global_tensors(g)
    raw: list[tuple[str, tuple[int, ...], TensorGroup, int | None]] = [first]
    for il in range(g.n_layer):
        raw += [(n, s, TensorGroup.BLOCK, il) for n, s in _block_tensors(g, il)]
    return (*raw, *last), _recipe_context(g)


# A tensor's recipe input: (name, shape, group, layer, name within its block, elements,
# quantizable, an attn_v, an ffn_down, an ffn_gate/ffn_up).
_Recipe = tuple[str, tuple[int, ...], TensorGroup, int | None, str, int, bool, bool, bool, bool]


@lru_cache(maxsize=512)
def _recipe_rows(g: Geometry) -> tuple[_Recipe, ...]:
    raw, _ = _shapes(g)
    out = []
    for name, shape, group, layer in raw:
        suffix = name.split(".", 2)[2] if layer is not None and name.startswith("blk.") else name
        out.append(
            (
                name,
                shape,
                group,
                layer,
                suffix,
                math.prod(shape),
                quantizable(name, len(shape)),
                "attn_v.weight" in name,
                "ffn_down" in name,
                "ffn_gate" in name or "ffn_up" in name,
            )
        )
    return tuple(out)


def _synth_types(g: Geometry, ftype: str) -> Iterator[tuple[_Recipe, str, int]]:
    """llama-quantize's type and bytes for every tensor. Blocks repeat: a tensor's type
    depends on its layer only for attn_v (by count), ffn_down (by count or layer) and,
    under IQ3_XS, ffn_gate/ffn_up (by layer); every other tensor of a kind is asked
    about once."""
    _, ctx = _shapes(g)
    gate_up_by_layer = canonical_ftype(ftype) == "IQ3_XS"
    choose = chooser(ftype)
    chosen: dict[tuple[object, ...], str] = {}
    sizes: dict[tuple[str, int], int] = {}
    i_wv = i_down = 0
    for row in _recipe_rows(g):
        name, shape, _, layer, suffix, n, quant, wv, down, gate_up = row
        if quant:
            three = len(shape) == 3
            if wv:
                key: tuple[object, ...] = (suffix, shape[0], three, i_wv)
            elif down:
                key = (suffix, shape[0], three, i_down, layer)
            elif gate_up and gate_up_by_layer:
                key = (suffix, shape[0], three, layer)
            else:
                key = (suffix, shape[0], three)
            t = chosen.get(key)
            if t is None:
                t = chosen[key] = choose(name, shape[0], three, ctx, i_wv, i_down, layer)
        else:
            t = "F32"
        if wv:
            i_wv += 1
        if down:
            i_down += 1
        size = sizes.get((t, n))
        if size is None:
            size = sizes[(t, n)] = row_bytes(t, n)
        yield row, t, size


@lru_cache(maxsize=64)  # a layout and its CPU repack read the same rows, one after the other
def _synth_rows(g: Geometry, ftype: str) -> tuple[_Row, ...]:
    return tuple(
        _Row(r[0], t, r[1], r[2], r[3], "_exps" in r[0], r[5], size)
        for r, t, size in _synth_types(g, ftype)
    )


def synthesize_tensors(g: Geometry, ftype: str) -> tuple[TensorInfo, ...]:
    """The tensor list a llama.cpp conversion + llama-quantize at `ftype` would produce."""
    return tuple(
        TensorInfo(
            name=r.name,
            type=r.type,
            shape=r.shape,
            group=r.group,
            layer=r.layer,
            expert=r.expert,
            n_bytes=r.n_bytes,
        )
        for r in _synth_rows(g, ftype)
    )


def layout_from_tensors(g: Geometry, tensors: tuple[TensorInfo, ...], quant: str) -> WeightsLayout:
    rows = [
        _Row(t.name, t.type, t.shape, t.group, t.layer, t.expert, t.n_elements, t.n_bytes)
        for t in tensors
    ]
    return _layout_from_rows(g, rows, quant)


class ParamCount(NamedTuple):
    total: int
    active: int  # read per token: MoE counts its active experts, the embedding is a lookup


def _param_count(
    g: Geometry, rows: Iterable[tuple[str, int, TensorGroup, int | None, bool]]
) -> ParamCount:
    """Parameters from (name, elements, group, layer, expert) of every tensor."""
    total = expert_params = 0
    embd: int | None = None
    for name, n, group, layer, expert in rows:
        total += n
        if expert and group is TensorGroup.BLOCK and layer is not None:
            expert_params += n
        if embd is None and name == "token_embd.weight":
            embd = n
    frac = g.n_expert_used / g.n_expert if g.n_expert else 1.0
    active = total - expert_params + round(expert_params * frac) - (embd or 0)
    return ParamCount(total, max(active, 0))


@lru_cache(maxsize=512)
def _synth_param_count(g: Geometry) -> ParamCount:
    """The same count as tensor by tensor, but each kind of block is shaped once: layers
    differ only by recurrence, KV heads and MoE, so a catalog of 129 models is counted
    in milliseconds (the model picker sorts by size at start-up)."""
    embd = g.n_embd * g.n_vocab
    kinds: dict[tuple[bool, int, bool], tuple[int, int]] = {}
    total = embd + g.n_embd + (0 if g.tied_embeddings else embd)  # + output norm and head
    experts = 0
    for il, kind in enumerate(_layer_keys(g)):
        counted = kinds.get(kind)
        if counted is None:
            sizes = [(math.prod(shape), "_exps" in n) for n, shape in _block_tensors(g, il)]
            counted = (sum(n for n, _ in sizes), sum(n for n, e in sizes if e))
            kinds[kind] = counted
        total += counted[0]
        experts += counted[1]
    frac = g.n_expert_used / g.n_expert if g.n_expert else 1.0
    active = total - experts + round(experts * frac) - embd
    return ParamCount(total, max(active, 0))


def _count_of(spec: ModelSpec) -> ParamCount:
    if spec.tensors is None:
        return _synth_param_count(spec.geometry)
    rows = ((t.name, t.n_elements, t.group, t.layer, t.expert) for t in spec.tensors)
    return _param_count(spec.geometry, rows)


# Parameters do not depend on the quantization: counted from shapes alone, without
# choosing a type per tensor (the model picker sorts every model by size at start-up).
param_count: ByIdentity[ModelSpec, ParamCount] = ByIdentity(_count_of)


def _layout_from_rows(g: Geometry, rows: Sequence[_Row], quant: str) -> WeightsLayout:
    blocks = [0] * g.n_layer
    experts = [0] * g.n_layer
    input_b = output_b = 0
    types: dict[str, int] = {}
    for t in rows:
        b = _pad(t.n_bytes)
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
    tied_head = _pad(embd.n_bytes) if tied and embd is not None else 0
    params = _param_count(g, ((t.name, t.n_elements, t.group, t.layer, t.expert) for t in rows))
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


class _BlockTensor(NamedTuple):
    """One tensor of a kind of block, named without its layer (the recipe reads names
    only for what they contain)."""

    name: str
    ne0: int
    three: bool  # 3-D: stacked experts
    n: int
    quantizable: bool
    expert: bool
    attn_v: bool
    ffn_down: bool
    gate_up: bool


def _layer_keys(g: Geometry) -> tuple[tuple[bool, int, bool], ...]:
    """What makes a block's tensors differ from another's: recurrence, KV heads, MoE
    (one key for every layer of most models, found without asking layer by layer)."""
    uniform_moe = not g.is_moe or (g.n_dense_lead == 0 and g.moe_every <= 1)
    if not g.recurrent_layers and g.n_head_kv_per_layer is None and uniform_moe:
        return ((False, g.n_head_kv, g.is_moe),) * g.n_layer
    return tuple(
        (il in g.recurrent_layers, g.kv_heads(il), g.is_moe_layer(il)) for il in range(g.n_layer)
    )


@lru_cache(maxsize=512)
def _block_kinds(g: Geometry) -> tuple[tuple[tuple[_BlockTensor, ...], ...], tuple[int, ...]]:
    """Each kind of block's tensors (layers differ only by recurrence, KV heads and MoE)
    and every layer's kind."""
    kinds: dict[tuple[bool, int, bool], int] = {}
    tensors: list[tuple[_BlockTensor, ...]] = []
    of_layer: list[int] = []
    for il, key in enumerate(_layer_keys(g)):
        k = kinds.get(key)
        if k is None:
            k = kinds[key] = len(tensors)
            block = []
            for name, shape in _block_tensors(g, il):
                short = name.split(".", 2)[2]
                block.append(
                    _BlockTensor(
                        short,
                        shape[0],
                        len(shape) == 3,
                        math.prod(shape),
                        quantizable(name, len(shape)),
                        "_exps" in short,
                        "attn_v.weight" in short,
                        "ffn_down" in short,
                        "ffn_gate" in short or "ffn_up" in short,
                    )
                )
            tensors.append(tuple(block))
        of_layer.append(k)
    return tuple(tensors), tuple(of_layer)


@lru_cache(maxsize=512)
def _counts(g: Geometry) -> tuple[int, int]:
    """attn_v and ffn_down tensors in all blocks (llama.cpp's counts after the last)."""
    kinds, of_layer = _block_kinds(g)
    per_kind = [(sum(t.attn_v for t in b), sum(t.ffn_down for t in b)) for b in kinds]
    return (
        sum(per_kind[k][0] for k in of_layer),
        sum(per_kind[k][1] for k in of_layer),
    )


def _counted(t: _BlockTensor) -> bool:
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
    ctx = _recipe_context(g)
    kinds, of_layer = _block_kinds(g)
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
    ctx = _recipe_context(g)
    kinds, of_layer = _block_kinds(g)
    groups, of_group = _layer_groups(g)
    choose = chooser(quant)
    types: dict[str, int] = {}
    layers_of_kind = [0] * len(kinds)
    for k in of_layer:
        layers_of_kind[k] += 1
    # what a block of each kind holds whatever its position: padded bytes, of which experts
    fixed: list[tuple[int, int]] = []
    counted_of_kind: list[list[tuple[int, _BlockTensor]]] = []
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
            kind = choose(t.name, t.ne0, t.three, ctx, 0, 0, 0) if t.quantizable else "F32"
            seen_here.append((place, kind))
            size = row_bytes(kind, t.n)
            types[kind] = types.get(kind, 0) + size * layers_of_kind[k]
            total += _pad(size)
            if t.expert:
                experts += _pad(size)
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
                entry = typed[key] = (kind, size, _pad(size))
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
    i_wv, i_down = _counts(g)  # where the blocks leave the counts, for the head
    input_b = output_b = embd = 0
    first: list[str] = []  # the token table's type: the file's first tensor
    for name, shape, group, _ in _global_tensors(g):
        n = math.prod(shape)
        kind = (
            choose(name, shape[0], len(shape) == 3, ctx, i_wv, i_down, None)
            if quantizable(name, len(shape))
            else "F32"
        )
        size = row_bytes(kind, n)
        types[kind] = types.get(kind, 0) + size
        if group is TensorGroup.INPUT:
            first.append(kind)
            input_b += _pad(size)
            if name == "token_embd.weight":
                embd = _pad(size)
        else:
            output_b += _pad(size)
            order.append(kind)
    types = {kind: types[kind] for kind in dict.fromkeys([*first, *order])}
    params = _synth_param_count(g)
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


# llama.cpp's CPU backend repacks some weight types into interleaved rows for its
# GEMM kernels (ggml/src/ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type): the
# tensor moves from the memory-mapped file into an extra CPU_REPACK buffer of the same
# size. Only matrices a MUL_MAT (2-D) or MUL_MAT_ID (3-D experts) reads qualify, and only
# with ne[1] % 8 == 0. x86: Q4_0, Q4_K, IQ4_NL, MXFP4 with AVX2; Q2_K with AVX-512 too.
# Arm NEON with dotprod / i8mm: Q4_0, Q4_K, Q5_K, Q6_K, IQ4_NL, MXFP4, Q8_0.
REPACK_TYPES: dict[str, frozenset[str]] = {
    "avx2": frozenset({"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"}),
    "avx512": frozenset({"Q2_K"}),
    "neon_dotprod": frozenset({"Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "MXFP4", "Q8_0"}),
}
# Tensors read by ops other than MUL_MAT/MUL_MAT_ID (llm_tensor_info_for): never repacked.
_NOT_MATMUL = ("token_embd.", "_norm.", ".bias", "ffn_gate_inp.", "attn_sinks", "rope_")


class RepackBytes(NamedTuple):
    """CPU_REPACK bytes per placeable unit, for the units that run on the CPU."""

    block_bytes: tuple[int, ...]
    block_expert_bytes: tuple[int, ...]  # routed-expert share of each
    output_bytes: int
    unmapped_bytes: int  # file bytes outside the CPU_Mapped range when all is on the CPU

    @property
    def total(self) -> int:
        return sum(self.block_bytes) + self.output_bytes


def _repacked(t: TensorInfo | _Row, types: frozenset[str]) -> bool:
    # 2-D weights of MUL_MAT; 3-D only as MUL_MAT_ID experts (MLA's 3-D attn_k_b/attn_v_b
    # are MUL_MAT operands, which the repack buffer refuses for n_dims != 2)
    dims_ok = len(t.shape) == 2 or (len(t.shape) == 3 and t.expert)
    if t.type not in types or not dims_ok or t.shape[1] % 8:
        return False
    return not any(k in t.name for k in _NOT_MATMUL)


def _unmapped_bytes(tensors: Sequence[TensorInfo | _Row], repacked: list[bool]) -> int:
    """File bytes outside the mapped range: llama.cpp maps only from the first to the end
    of the last tensor its CPU buffer holds (llama_model_loader::get_mapping_range), so
    repacked tensors at the head or tail of the file, and the last mapped tensor's
    alignment padding, are not in it. Tensors lie in file order, each padded to 32."""
    kept = [i for i, r in enumerate(repacked) if not r]
    if not kept:
        return sum(_pad(t.n_bytes) for t in tensors)
    first, last = kept[0], kept[-1]
    head = sum(_pad(t.n_bytes) for t in tensors[:first])
    tail = sum(_pad(t.n_bytes) for t in tensors[last + 1 :])
    return head + tail + _pad(tensors[last].n_bytes) - tensors[last].n_bytes


def cpu_repack_bytes(
    spec: ModelSpec, quant: str, cpu_features: tuple[str, ...] | list[str]
) -> RepackBytes | None:
    """What llama.cpp's CPU backend copies into CPU_REPACK for a CPU with these features
    (keys of REPACK_TYPES; avx512 implies avx2). None when nothing is repacked.

    Tied embeddings: the head is the token table loaded a second time, as a MUL_MAT
    weight, so a repackable table type is repacked (the GET_ROWS copy stays mapped)."""
    types: frozenset[str] = frozenset()
    feats = set(cpu_features)
    if "avx512" in feats:
        feats.add("avx2")
    for f in feats:
        types |= REPACK_TYPES.get(f, frozenset())
    if not types:
        return None
    g = spec.geometry
    tensors: Sequence[TensorInfo | _Row] = (
        spec.tensors if spec.tensors is not None else _synth_rows(g, quant)
    )
    blocks = [0] * g.n_layer
    experts = [0] * g.n_layer
    output = 0
    repacked = [_repacked(t, types) and t.group is not TensorGroup.INPUT for t in tensors]
    for t in tensors:
        if t.group is TensorGroup.BLOCK and t.layer is not None:
            if _repacked(t, types):
                blocks[t.layer] += _pad(t.n_bytes)
                if t.expert:
                    experts[t.layer] += _pad(t.n_bytes)
        elif t.group is TensorGroup.OUTPUT and _repacked(t, types):
            output += _pad(t.n_bytes)
        elif t.name == "token_embd.weight" and g.tied_embeddings and t.type in types:
            output += _pad(t.n_bytes) if t.shape[1] % 8 == 0 else 0
    if not any(blocks) and not output:
        return None
    return RepackBytes(
        block_bytes=tuple(blocks),
        block_expert_bytes=tuple(experts),
        output_bytes=output,
        unmapped_bytes=_unmapped_bytes(tensors, repacked),
    )


@lru_cache(maxsize=8192)
def _synth_repack(g: Geometry, quant: str, features: tuple[str, ...]) -> RepackBytes | None:
    return cpu_repack_bytes(
        ModelSpec(id="_", name="_", geometry=g, quants=(quant,)), quant, features
    )


def repack_for(spec: ModelSpec, quant: str, features: tuple[str, ...]) -> RepackBytes | None:
    """cpu_repack_bytes, cached for catalog models (their tensors are synthesized)."""
    if not features:
        return None
    if spec.tensors is None:
        return _synth_repack(spec.geometry, quant, tuple(sorted(features)))
    return cpu_repack_bytes(spec, quant, features)


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
