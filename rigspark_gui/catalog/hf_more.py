"""config.json types whose fields the plain reader of hf_import.py understands once they
are unwrapped or renamed, as llama.cpp b11434's converter maps them.

- `mistral3` (Mistral Small 3.x, Magistral, Ministral 3, Devstral 2: text_config) and
  `ministral3` (a bare text config): architecture `mistral3`, Mistral's fields.
- `qwen3_vl` / `qwen3_vl_moe`: the text_config of Qwen3-VL as `qwen3vl` / `qwen3vlmoe`.
- `olmo3`: OLMo 2's layout; `layer_types` sets the sliding layers (conversion/olmo.py
  writes sliding_window and the per-layer pattern).
- `glm4_moe_lite` (GLM-4.7-Flash): DeepSeek's MLA fields, converted as `deepseek2`.
- `deepseek_v32` (DeepSeek V3.2): DeepSeek V3's fields plus the lightning indexer
  (`index_n_heads`, `index_head_dim`); conversion/deepseek.py (DeepseekV32Model) keeps the
  NextN block past num_hidden_layers, a layer without KV.
- `mistral4` (Mistral Small 4, bare or as a `mistral3` text_config): DeepSeek-V2's fields;
  conversion/mistral3.py converts it as `mistral4`, whose loader is deepseek2's.
- `seed_oss`, `apertus`: the plain dense fields under their own architecture.
- `minimax_m2`: experts as wide as intermediate_size on every layer (conversion/minimax.py).
- `deepseek_v4` (DeepSeek V4): the plain dense fields plus hf_dsv4.py's.
- `ernie4_5_moe`: moe_num_experts / moe_k / moe_intermediate_size, experts from
  moe_layer_start_index on, shared experts of intermediate_size / num_key_value_heads
  (conversion/ernie.py writes that width as expert_shared_feed_forward_length).
"""

from __future__ import annotations

from typing import Any

from rigspark_gui.catalog.hf_dsv4 import config_int, dsv4_config
from rigspark_gui.core.errors import ModelImportError

__all__ = ["HF_MORE_TYPES", "more_config"]

# model_type -> (the hf_import family whose fields it uses, llama.cpp architecture)
HF_MORE_TYPES: dict[str, tuple[str, str]] = {
    "mistral3": ("mistral", "mistral3"),
    "ministral3": ("mistral", "mistral3"),
    "qwen3_vl": ("qwen3", "qwen3vl"),
    "qwen3_vl_moe": ("qwen3_moe", "qwen3vlmoe"),
    "olmo3": ("olmo2", "olmo2"),
    "glm4_moe_lite": ("deepseek_v3", "deepseek2"),
    "mistral4": ("deepseek_v3", "mistral4"),
    "deepseek_v32": ("deepseek_v3", "deepseek32"),
    "seed_oss": ("llama", "seed_oss"),
    "apertus": ("llama", "apertus"),
    "minimax_m2": ("mixtral", "minimax-m2"),
    "ernie4_5_moe": ("llama", "ernie4_5-moe"),
    "deepseek_v4": ("llama", "deepseek4"),
}
_WRAPPED = frozenset({"mistral3", "qwen3_vl", "qwen3_vl_moe"})


def more_config(
    top: dict[str, Any], model_type: str, fname: str
) -> tuple[dict[str, Any], str, str, dict[str, Any]]:
    """The flat config the plain reader takes, the family whose fields it reads, the
    architecture, and geometry fields that replace what the family would give."""
    family, arch = HF_MORE_TYPES[model_type]
    data = top
    if model_type in _WRAPPED:
        inner = top.get("text_config")
        if not isinstance(inner, dict):
            raise ModelImportError(f"{fname}: field text_config must be an object")
        # the text tower's fields; a tie flag only the outer config states still holds
        data = {k: v for k, v in top.items() if k != "text_config"} | inner
        if inner.get("model_type") == "mistral4":  # Mistral Small 4 in a mistral3 wrapper
            family, arch = HF_MORE_TYPES["mistral4"]
    extra: dict[str, Any] = {}
    if model_type == "glm4_moe_lite" and data.get("head_dim") is None:
        # 20 heads over 2048 do not divide: MLA's widths replace head_dim anyway
        nope = config_int(data, "qk_nope_head_dim", fname)
        data = data | {"head_dim": nope + config_int(data, "qk_rope_head_dim", fname)}
    if arch == "mistral4" and not config_int(data, "first_k_dense_replace", fname, 0):
        extra = {"n_ff": 0}  # no dense layer: intermediate_size sizes nothing (as from a GGUF)
    if arch == "deepseek32" or model_type == "glm4_moe_lite":
        # both converters keep the MTP block(s) as more layers: -ngl slots with no KV,
        # loaded only when drafting with them
        n_layer = config_int(data, "num_hidden_layers", fname)
        nextn = config_int(data, "num_nextn_predict_layers", fname, 0)
        n_head = config_int(data, "num_attention_heads", fname)
        if arch == "deepseek32":
            extra = {
                "indexer_n_head": config_int(data, "index_n_heads", fname),
                "indexer_head_size": config_int(data, "index_head_dim", fname),
            }
        if nextn:
            extra |= {
                "n_layer": n_layer + nextn,
                "n_layer_nextn": nextn,
                "n_head_kv_per_layer": (n_head,) * n_layer + (0,) * nextn,
            }
    if model_type == "deepseek_v4":
        data, extra = dsv4_config(data, fname)
    if model_type == "olmo3":
        window = config_int(data, "sliding_window", fname, 0)
        types = data.get("layer_types")
        if window and isinstance(types, list) and "sliding_attention" in types:
            from rigspark_gui.catalog.gguf_import import swa_period

            period = swa_period([t == "sliding_attention" for t in types])
            if period is None:
                raise ModelImportError(
                    f"{fname}: field layer_types: sliding layers do not repeat periodically"
                )
            extra = {"sliding_window": window, "swa_pattern": period}
    elif model_type == "ernie4_5_moe":
        n_kv = config_int(data, "num_key_value_heads", fname)
        shared = config_int(data, "moe_num_shared_experts", fname, 0)
        n_ff = config_int(data, "intermediate_size", fname)
        extra = {
            "n_expert": config_int(data, "moe_num_experts", fname),
            "n_expert_used": config_int(data, "moe_k", fname),
            "n_ff_expert": config_int(data, "moe_intermediate_size", fname),
            "n_shared_expert": shared,
            "n_ff_shared_expert": n_ff // n_kv if shared and n_kv else 0,
            "n_dense_lead": config_int(data, "moe_layer_start_index", fname, 0),
            "moe_every": config_int(data, "moe_layer_interval", fname, 1) or 1,
        }
    return data, family, arch, extra
