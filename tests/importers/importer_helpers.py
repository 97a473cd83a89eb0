"""Builders for the importer tests: tiny GGUF files written with gguf.GGUFWriter."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gguf
import numpy as np

logging.getLogger("gguf").setLevel(logging.WARNING)


@dataclass(frozen=True)
class T:
    """One tensor to write: name, ggml shape (ne0 first) and ggml type name."""

    name: str
    ne: tuple[int, ...]
    type: str = "F32"


@dataclass(frozen=True)
class Written:
    """What was written: the first file and the bytes of each tensor's data."""

    path: Path
    paths: list[Path]
    tensor_bytes: dict[str, int]
    tensor_types: dict[str, str]
    tensor_shapes: dict[str, tuple[int, ...]]


def _add_kv(w: gguf.GGUFWriter, key: str, value: Any) -> None:
    if isinstance(value, bool):
        w.add_bool(key, value)
    elif isinstance(value, int):
        w.add_uint32(key, value)
    elif isinstance(value, float):
        w.add_float32(key, value)
    elif isinstance(value, str):
        w.add_string(key, value)
    elif isinstance(value, list):
        w.add_array(key, value)
    else:
        raise TypeError(key)


def _array_for(t: T) -> tuple[np.ndarray[Any, Any], gguf.GGMLQuantizationType | None]:
    qt = gguf.GGMLQuantizationType[t.type]
    np_shape = tuple(reversed(t.ne))
    if qt == gguf.GGMLQuantizationType.F32:
        return np.zeros(np_shape, np.float32), None
    if qt == gguf.GGMLQuantizationType.F16:
        return np.zeros(np_shape, np.float16), None
    block, size = gguf.GGML_QUANT_SIZES[qt]
    assert np_shape[-1] % block == 0, t
    byte_shape = (*np_shape[:-1], np_shape[-1] // block * size)
    return np.zeros(byte_shape, np.uint8), qt


def write_gguf(
    path: Path,
    arch: str,
    kv: dict[str, Any],
    tensors: list[T],
    *,
    split_max_tensors: int = 0,
    endian: gguf.GGUFEndian = gguf.GGUFEndian.LITTLE,
) -> Written:
    w = gguf.GGUFWriter(path, arch, split_max_tensors=split_max_tensors, endianess=endian)
    for key, value in kv.items():
        _add_kv(w, key, value)
    sizes: dict[str, int] = {}
    for t in tensors:
        arr, raw = _array_for(t)
        w.add_tensor(t.name, arr, raw_dtype=raw)
        sizes[t.name] = arr.nbytes
    paths = w.format_shard_names(path)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Written(
        path=paths[0],
        paths=paths,
        tensor_bytes=sizes,
        tensor_types={t.name: t.type for t in tensors},
        tensor_shapes={t.name: t.ne for t in tensors},
    )


@dataclass(frozen=True)
class Dims:
    n_layer: int = 2
    n_embd: int = 256
    n_head: int = 4
    n_head_kv: int | list[int] = 2
    head_dim: int = 64
    n_ff: int = 512
    n_vocab: int = 64
    context: int = 8192


def decoder_tensors(
    d: Dims,
    *,
    tied: bool = False,
    wtype: str = "F16",
    embd_type: str | None = None,
    out_type: str | None = None,
    ffn_type: str | None = None,
    n_expert: int = 0,
    n_ff_exp: int = 0,
    exp_type: str | None = None,
    dense_layers: int = 0,
    extra_layers: int = 0,
) -> list[T]:
    """llama.cpp-named tensors of a plain decoder, optionally MoE after `dense_layers`."""
    e = d.n_embd
    out = [
        T("token_embd.weight", (e, d.n_vocab), embd_type or wtype),
        T("output_norm.weight", (e,)),
    ]
    if not tied:
        out.append(T("output.weight", (e, d.n_vocab), out_type or wtype))
    for il in range(d.n_layer + extra_layers):
        kv = d.n_head_kv[il] if isinstance(d.n_head_kv, list) else d.n_head_kv
        p = f"blk.{il}."
        out += [
            T(p + "attn_norm.weight", (e,)),
            T(p + "attn_q.weight", (e, d.n_head * d.head_dim), wtype),
            T(p + "attn_k.weight", (e, max(kv, 1) * d.head_dim), wtype),
            T(p + "attn_v.weight", (e, max(kv, 1) * d.head_dim), wtype),
            T(p + "attn_output.weight", (d.n_head * d.head_dim, e), wtype),
            T(p + "ffn_norm.weight", (e,)),
        ]
        if n_expert and il >= dense_layers:
            xt = exp_type or wtype
            out += [
                T(p + "ffn_gate_inp.weight", (e, n_expert)),
                T(p + "ffn_gate_exps.weight", (e, n_ff_exp, n_expert), xt),
                T(p + "ffn_up_exps.weight", (e, n_ff_exp, n_expert), xt),
                T(p + "ffn_down_exps.weight", (n_ff_exp, e, n_expert), xt),
            ]
        else:
            ft = ffn_type or wtype
            out += [
                T(p + "ffn_gate.weight", (e, d.n_ff), ft),
                T(p + "ffn_up.weight", (e, d.n_ff), ft),
                T(p + "ffn_down.weight", (d.n_ff, e), ft),
            ]
    return out


def decoder_kv(arch: str, d: Dims, **extra: Any) -> dict[str, Any]:
    kv: dict[str, Any] = {
        "general.name": f"Tiny {arch}",
        f"{arch}.block_count": d.n_layer,
        f"{arch}.embedding_length": d.n_embd,
        f"{arch}.attention.head_count": d.n_head,
        f"{arch}.attention.head_count_kv": d.n_head_kv,
        f"{arch}.feed_forward_length": d.n_ff,
        f"{arch}.context_length": d.context,
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(d.n_vocab)],
    }
    if d.head_dim * d.n_head != d.n_embd:
        kv[f"{arch}.attention.key_length"] = d.head_dim
        kv[f"{arch}.attention.value_length"] = d.head_dim
    kv.update(extra)
    return kv


