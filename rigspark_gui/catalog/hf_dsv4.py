"""DeepSeek V4's config.json (`model_type` deepseek_v4) to Geometry fields, as llama.cpp
b11434's converter maps them (conversion/deepseek.py: DeepseekV4Model).

The plain reader takes the dense fields (hidden_size, heads, num_key_value_heads 1,
head_dim, vocab_size, max_position_embeddings); this adds what the converter writes
besides: `compress_ratios` (the list also covers the MTP layer, which the converter drops,
so the first num_hidden_layers stand), `sliding_window` on every layer, `q_lora_rank`,
`o_groups`, `o_lora_rank`, `qk_rope_head_dim`, `hc_mult`, `num_hash_layers`, the lightning
indexer (`index_n_heads`, `index_head_dim`, on the ratio-4 layers) and the experts
(`n_routed_experts`, `num_experts_per_tok`, `moe_intermediate_size`, `n_shared_experts`;
no dense layer).
"""

from __future__ import annotations

from typing import Any

from rigspark_gui.core.errors import ModelImportError

__all__ = ["config_int", "dsv4_config"]

_HI = 1 << 24
_RATIOS = frozenset({0, 4, 128})


def config_int(data: dict[str, Any], name: str, fname: str, default: int | None = None) -> int:
    """An integer field of a config.json in 0..2^24, named in the error when it is not."""
    value = data.get(name)
    if value is None:
        if default is None:
            raise ModelImportError(f"{fname}: missing field {name}")
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _HI:
        raise ModelImportError(f"{fname}: field {name} must be an integer in 0..{_HI}")
    return value


def dsv4_config(data: dict[str, Any], fname: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config the plain reader takes (no dense FFN) and the geometry fields it adds."""
    n_layer = config_int(data, "num_hidden_layers", fname)
    raw = data.get("compress_ratios")
    if not isinstance(raw, list) or len(raw) < n_layer:
        raise ModelImportError(
            f"{fname}: field compress_ratios must list a ratio for each of {n_layer} layers"
        )
    ratios = tuple(raw[:n_layer])
    if any(isinstance(r, bool) or r not in _RATIOS for r in ratios):
        raise ModelImportError(f"{fname}: field compress_ratios: only 0, 4 and 128 are supported")
    csa = tuple(il for il, r in enumerate(ratios) if r == 4)
    n_ff_expert = config_int(data, "moe_intermediate_size", fname)
    n_shared = config_int(data, "n_shared_experts", fname, 0)
    extra = {
        "sliding_window": config_int(data, "sliding_window", fname),
        "swa_pattern": n_layer + 1,  # every layer slides (hparams.set_swa_pattern(0))
        "q_lora_rank": config_int(data, "q_lora_rank", fname),
        "rope_head_dim": config_int(data, "qk_rope_head_dim", fname),
        "o_groups": config_int(data, "o_groups", fname),
        "o_lora_rank": config_int(data, "o_lora_rank", fname),
        "hc_mult": config_int(data, "hc_mult", fname),
        "n_hash_layers": config_int(data, "num_hash_layers", fname, 0),
        "compress_ratios": ratios,
        "indexer_n_head": config_int(data, "index_n_heads", fname),
        "indexer_head_size": config_int(data, "index_head_dim", fname),
        "indexer_layers": None if len(csa) == n_layer else csa,
        "n_expert": config_int(data, "n_routed_experts", fname),
        "n_expert_used": config_int(data, "num_experts_per_tok", fname),
        "n_ff_expert": n_ff_expert,
        "n_shared_expert": n_shared,
        "n_ff_shared_expert": n_ff_expert * max(n_shared, 1),
        "n_ff": 0,  # every layer is MoE
    }
    # the plain reader wants a dense width; the config has none (extra's n_ff replaces it)
    return data | {"intermediate_size": n_ff_expert}, extra
