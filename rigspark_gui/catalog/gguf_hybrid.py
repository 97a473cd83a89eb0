"""GGUF metadata of hybrid architectures (Gated DeltaNet, Mamba-2, short convolutions) to
Geometry fields, the way llama.cpp b11434's loaders read them (src/models/qwen35*.cpp,
qwen3next.cpp, nemotron-h.cpp, granite-hybrid.cpp, lfm2*.cpp: load_arch_hparams).

Which layers are recurrent:
- qwen35 / qwen35moe / qwen3next: `attention.recurrent_layers` (one flag per block) or,
  without it, every layer but each `full_attention_interval`-th (default 4);
- nemotron_h / nemotron_h_moe: no KV heads and no FFN (`head_count_kv` and
  `feed_forward_length` are per-layer arrays: attention layers have KV heads, FFN/MoE
  layers an FFN width);
- granitehybrid / lfm2 / lfm2moe: no KV heads;
- kimi-linear: no KV heads (its KDA layers); the MLA layers keep the logical heads
  read_geometry gives MLA files, and the KDA head size is `kda.head_dim`.

MTP blocks (`nextn_predict_layers`, after the trunk) are skipped by the loader unless MTP
drafting is on: the Geometry keeps them as placement slots (`n_layer_nextn`: -ngl counts
them) without KV heads, state or weights, and the importer drops their tensors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rigspark_gui.core.memory import HYBRID_ARCHS, KDA_ARCHS

if TYPE_CHECKING:  # gguf_geometry calls in here
    from rigspark_gui.catalog.gguf_geometry import Metadata

__all__ = ["HYBRID_ARCHS", "hybrid_fields", "trunk_layers"]

_DELTANET = frozenset({"qwen35", "qwen35moe", "qwen3next"})
_NEMOTRON = frozenset({"nemotron_h", "nemotron_h_moe"})


def trunk_layers(m: Metadata, arch: str) -> int:
    """Blocks the loader runs: block_count less the MTP blocks at its end."""
    n_all = m.required_int(arch + ".block_count")
    nextn = m.integer(arch + ".nextn_predict_layers", 0)
    return n_all - nextn if 0 < nextn < n_all else n_all


def _per_layer(m: Metadata, key: str, n_all: int, default: int) -> list[int]:
    raw = m.int_or_layers(key, n_all, default)
    return list(raw) if isinstance(raw, list) else [raw] * n_all


def hybrid_fields(m: Metadata, arch: str, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` (the Geometry read as for any architecture, block_count layers) with the
    trunk's layers, the recurrent layers, the ssm / short-conv shapes and, for
    Nemotron-H, each layer's FFN width."""
    p = arch + "."
    n_all = m.required_int(p + "block_count")
    n_layer = trunk_layers(m, arch)
    kv = _per_layer(m, p + "attention.head_count_kv", n_all, fields["n_head_kv"])
    if arch in KDA_ARCHS:  # the loader requires the MLA keys and the KDA head size
        for key in ("attention.key_length_mla", "attention.kv_lora_rank", "kda.head_dim"):
            m.required_int(p + key)
        kv = list(fields["n_head_kv_per_layer"] or [fields["n_head_kv"]] * n_all)
    kv[n_layer:] = [0] * (n_all - n_layer)  # MTP blocks: no KV in the main context
    ff = _per_layer(m, p + "feed_forward_length", n_all, 0)
    if arch in _DELTANET:
        flags = m.swa_layers(p + "attention.recurrent_layers", n_all)
        if isinstance(flags, list):
            recurrent = [i for i in range(n_layer) if flags[i]]
        else:
            interval = m.integer(p + "full_attention_interval", 4) or 4
            recurrent = [i for i in range(n_layer) if (i + 1) % interval != 0]
    elif arch in _NEMOTRON:
        recurrent = [i for i in range(n_layer) if kv[i] == 0 and ff[i] == 0]
    else:
        recurrent = [i for i in range(n_layer) if kv[i] == 0]
    out = dict(fields)
    out["n_layer"] = n_all
    out["n_layer_nextn"] = n_all - n_layer
    kv_attn = [0 if i in recurrent else k for i, k in enumerate(kv)]
    out["n_head_kv"] = max(kv_attn, default=0)
    # per layer as the file lists them (0 on recurrent layers), else one count for all
    per_layer = isinstance(m.int_or_layers(p + "attention.head_count_kv", n_all, 0), list)
    out["n_head_kv_per_layer"] = tuple(kv) if per_layer or n_all > n_layer else None
    out["recurrent_layers"] = tuple(recurrent)
    if arch in _NEMOTRON:
        out["n_ff_per_layer"] = tuple(ff)
        out["n_ff"] = 0 if fields["n_expert"] else max(ff, default=0)
    out["ssm_d_conv"] = m.integer(p + "ssm.conv_kernel", 0)
    out["ssm_d_inner"] = m.integer(p + "ssm.inner_size", 0)
    out["ssm_d_state"] = m.integer(p + "ssm.state_size", 0)
    out["ssm_dt_rank"] = m.integer(p + "ssm.time_step_rank", 0)
    out["ssm_n_group"] = m.integer(p + "ssm.group_count", 0)
    out["shortconv_l_cache"] = m.integer(p + "shortconv.l_cache", 0)
    out["moe_latent_size"] = m.integer(p + "moe_latent_size", 0)
    out["kda_head_dim"] = m.integer(p + "kda.head_dim", 0)
    if arch in KDA_ARCHS:  # n_embd_head_v as llama.cpp reads it (n_embd / n_head without it)
        default_v = fields["n_embd"] // fields["n_head"] if fields["n_head"] else 0
        out["kda_value_length"] = m.integer(p + "attention.value_length", default_v)
    return out
