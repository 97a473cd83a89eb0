"""Speculative decoding with the model's own MTP / NextN blocks, as llama.cpp b11434 runs
`llama-server --spec-type draft-mtp` (no -md): what it adds to the plan on each device.

- Weights: the MTP blocks after the trunk are loaded (`mparams.load_mtp`,
  common/common.cpp; without it their tensors are TENSOR_SKIP). Each is a full block of
  the trunk's kind (attention; MoE where the trunk is) plus the NextN projection
  `nextn.eh_proj` (2 n_embd x n_embd) and its norms. The block is a layer slot already
  placed with the target (-ngl counts it), so its weights land on that slot's device.
- KV: a second context (`common_speculative_init_result`, common/speculative.cpp) of type
  LLAMA_CONTEXT_TYPE_MTP on the same model, at the target's n_ctx, slots and unified
  setting; its cache (`llama_model::create_memory`) is a plain attention cache of the
  MTP layers alone (`il >= n_layer()`), of the draft cache types -ctkd / -ctvd (default
  f16, `common_base_params_to_speculative`), on each layer's device.
- Compute: that context reserves its graph (one MTP block and the head) with
  `n_outputs_max` = n_parallel logits rows, and its own host output buffer; on the CPU
  the buffer is read off the MTP graphs (core/plan/mtp_compute.py).
- The target's recurrent state: `cparams.n_rs_seq = draft.n_max` (common.h
  need_n_rs_seq, default 3) keeps that many rollback rows per sequence on every
  recurrent layer of the architectures that allow it (ROLLBACK_ARCHS).

Speed: the accepted tokens per target step depend on the model's heads and the text;
without a cited figure the plan keeps plain decoding and says the gain is unknown.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.memory import (
    ROLLBACK_ARCHS,
    attn_v_ffn_down_counts,
    block_tensors,
    device_compute_bytes,
    gguf_padded,
    host_compute_bytes,
    kv_cells,
    kv_row_pair_bytes,
    output_buffer_bytes,
    recipe_context,
    recurrent_state_bytes,
)
from rigspark_gui.core.model import Geometry, KvCacheType, ModelSpec, chooser, row_bytes
from rigspark_gui.core.placement import Placement
from rigspark_gui.core.plan.mtp_compute import mtp_cpu_compute_bytes
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings

CPU = "cpu"
# common/common.h common_params_speculative_draft.n_max: draft tokens per step, and so
# the rollback rows of the target's recurrent state (need_n_rs_seq)
DRAFT_N_MAX = 3
# Architectures whose MTP context holds a plain KV cache of the MTP layers alone
# (src/llama-model.cpp create_memory: the default branch's filter il >= n_layer() for
# qwen35 / qwen35moe / qwen3next / glm4moe / deepseek2 / nemotron_h_moe, the
# LLAMA_CONTEXT_TYPE_MTP branch of deepseek32 / glm-dsa) and whose MTP block is a
# trunk-style block plus the NextN tensors (load_arch_tensors and graph_mtp of
# src/models/qwen35.cpp, qwen35moe.cpp, qwen3next.cpp, glm4-moe.cpp, deepseek2.cpp,
# deepseek32.cpp, glm-dsa.cpp, nemotron-h.cpp / nemotron-h-moe.cpp)
MTP_ARCHS = frozenset(
    {
        "qwen35",
        "qwen35moe",
        "qwen3next",
        "glm4moe",
        "deepseek2",
        "deepseek32",
        "glm-dsa",
        "nemotron_h_moe",
    }
)
# DeepSeek sparse attention: the MTP block loads its indexer weights (required on
# deepseek32, TENSOR_NOT_REQUIRED on glm-dsa: counted as the converter writes the whole
# block) but its graph runs dense MLA, so the MTP cache has no indexer keys; the router
# bias exp_probs_b is created without the MTP flags and loads with the trunk
DSA_MTP_ARCHS = frozenset({"deepseek32", "glm-dsa"})
# What b11434 drafts otherwise, as one line each
NOT_PLANNED = {
    "deepseek4": "MTP drafting on deepseek4 (DeepSeek V4: a sliding-window MTP cache and "
    "hyper-connection head, src/models/deepseek4.cpp graph_mtp) is not planned yet",
    "gemma4": "Gemma 4 has no MTP block of its own: b11434 drafts it with a separate "
    "gemma4-assistant model (-md with --spec-type draft-mtp), not planned here",
}

_Tensors = list[tuple[str, tuple[int, ...]]]


def mtp_layers(g: Geometry) -> range:
    return range(g.n_layer - g.n_layer_nextn, g.n_layer)


def check_mtp(spec: ModelSpec, s: PlanSettings) -> None:
    """What llama.cpp refuses, or RigSpark cannot plan yet, as one line."""
    g = spec.geometry
    if g.architecture in NOT_PLANNED:
        raise InvalidSettingsError(NOT_PLANNED[g.architecture])
    if not g.n_layer_nextn:
        raise InvalidSettingsError(
            f"{spec.name} has no MTP / NextN blocks: llama.cpp refuses --spec-type "
            "draft-mtp (src/llama-context.cpp: no MTP layers)"
        )
    if g.architecture not in MTP_ARCHS:
        raise InvalidSettingsError(
            f"MTP drafting on {g.architecture} is not planned yet (planned: "
            f"{', '.join(sorted(MTP_ARCHS))})"
        )
    if spec.draft is not None:
        raise InvalidSettingsError(
            "a draft model (-md) and MTP drafting together are not planned: choose one"
        )


def _trunk_like(g: Geometry, indexer: bool = False) -> Geometry:
    """`g` with its MTP blocks as ordinary attention blocks: their KV heads the file's
    per-layer value where it gives one (Nemotron-H's arrays cover the MTP block), else
    the model's n_head_kv (llama.cpp reads it for every layer from a single value); no
    DSA indexer unless `indexer` (its weights, never its cache)."""
    kv = g.n_head_kv_per_layer
    if kv is not None:
        first = g.n_layer - g.n_layer_nextn
        kv = tuple(h if il < first or h else g.n_head_kv for il, h in enumerate(kv))
    return replace(
        g,
        n_layer_nextn=0,
        n_head_kv_per_layer=kv,
        indexer_head_size=g.indexer_head_size if indexer else 0,
        indexer_layers=None,
    )


def _nemotron_mtp_block(t: Geometry, il: int) -> _Tensors:
    """Nemotron-H MoE's MTP block (src/models/nemotron-h.cpp): an attention sub-layer
    (the trunk's attention layer) and a MoE sub-layer after post_attention_norm (the
    trunk's MoE layer without its attn_norm)."""
    assert t.n_ff_per_layer is not None
    ff = list(t.n_ff_per_layer)
    ff[il] = 0
    attn = block_tensors(replace(t, n_ff_per_layer=tuple(ff)), il)
    ff[il] = t.n_ff_expert
    moe = block_tensors(replace(t, n_ff_per_layer=tuple(ff)), il)[1:]
    return [*attn, (f"blk.{il}.post_attention_norm.weight", (t.n_embd,)), *moe]


def mtp_tensors(g: Geometry) -> _Tensors:
    """Names and ggml shapes of the MTP blocks' tensors, as the converter writes them and
    llama.cpp loads them with load_mtp (the optional nextn.embed_tokens and
    shared_head_head, absent from Qwen3.5 / GLM / DeepSeek files, left out)."""
    dsa = g.architecture in DSA_MTP_ARCHS
    t = _trunk_like(g, indexer=dsa)
    e = g.n_embd
    out: _Tensors = []
    for il in mtp_layers(g):
        if g.architecture == "nemotron_h_moe":
            out += _nemotron_mtp_block(t, il)
        else:
            block = block_tensors(t, il)
            out += [x for x in block if not (dsa and x[0].endswith("exp_probs_b.bias"))]
        p = f"blk.{il}.nextn."
        out += [
            (p + "eh_proj.weight", (2 * e, e)),
            (p + "enorm.weight", (e,)),
            (p + "hnorm.weight", (e,)),
            (p + "shared_head_norm.weight", (e,)),
        ]
    return out


def _typer(spec: ModelSpec, quant: str | None) -> Callable[[str, tuple[int, ...]], str]:
    """Each MTP tensor's ggml type: where the file's tensors are known, the type of the
    same tensor in the last trunk block that has it (Nemotron-H keeps attention and MoE
    in separate layers; 1-D: F32; eh_proj as the last attn_output); else llama-quantize's
    recipe for `quant`."""
    g = spec.geometry
    if spec.tensors is not None:
        trunk = g.n_layer - g.n_layer_nextn
        types: dict[str, str] = {}
        for x in sorted(spec.tensors, key=lambda x: -1 if x.layer is None else x.layer):
            if x.layer is not None and x.layer < trunk and x.name.startswith("blk."):
                types[x.name.split(".", 2)[2]] = x.type  # the last layer's type wins
        fallback = types.get("attn_output.weight", "F16")

        def of_file(name: str, shape: tuple[int, ...]) -> str:
            if len(shape) == 1:
                return "F32"
            short = name.split(".", 2)[2]
            return types.get(short, fallback)

        return of_file
    choose = chooser(quant or spec.available_quants[0])
    # llama-quantize counts the MTP block's attn_v and ffn_down too: they come after
    # the trunk's (attn_v_ffn_down_counts), at the end of the use_more_bits span
    i_wv, i_down = attn_v_ffn_down_counts(g)
    ctx = recipe_context(g)
    ctx = ctx._replace(
        n_attention_wv=ctx.n_attention_wv + g.n_layer_nextn,
        n_ffn_down=max(ctx.n_ffn_down, g.n_layer),
    )

    def of_recipe(name: str, shape: tuple[int, ...]) -> str:
        if len(shape) == 1:
            return "F32"
        layer = int(name.split(".")[1])
        return choose(name, shape[0], len(shape) == 3, ctx, i_wv, i_down, layer)

    return of_recipe


def mtp_weight_bytes(spec: ModelSpec, quant: str | None) -> dict[int, tuple[int, int]]:
    """Per MTP layer: (bytes, of which routed experts), each tensor padded as stored."""
    typer = _typer(spec, quant)
    out: dict[int, tuple[int, int]] = {il: (0, 0) for il in mtp_layers(spec.geometry)}
    for name, shape in mtp_tensors(spec.geometry):
        il = int(name.split(".")[1])
        b = gguf_padded(row_bytes(typer(name, shape), math.prod(shape)))
        total, experts = out[il]
        out[il] = (total + b, experts + (b if len(shape) == 3 else 0))
    return out


def mtp_kv_bytes(g: Geometry, s: PlanSettings, kv_k: KvCacheType, kv_v: KvCacheType) -> int:
    """The MTP context's KV cache of one MTP layer (every layer alike)."""
    t = _trunk_like(g)
    il = g.n_layer - 1
    sd = replace(s, kv_k=kv_k, kv_v=kv_v)
    return kv_row_pair_bytes(t, il, kv_k, kv_v, not s.flash_attn) * kv_cells(t, il, sd)


def rollback_state_bytes(g: Geometry, s: PlanSettings, layer: int) -> int:
    """The target's extra recurrent rows on `layer` while drafting (n_rs_seq = n_max)."""
    if g.architecture not in ROLLBACK_ARCHS:
        return 0
    return recurrent_state_bytes(g, layer, s, DRAFT_N_MAX) - recurrent_state_bytes(g, layer, s)


def _mtp_graph_geometry(g: Geometry, s: PlanSettings) -> Geometry:
    """One MTP block as a one-layer model for the compute tally; its logits are reserved
    for n_parallel rows (n_outputs_max), so the vocabulary is scaled to that many rows of
    the graph's tokens (as for a draft model's context)."""
    t = _trunk_like(g)
    tokens = min(s.context, s.n_ubatch)
    rows = min(s.parallel, tokens)
    return replace(
        t,
        n_layer=1,
        recurrent_layers=(),
        n_head_kv_per_layer=None,
        n_ff_per_layer=None,
        n_dense_lead=0,
        n_vocab=max(-(-g.n_vocab * rows // tokens), 1),
    )


def mtp_compute_bytes(
    g: Geometry, s: PlanSettings, layer_dev: str, out_dev: str, kv_k: KvCacheType
) -> dict[str, int]:
    """The MTP context's compute buffers per device, and its host output buffer."""
    one = _mtp_graph_geometry(g, s)
    sd = replace(s, kv_k=kv_k)
    on: dict[str, int] = {}
    if layer_dev == CPU:
        on[CPU] = mtp_cpu_compute_bytes(replace(one, n_vocab=g.n_vocab), sd, g.n_vocab)
        if out_dev != CPU:
            on[out_dev] = device_compute_bytes(one, sd, [], True)
    else:
        on[layer_dev] = device_compute_bytes(one, sd, [0], out_dev == layer_dev)
        if out_dev != layer_dev:
            on[out_dev] = on.get(out_dev, 0) + device_compute_bytes(
                one, sd, [], True, cpu=out_dev == CPU
            )
        on[CPU] = on.get(CPU, 0) + host_compute_bytes(one, sd)
    on[CPU] = on.get(CPU, 0) + output_buffer_bytes(g, s)
    return on


def _add(on: dict[str, int], device: str, n: int) -> None:
    if n:
        on[device] = on.get(device, 0) + n


def mtp_loads(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    target: Placement | None,
    kv_k: KvCacheType = KvCacheType.F16,
    kv_v: KvCacheType = KvCacheType.F16,
) -> tuple[dict[str, int], int, int, int, int]:
    """(bytes per device, weights, KV, compute, target state rows) of MTP drafting on
    `target`'s placement; without one, the MTP blocks are taken to sit on the last local
    GPU (where a layer split puts the last layers), or the CPU."""
    check_mtp(spec, s)
    g = spec.geometry
    if kv_v.quantized and not s.flash_attn:
        raise InvalidSettingsError(
            f"a quantized draft V cache ({kv_v.value}) needs flash attention "
            "(llama.cpp refuses the MTP context otherwise)"
        )
    default = f"gpu:{rig.local_gpus[-1]}" if rig.local_gpus else CPU

    def where(unit: str, experts: bool = False) -> str:
        if target is None:
            return default
        u = target.unit(unit)
        return (u.experts_device or u.device) if experts else u.device

    on: dict[str, int] = {}
    weights = kv = 0
    per_layer = mtp_weight_bytes(spec, s.quant)
    cache = mtp_kv_bytes(g, s, kv_k, kv_v)
    for il, (total, experts) in per_layer.items():
        unit = f"blk.{il}"
        _add(on, where(unit), total - experts)
        _add(on, where(unit, experts=True), experts)
        _add(on, where(unit), cache)
        weights += total
        kv += cache
    state = 0
    for il in g.recurrent_layers:
        extra = rollback_state_bytes(g, s, il)
        _add(on, where(f"blk.{il}"), extra)
        state += extra
    compute = mtp_compute_bytes(g, s, where(f"blk.{g.n_layer - 1}"), where("output"), kv_k)
    for d, n in compute.items():
        _add(on, d, n)
    return on, weights, kv, sum(compute.values()), state
