"""config.json of hybrid models to Geometry, as llama.cpp b11434's converter maps it.

- Qwen3.5 / Qwen3.6 (`qwen3_5`, `qwen3_5_moe`, their `_text` configs) and Qwen3-Next
  (`qwen3_next`): conversion/qwen.py, Qwen3NextModel.set_gguf_parameters: conv kernel
  `linear_conv_kernel_dim`, state size `linear_key_head_dim`, groups
  `linear_num_key_heads`, time-step rank `linear_num_value_heads`, inner size
  `linear_value_head_dim x linear_num_value_heads`; recurrent layers from `layer_types`
  (`linear_attention`) or every layer but each `full_attention_interval`-th.
- Nemotron-H (`nemotron_h`): conversion/nemotron.py: `hybrid_override_pattern` (M Mamba-2,
  * attention, - MLP, E MoE) or `layers_block_type`; d_inner = mamba_num_heads x
  mamba_head_dim, time-step rank = mamba_num_heads; MoE when `num_experts_per_tok` is set
  (architecture nemotron_h_moe); the vocabulary padded to a multiple of 8.

- Kimi Linear (`kimi_linear`): conversion/kimi_linear.py, KimiLinearModel: MLA layers are
  `linear_attn_config.full_attn_layers` (1-based), the others KDA with
  `linear_attn_config.head_dim` and `short_conv_kernel_size`; MLA per-head K is
  qk_nope_head_dim + qk_rope_head_dim, V v_head_dim; routed experts after
  `first_k_dense_replace` dense layers, `num_shared_experts` x moe_intermediate_size wide
  shared expert. The b11434 loader runs KDA with num_attention_heads heads and never reads
  q_lora_rank: a config that needs either otherwise is refused.

MTP blocks (`mtp_num_hidden_layers`; Nemotron's `num_nextn_predict_layers` with experts)
are written after the trunk by default: placement slots (`n_layer_nextn`) that llama.cpp
skips at load unless drafting with them. Qwen3-Next's config does not state its MTP block
(the converter counts it from the checkpoint): none is assumed.
"""

from __future__ import annotations

from typing import Any

from rigspark_gui.core.errors import ModelImportError, validation_message
from rigspark_gui.core.model import Geometry
from rigspark_gui.formats.model_spec import Geometry as GeometryFile

__all__ = ["HF_HYBRID_TYPES", "hybrid_config_geometry"]

# model_type -> llama.cpp architecture (nemotron_h: _moe when it has experts)
HF_HYBRID_TYPES = {
    "qwen3_5": "qwen35",
    "qwen3_5_text": "qwen35",
    "qwen3_5_moe": "qwen35moe",
    "qwen3_5_moe_text": "qwen35moe",
    "qwen3_next": "qwen3next",
    "nemotron_h": "nemotron_h",
    "kimi_linear": "kimi-linear",
}
_HI = 1 << 24
_NEMOTRON_KINDS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