def deepseek2_tensors(
    n_layer: int, e: int, n_head: int, q_lora: int, kv_lora: int, rope: int, nope: int, v: int
) -> list[T]:
    out = [T("token_embd.weight", (e, 64), "Q8_0"), T("output_norm.weight", (e,))]
    out.append(T("output.weight", (e, 64), "Q6_K"))
    for il in range(n_layer):
        p = f"blk.{il}."
        out += [
            T(p + "attn_norm.weight", (e,)),
            T(p + "attn_q_a.weight", (e, q_lora), "Q8_0"),
            T(p + "attn_q_a_norm.weight", (q_lora,)),
            T(p + "attn_q_b.weight", (q_lora, n_head * (nope + rope)), "F16"),
            T(p + "attn_kv_a_mqa.weight", (e, kv_lora + rope), "F16"),
            T(p + "attn_kv_a_norm.weight", (kv_lora,)),
            T(p + "attn_k_b.weight", (nope, kv_lora, n_head), "F16"),
            T(p + "attn_v_b.weight", (kv_lora, v, n_head), "F16"),
            T(p + "attn_output.weight", (n_head * v, e), "Q8_0"),
            T(p + "ffn_norm.weight", (e,)),
        ]
        if il == 0:
            out += [
                T(p + f"ffn_{k}.weight", (e, 512) if k != "down" else (512, e), "Q4_K")
                for k in ("gate", "up", "down")
            ]
        else:
            out += [
                T(p + "ffn_gate_inp.weight", (e, 4)),
                T(p + "ffn_gate_exps.weight", (e, 256, 4), "Q2_K"),
                T(p + "ffn_up_exps.weight", (e, 256, 4), "Q3_K"),
                T(p + "ffn_down_exps.weight", (256, e, 4), "IQ4_XS"),
                T(p + "ffn_gate_shexp.weight", (e, 512), "Q5_0"),
                T(p + "ffn_up_shexp.weight", (e, 512), "Q5_1"),
                T(p + "ffn_down_shexp.weight", (512, e), "Q4_1"),
            ]
    return out


def deepseek2_kv(new_keys: bool) -> dict[str, Any]:
    a = "deepseek2"
    kv: dict[str, Any] = {
        "general.name": "Tiny DeepSeek",
        f"{a}.block_count": 2,
        f"{a}.embedding_length": 256,
        f"{a}.attention.head_count": 4,
        f"{a}.feed_forward_length": 512,
        f"{a}.context_length": 163840,
        f"{a}.vocab_size": 64,
        f"{a}.attention.q_lora_rank": 128,
        f"{a}.attention.kv_lora_rank": 64,
        f"{a}.rope.dimension_count": 32,
        f"{a}.expert_count": 4,
        f"{a}.expert_used_count": 2,
        f"{a}.expert_feed_forward_length": 256,
        f"{a}.expert_shared_count": 2,
        f"{a}.leading_dense_block_count": 1,
    }
    if new_keys:
        kv |= {
            f"{a}.attention.head_count_kv": 1,
            f"{a}.attention.key_length": 64 + 32,
            f"{a}.attention.value_length": 64,
            f"{a}.attention.key_length_mla": 96 + 32,
            f"{a}.attention.value_length_mla": 80,
        }
    else:
        kv |= {
            f"{a}.attention.head_count_kv": 4,
            f"{a}.attention.key_length": 96 + 32,
            f"{a}.attention.value_length": 80,
        }
    return kv
