"""The tensors a llama.cpp conversion writes for a catalog model, synthesized from its
geometry: names and ggml shapes in file order (as llama.cpp's converter writes them), the
kinds of block a model repeats, the quantization recipe's view of the model, and each
tensor's type and bytes under llama-quantize's rules (`quant_recipe`).

The weights layout, the parameter count and the CPU repack all read a synthesized model
through these; a model read from a GGUF header has its real tensors instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.memory.arch_dsa import DSA_ARCHS, dsa_block_tensors
from rigspark_gui.core.memory.arch_dsv4 import (
    DSV4_ARCHS,
    dsv4_block_tensors,
    dsv4_global_tensors,
    dsv4_layer_keys,
)
from rigspark_gui.core.memory.arch_gemma4 import (
    GEMMA_PLE_ARCHS,
    gemma_block_tensors,
    gemma_global_tensors,
    gemma_layer_keys,
    unquantized_type,
)
from rigspark_gui.core.memory.arch_hybrid import (
    HYBRID_ARCHS,
    hybrid_block_tensors,
    hybrid_output_norm,
)
from rigspark_gui.core.memory.arch_more import MORE_ARCHS, more_block_tensors
from rigspark_gui.core.model import (
    Geometry,
    RecipeContext,
    TensorGroup,
    TensorInfo,
    canonical_ftype,
    chooser,
    quantizable,
    row_bytes,
)

GGUF_ALIGNMENT = 32  # general.alignment default: every tensor's data starts on it
_UNGATED_FFN = frozenset({"falcon", "starcoder2", "gpt2", "phi2", "bloom", "mpt"})
# Q, K and V from one attn_qkv matrix
FUSED_QKV_ARCHS = frozenset({"phi3", "falcon", "bloom", "mpt", "gpt2", "phi2", "gptneox"})
_QKV_BIAS = frozenset({"qwen2", "qwen2moe", "starcoder2", "falcon", "gpt-oss"})
_QK_NORM = frozenset(
    {"qwen3", "qwen3moe", "qwen3vl", "qwen3vlmoe", "gemma3", "olmo2", "olmoe", "cohere2", "glm4moe"}
)
_POST_NORMS = frozenset({"gemma2", "gemma3", "olmo2", "glm4"})


def gguf_padded(n: int) -> int:
    """A tensor's n bytes as the file stores them: padded to GGUF_ALIGNMENT."""
    return -(-n // GGUF_ALIGNMENT) * GGUF_ALIGNMENT


def block_tensors(g: Geometry, il: int) -> list[tuple[str, tuple[int, ...]]]:
    """Names and ggml shapes (ne0 first) of one block's tensors before typing."""
    if g.architecture in HYBRID_ARCHS:
        return hybrid_block_tensors(g, il)
    if g.architecture in GEMMA_PLE_ARCHS:
        return gemma_block_tensors(g, il)
    if g.architecture in DSA_ARCHS:
        return dsa_block_tensors(g, il)
    if g.architecture in DSV4_ARCHS:
        return dsv4_block_tensors(g, il)
    if g.architecture in MORE_ARCHS:
        return more_block_tensors(g, il)
    if il >= g.n_layer - g.n_layer_nextn:
        return []  # an MTP block: skipped at load unless drafting with it
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


class BlockTensor(NamedTuple):
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


def layer_keys(g: Geometry) -> tuple[tuple[bool, int, bool, int], ...]:
    """What makes a block's tensors differ from another's: recurrence, KV heads, MoE, FFN
    width where it varies (one key for every layer of most models, found without asking
    layer by layer)."""
    if g.architecture in GEMMA_PLE_ARCHS:
        return gemma_layer_keys(g)
    if g.architecture in DSV4_ARCHS:
        return dsv4_layer_keys(g)
    uniform_moe = not g.is_moe or (g.n_dense_lead == 0 and g.moe_every <= 1)
    if not g.recurrent_layers and g.n_head_kv_per_layer is None and uniform_moe:
        return ((False, g.n_head_kv, g.is_moe, 0),) * g.n_layer
    ff = g.n_ff_per_layer or (0,) * g.n_layer
    trunk = g.n_layer - g.n_layer_nextn  # MTP blocks (-1): a kind of their own, no tensors
    return tuple(
        (il in g.recurrent_layers, g.kv_heads(il), g.is_moe_layer(il), ff[il] if il < trunk else -1)
        for il in range(g.n_layer)
    )


@lru_cache(maxsize=512)
def block_kinds(g: Geometry) -> tuple[tuple[tuple[BlockTensor, ...], ...], tuple[int, ...]]:
    """Each kind of block's tensors (layers differ only by recurrence, KV heads and MoE)
    and every layer's kind."""
    kinds: dict[tuple[bool, int, bool, int], int] = {}
    tensors: list[tuple[BlockTensor, ...]] = []
    of_layer: list[int] = []
    for il, key in enumerate(layer_keys(g)):
        k = kinds.get(key)
        if k is None:
            k = kinds[key] = len(tensors)
            block = []
            for name, shape in block_tensors(g, il):
                # a block's tensors without blk.N (Gemma's layer-0 projection has none)
                short = name.split(".", 2)[2] if name.startswith("blk.") else name
                block.append(
                    BlockTensor(
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
def attn_v_ffn_down_counts(g: Geometry) -> tuple[int, int]:
    """attn_v and ffn_down tensors in all blocks (llama.cpp's counts after the last)."""
    kinds, of_layer = block_kinds(g)
    per_kind = [(sum(t.attn_v for t in b), sum(t.ffn_down for t in b)) for b in kinds]
    return (
        sum(per_kind[k][0] for k in of_layer),
        sum(per_kind[k][1] for k in of_layer),
    )


class TensorRow(NamedTuple):
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


def global_tensors(g: Geometry) -> _Shapes:
    """The tensors outside the blocks: token table first, output norm and head last."""
    head = () if g.tied_embeddings else (("output.weight", (g.n_embd, g.n_vocab)),)
    return (
        ("token_embd.weight", (g.n_embd, g.n_vocab), TensorGroup.INPUT, None),
        *((n, sh, grp, None) for n, sh, grp in gemma_global_tensors(g)),
        (hybrid_output_norm(g), (g.n_embd,), TensorGroup.OUTPUT, None),
        *(
            (n, s, TensorGroup.OUTPUT, None)
            for n, s in dsv4_global_tensors(g)
            if g.architecture in DSV4_ARCHS
        ),
        *((n, s, TensorGroup.OUTPUT, None) for n, s in head),
    )


@lru_cache(maxsize=512)
def recipe_context(g: Geometry) -> RecipeContext:
    """What the quantization recipe needs to know about the model."""
    # llama.cpp's n_head_kv(0) as loaded: a hybrid's scalar head_count_kv holds on its
    # recurrent layer 0 too
    per_layer = g.n_head_kv_per_layer
    kv0 = per_layer[0] if per_layer else g.n_head_kv
    return RecipeContext(
        architecture=g.architecture,
        n_gqa=g.n_head // kv0 if kv0 else 0,  # hparams.n_gqa(): layer 0, 0 without KV heads
        n_expert=g.n_expert,
        n_attention_wv=attn_v_ffn_down_counts(g)[0],
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
    first, *last = global_tensors(g)
    raw: list[tuple[str, tuple[int, ...], TensorGroup, int | None]] = [first]
    for il in range(g.n_layer):
        raw += [(n, s, TensorGroup.BLOCK, il) for n, s in block_tensors(g, il)]
    return (*raw, *last), recipe_context(g)


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
            t = unquantized_type(name)
        if wv:
            i_wv += 1
        if down:
            i_down += 1
        size = sizes.get((t, n))
        if size is None:
            size = sizes[(t, n)] = row_bytes(t, n)
        yield row, t, size


@lru_cache(maxsize=64)  # a layout and its CPU repack read the same rows, one after the other
def synth_rows(g: Geometry, ftype: str) -> tuple[TensorRow, ...]:
    return tuple(
        TensorRow(r[0], t, r[1], r[2], r[3], "_exps" in r[0], r[5], size)
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
        for r in synth_rows(g, ftype)
    )