class _Fields:
    """Typed reads from one config object; every error names the file and the field."""

    def __init__(self, data: dict[str, Any], fname: str, prefix: str) -> None:
        self.data, self.fname, self.prefix = data, fname, prefix

    def fail(self, reason: str) -> ModelImportError:
        return ModelImportError(f"{self.fname}: {reason}")

    def int(self, name: str, default: int | None = None) -> int:
        value = self.data.get(name)
        if value is None:
            if default is None:
                raise self.fail(f"missing field {self.prefix}{name}")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _HI:
            raise self.fail(f"field {self.prefix}{name} must be an integer in 0..{_HI}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(f"field {self.prefix}{name} must be true or false")
        return value


def _qwen(c: _Fields, arch: str, tied: bool) -> dict[str, Any]:
    n_layer = c.int("num_hidden_layers")
    n_embd, n_head = c.int("hidden_size"), c.int("num_attention_heads")
    if not n_head:
        raise c.fail(f"field {c.prefix}num_attention_heads must be positive")
    types = c.data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n_layer:
            raise c.fail(f"field {c.prefix}layer_types must list one type per layer")
        recurrent = [i for i, t in enumerate(types) if t == "linear_attention"]
    else:
        every = c.int("full_attention_interval", 4) or 4
        recurrent = [i for i in range(n_layer) if (i + 1) % every != 0]
    k_dim, v_heads = c.int("linear_key_head_dim"), c.int("linear_num_value_heads")
    mtp = c.int("mtp_num_hidden_layers", 0) if arch != "qwen3next" else 0
    n_kv = c.int("num_key_value_heads", n_head)
    fields: dict[str, Any] = {
        "architecture": arch,
        "n_layer": n_layer + mtp,
        "n_layer_nextn": mtp,
        "n_embd": n_embd,
        "n_head": n_head,
        "n_head_kv": n_kv,
        "n_head_kv_per_layer": (n_kv,) * n_layer + (0,) * mtp if mtp else None,
        "head_dim_k": c.int("head_dim", n_embd // n_head),
        "head_dim_v": c.int("head_dim", n_embd // n_head),
        "n_vocab": c.int("vocab_size"),
        "n_ff": c.int("intermediate_size") if arch == "qwen35" else 0,  # dense FFN width
        "tied_embeddings": tied,
        "recurrent_layers": tuple(recurrent),
        "ssm_d_conv": c.int("linear_conv_kernel_dim", 4),
        "ssm_d_inner": c.int("linear_value_head_dim") * v_heads,
        "ssm_d_state": k_dim,
        "ssm_dt_rank": v_heads,
        "ssm_n_group": c.int("linear_num_key_heads"),
        "context_length": c.int("max_position_embeddings"),
    }
    if arch != "qwen35":
        shared = c.int("shared_expert_intermediate_size", 0)
        fields |= {
            "n_expert": c.int("num_experts"),
            "n_expert_used": c.int("num_experts_per_tok"),
            "n_ff_expert": c.int("moe_intermediate_size"),
            "n_shared_expert": 1 if shared else 0,
            "n_ff_shared_expert": shared,
        }
    return fields


def _nemotron(c: _Fields, tied: bool) -> dict[str, Any]:
    pattern = c.data.get("hybrid_override_pattern")
    blocks = c.data.get("layers_block_type")
    if not isinstance(pattern, str) and isinstance(blocks, list):
        pattern = "".join(_NEMOTRON_KINDS.get(str(b), "?") for b in blocks)
    if not isinstance(pattern, str) or not pattern or set(pattern) - set("M*-E"):
        raise c.fail("hybrid_override_pattern must be a string of M, *, - and E")
    moe = c.data.get("num_experts_per_tok") is not None
    n_kv, n_head = c.int("num_key_value_heads"), c.int("num_attention_heads")
    ff = c.int("moe_intermediate_size") if moe else c.int("intermediate_size")
    ffn = "E" if moe else "-"
    vocab = c.int("vocab_size")
    # the MoE converter appends one MTP block (attention + MoE, no KV in the main context)
    mtp = 1 if moe and c.int("num_nextn_predict_layers", 0) else 0
    pattern += "X" * mtp
    fields: dict[str, Any] = {
        "architecture": "nemotron_h_moe" if moe else "nemotron_h",
        "n_layer": len(pattern),
        "n_layer_nextn": mtp,
        "n_embd": c.int("hidden_size"),
        "n_head": n_head,
        "n_head_kv": n_kv,
        "n_head_kv_per_layer": tuple(n_kv if k == "*" else 0 for k in pattern),
        "head_dim_k": c.int("head_dim"),
        "head_dim_v": c.int("head_dim"),
        "n_vocab": -(-vocab // 8) * 8,  # the converter pads it (pad_vocab_size_multiple)
        "n_ff": 0 if moe else ff,
        "n_ff_per_layer": tuple(ff if k in (ffn, "X") else 0 for k in pattern),
        "tied_embeddings": tied,
        "recurrent_layers": tuple(i for i, k in enumerate(pattern) if k == "M"),
        "ssm_d_conv": c.int("conv_kernel"),
        "ssm_d_inner": c.int("mamba_num_heads") * c.int("mamba_head_dim"),
        "ssm_d_state": c.int("ssm_state_size"),
        "ssm_dt_rank": c.int("mamba_num_heads"),
        "ssm_n_group": c.int("n_groups", 1),
        "context_length": c.int("max_position_embeddings"),
    }
    if moe:
        shared = c.int("moe_shared_expert_intermediate_size", 0)
        fields |= {
            "n_expert": c.int("n_routed_experts"),
            "n_expert_used": c.int("num_experts_per_tok"),
            "n_ff_expert": ff,
            "n_shared_expert": 1 if shared else 0,
            "n_ff_shared_expert": shared,
            "moe_latent_size": c.int("moe_latent_size", 0),
        }
    return fields


def _kimi(c: _Fields, tied: bool) -> dict[str, Any]:
    n_layer, n_head = c.int("num_hidden_layers"), c.int("num_attention_heads")
    lin = c.data.get("linear_attn_config")
    if not isinstance(lin, dict):
        raise c.fail(f"missing field {c.prefix}linear_attn_config")
    la = _Fields(lin, c.fname, c.prefix + "linear_attn_config.")
    full = lin.get("full_attn_layers")
    if not isinstance(full, list) or not all(isinstance(i, int) for i in full):
        raise c.fail(f"field {la.prefix}full_attn_layers must list layer numbers")
    if la.int("num_heads", n_head) != n_head:
        raise c.fail("KDA heads other than num_attention_heads: llama.cpp cannot load it")
    if c.data.get("q_lora_rank") is not None:
        raise c.fail("q_lora_rank is set: llama.cpp's kimi-linear loader has no Q compression")
    attn = {i - 1 for i in full}  # 1-based, as the converter reads them
    rope, experts = c.int("qk_rope_head_dim"), c.int("moe_intermediate_size")
    shared = c.int("num_shared_experts", 0)
    ctx = next((c.int(k) for k in _KIMI_CTX if c.data.get(k) is not None), None)
    used = "num_experts_per_tok" if "num_experts_per_tok" in c.data else "num_experts_per_token"
    if ctx is None:
        raise c.fail(f"missing field {c.prefix}max_position_embeddings")
    return {
        "architecture": "kimi-linear",
        "n_layer": n_layer,
        "n_embd": c.int("hidden_size"),
        "n_head": n_head,
        "n_head_kv": n_head,  # MLA: the logical heads, as the GGUF importer gives them
        "n_head_kv_per_layer": tuple(n_head if i in attn else 0 for i in range(n_layer)),
        "head_dim_k": c.int("qk_nope_head_dim") + rope,
        "head_dim_v": c.int("v_head_dim"),
        "kv_lora_rank": c.int("kv_lora_rank"),
        "rope_head_dim": rope,
        "n_vocab": c.int("vocab_size"),
        "n_ff": c.int("intermediate_size"),
        "tied_embeddings": tied,
        "n_expert": c.int("num_experts"),
        "n_expert_used": c.int(used),
        "n_ff_expert": experts,
        "n_shared_expert": shared,
        "n_ff_shared_expert": experts * shared,
        "n_dense_lead": c.int("first_k_dense_replace", 0),
        "recurrent_layers": tuple(i for i in range(n_layer) if i not in attn),
        "ssm_d_conv": la.int("short_conv_kernel_size"),
        "kda_head_dim": la.int("head_dim"),
        # the converter's value_length: head_dim, else llama.cpp's n_embd / n_head
        "kda_value_length": c.int("head_dim", c.int("hidden_size") // max(n_head, 1)),
        "context_length": ctx,
    }


# the converter's context keys, first found wins (TextModel.set_gguf_parameters)
_KIMI_CTX = ("max_position_embeddings", "n_ctx", "n_positions", "max_length",
             "max_sequence_length", "model_max_length")  # fmt: skip


def hybrid_config_geometry(top: dict[str, Any], model_type: str, fname: str) -> Geometry:
    """The Geometry of a hybrid model's config.json (HF_HYBRID_TYPES)."""
    inner = top.get("text_config")
    data, prefix = (inner, "text_config.") if isinstance(inner, dict) else (top, "")
    c = _Fields(data, fname, prefix)
    tied = c.flag("tie_word_embeddings", _Fields(top, fname, "").flag("tie_word_embeddings", False))
    arch = HF_HYBRID_TYPES[model_type]
    if arch == "kimi-linear":
        fields = _kimi(c, tied)
    else:
        fields = _nemotron(c, tied) if arch == "nemotron_h" else _qwen(c, arch, tied)
    try:
        record: Geometry = GeometryFile(**fields).to_record()
    except ValueError as exc:  # pydantic's ValidationError, or fields that disagree
        msg = " ".join(validation_message(exc).split())
        raise ModelImportError(f"{fname}: unusable geometry ({msg})") from exc
    return record
