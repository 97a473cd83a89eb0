"""Valid inputs the mutators start from: small GGUFs written with gguf.GGUFWriter, the
real `data/*.json`, `examples/rig-2x3090.json` and a few Hugging Face configs."""

from __future__ import annotations

import json
import logging
import random
import tempfile
from pathlib import Path
from typing import Any

import gguf
import numpy as np

ROOT = Path(__file__).resolve().parents[1]

logging.getLogger("gguf").setLevel(logging.WARNING)


def _tensor(name: str, ne: tuple[int, ...], qtype: str) -> tuple[str, Any, Any]:
    qt = gguf.GGMLQuantizationType[qtype]
    shape = tuple(reversed(ne))
    if qt == gguf.GGMLQuantizationType.F32:
        return name, np.zeros(shape, np.float32), None
    if qt == gguf.GGMLQuantizationType.F16:
        return name, np.zeros(shape, np.float16), None
    block, size = gguf.GGML_QUANT_SIZES[qt]
    return name, np.zeros((*shape[:-1], shape[-1] // block * size), np.uint8), qt


def _add(w: gguf.GGUFWriter, key: str, value: Any) -> None:
    if isinstance(value, bool):
        w.add_bool(key, value)
    elif isinstance(value, int):
        w.add_uint32(key, value)
    elif isinstance(value, float):
        w.add_float32(key, value)
    elif isinstance(value, str):
        w.add_string(key, value)
    else:
        w.add_array(key, value)


def gguf_bytes(
    arch: str,
    kv: dict[str, Any],
    tensors: list[tuple[str, tuple[int, ...], str]],
    *,
    big_endian: bool = False,
) -> bytes:
    """One complete GGUF file, returned as bytes."""
    endian = gguf.GGUFEndian.BIG if big_endian else gguf.GGUFEndian.LITTLE
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seed.gguf"
        w = gguf.GGUFWriter(path, arch, endianess=endian)
        for key, value in kv.items():
            _add(w, key, value)
        for name, ne, qtype in tensors:
            tname, arr, raw = _tensor(name, ne, qtype)
            w.add_tensor(tname, arr, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return path.read_bytes()


def decoder_gguf(
    arch: str,
    *,
    n_layer: int = 2,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_vocab: int = 16,
    wtype: str = "F16",
    tied: bool = False,
    n_expert: int = 0,
    extra: dict[str, Any] | None = None,
    big_endian: bool = False,
) -> bytes:
    head_dim = n_embd // n_head
    kv: dict[str, Any] = {
        "general.name": f"Tiny {arch}",
        "general.basename": arch,
        "general.file_type": 7,
        f"{arch}.block_count": n_layer,
        f"{arch}.embedding_length": n_embd,
        f"{arch}.attention.head_count": n_head,
        f"{arch}.attention.head_count_kv": n_head_kv,
        f"{arch}.feed_forward_length": n_ff,
        f"{arch}.context_length": 4096,
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(n_vocab)],
        "tokenizer.ggml.scores": [0.0] * n_vocab,
    }
    if n_expert:
        kv[f"{arch}.expert_count"] = n_expert
        kv[f"{arch}.expert_used_count"] = min(2, n_expert)
    kv.update(extra or {})
    t: list[tuple[str, tuple[int, ...], str]] = [
        ("token_embd.weight", (n_embd, n_vocab), "F16"),
        ("output_norm.weight", (n_embd,), "F32"),
    ]
    if not tied:
        t.append(("output.weight", (n_embd, n_vocab), wtype))
    for il in range(n_layer):
        p = f"blk.{il}."
        t += [
            (p + "attn_norm.weight", (n_embd,), "F32"),
            (p + "attn_q.weight", (n_embd, n_head * head_dim), wtype),
            (p + "attn_k.weight", (n_embd, n_head_kv * head_dim), wtype),
            (p + "attn_v.weight", (n_embd, n_head_kv * head_dim), wtype),
            (p + "attn_output.weight", (n_head * head_dim, n_embd), wtype),
        ]
        if n_expert:
            t += [
                (p + "ffn_gate_inp.weight", (n_embd, n_expert), "F32"),
                (p + "ffn_up_exps.weight", (n_embd, n_ff, n_expert), wtype),
                (p + "ffn_down_exps.weight", (n_ff, n_embd, n_expert), wtype),
            ]
        else:
            t += [
                (p + "ffn_up.weight", (n_embd, n_ff), wtype),
                (p + "ffn_down.weight", (n_ff, n_embd), wtype),
            ]
    return gguf_bytes(arch, kv, t, big_endian=big_endian)


def gguf_seeds() -> list[bytes]:
    """A handful of small valid GGUFs covering the importer's branches."""
    return [
        decoder_gguf("llama"),
        decoder_gguf("llama", wtype="Q8_0", tied=True),
        decoder_gguf("qwen2", n_head_kv=4, wtype="Q4_0"),
        decoder_gguf("gemma2", extra={"gemma2.attention.sliding_window": 512}),
        decoder_gguf(
            "gemma3",
            n_layer=6,
            extra={
                "gemma3.attention.sliding_window": 256,
                "gemma3.attention.sliding_window_pattern": [True] * 5 + [False],
            },
        ),
        decoder_gguf("qwen3moe", n_expert=4, wtype="Q8_0"),
        decoder_gguf(
            "deepseek2",
            n_expert=4,
            extra={
                "deepseek2.attention.kv_lora_rank": 32,
                "deepseek2.attention.key_length_mla": 24,
                "deepseek2.attention.value_length_mla": 16,
                "deepseek2.rope.dimension_count": 8,
                "deepseek2.leading_dense_block_count": 0,
                "deepseek2.nextn_predict_layers": 1,
            },
        ),
        decoder_gguf("llama4", n_expert=2, extra={"llama4.interleave_moe_layer_step": 2}),
        decoder_gguf("llama", big_endian=True),
    ]


def hf_seeds() -> list[dict[str, Any]]:
    """config.json shapes of the families the importer knows (figures from their repos)."""
    llama = {
        "model_type": "llama",
        "_name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
    }
    return [
        llama,
        {**llama, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2},
        {
            **llama,
            "model_type": "qwen3_moe",
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 768,
            "head_dim": 128,
        },
        {
            "model_type": "gemma3",
            "text_config": {"num_hidden_layers": 34, "sliding_window": 1024},
        },
        {
            "model_type": "gemma2",
            "num_hidden_layers": 26,
            "hidden_size": 2304,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "intermediate_size": 9216,
            "vocab_size": 256000,
            "max_position_embeddings": 8192,
            "sliding_window": 4096,
            "layer_types": ["sliding_attention", "full_attention"] * 13,
        },
        {
            "model_type": "deepseek_v3",
            "num_hidden_layers": 61,
            "hidden_size": 7168,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "intermediate_size": 18432,
            "moe_intermediate_size": 2048,
            "n_routed_experts": 256,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "first_k_dense_replace": 3,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "kv_lora_rank": 512,
            "q_lora_rank": 1536,
            "vocab_size": 129280,
            "max_position_embeddings": 163840,
        },
        {
            "model_type": "llama4",
            "text_config": {
                **{k: v for k, v in llama.items() if k != "model_type"},
                "num_local_experts": 16,
                "num_experts_per_tok": 1,
                "interleave_moe_layer_step": 2,
                "intermediate_size_mlp": 16384,
            },
        },
        {
            "model_type": "falcon",
            "hidden_size": 4544,
            "num_attention_heads": 71,
            "num_hidden_layers": 32,
            "vocab_size": 65024,
        },
        {
            **llama,
            "model_type": "glm4_moe",
            "moe_intermediate_size": 1408,
            "n_routed_experts": 128,
            "n_shared_experts": 1,
            "num_experts_per_tok": 8,
            "num_nextn_predict_layers": 1,
        },
    ]


def safetensors_index_seed() -> dict[str, Any]:
    return {
        "metadata": {"total_size": 16060522496},
        "weight_map": {"model.embed_tokens.weight": "model-00001-of-00004.safetensors"},
    }


def rig_seeds() -> list[dict[str, Any]]:
    example = json.loads((ROOT / "examples" / "rig-2x3090.json").read_text(encoding="utf-8"))
    minimal = {"schema_version": 1, "ram_total_bytes": 17179869184}
    what_if = {
        "schema_version": 1,
        "name": "what-if",
        "gpus": [
            {"name": "NVIDIA GeForce RTX 3080", "memory_total_bytes": 12884901888},
            {"name": "Apple M2 Ultra", "unified": True},
            {"name": "Unknown board", "vendor": "amd", "memory_free_bytes": 8 << 30},
        ],
        "ram_total_bytes": 1 << 36,
        "cpu": {"cores": 8, "threads": 16},
        "disk_free_bytes": 1 << 40,
        "provenance": {"ram_total_bytes": {"basis": "user", "source": "typed"}},
    }
    return [example, minimal, what_if]


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def catalog_seed() -> dict[str, Any]:
    return _load(ROOT / "data" / "models.json")


def gpu_database_seed() -> dict[str, Any]:
    return _load(ROOT / "data" / "gpus.json")


def small_slices(doc: dict[str, Any], key: str, rng: random.Random, n: int) -> list[Any]:
    """`doc` with only a few of its `key` entries: mutations land on fewer, likelier spots."""
    entries = doc[key]
    out = []
    for _ in range(n):
        k = rng.randint(1, min(4, len(entries)))
        out.append({**doc, key: rng.sample(entries, k)})
    return out
