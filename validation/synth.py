"""Synthetic GGUF models at small versions of real geometries.

Weights are random and small (std 0.02, norms 1.0): the files exist to be loaded by
llama.cpp, whose buffer sizes depend only on shapes and types, and to be timed. The
tokenizer is a minimal SentencePiece ("llama") vocabulary: <unk>, <s>, </s>, the 256
byte tokens llama.cpp looks up for the newline, then filler pieces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from rigspark_gui.calibrate.synth import add_sentencepiece_vocab

Shape = tuple[int, ...]  # ggml order: ne0 first


@dataclass(frozen=True)
class Synth:
    """One synthetic model: name, llama.cpp architecture and its hparams."""

    name: str
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    head_dim: int = 64
    tied: bool = False
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_expert: int = 0
    n_shared_expert: int = 0
    n_dense_lead: int = 0
    sliding_window: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    head_dim_v_mla: int = 0
    context_length: int = 32768
    role: str = field(default="memory", compare=False)  # memory | speed


MODELS: tuple[Synth, ...] = (
    # Llama-3 8B shape ratios: GQA 4:1, head_dim 64 here (128 in the real one).
    Synth("llama3-gqa", "llama", 6, 512, 8, 2, 1536, 4096),
    # Qwen2-0.5B style: tied embeddings, q/k/v biases, GQA 7:1 (here 8:2).
    Synth("qwen2-tied", "qwen2", 6, 512, 8, 2, 1536, 5000, tied=True),
    # Gemma-2: every other layer slides (pattern 2), window shrunk to 256 cells.
    Synth("gemma2-swa", "gemma2", 6, 512, 8, 4, 1536, 4096, tied=True, sliding_window=256),
    # OLMoE-1B-7B: 64 experts, 8 used, no GQA; here 8 experts, 2 used.
    Synth(
        "olmoe-moe", "olmoe", 4, 512, 8, 8, 0, 4096, n_expert=8, n_expert_used=2, n_ff_expert=512
    ),
    # Phi-3-mini: fused qkv, fused gate+up (ffn_up is 2 x n_ff wide), no GQA.
    Synth("phi3-fused", "phi3", 6, 512, 8, 8, 1536, 4096),
    # DeepSeek-V2-Lite: MLA (latent 512 + rope 64; here 256 + 32), one dense lead layer,
    # shared expert, routed experts.
    Synth(
        "deepseek2-mla",
        "deepseek2",
        4,
        512,
        8,
        1,
        1536,
        4096,
        n_expert=8,
        n_expert_used=2,
        n_ff_expert=512,
        n_shared_expert=1,
        n_dense_lead=1,
        q_lora_rank=256,
        kv_lora_rank=256,
        rope_dim=32,
        head_dim=96,
        head_dim_v_mla=64,
    ),
    # Larger than the last-level cache, so that decode is memory-bound: the speed check.
    Synth("llama-speed", "llama", 8, 2048, 16, 4, 5632, 4096, head_dim=128, role="speed"),
)


def _tensors(m: Synth) -> list[tuple[str, Shape]]:
    e, hd = m.n_embd, m.head_dim
    q, kv = m.n_head * hd, m.n_head_kv * hd
    out: list[tuple[str, Shape]] = [("token_embd.weight", (e, m.n_vocab))]
    for i in range(m.n_layer):
        p = f"blk.{i}."
        out.append((p + "attn_norm.weight", (e,)))
        if m.arch == "deepseek2":
            nope = hd - m.rope_dim
            out += [
                (p + "attn_q_a.weight", (e, m.q_lora_rank)),
                (p + "attn_q_a_norm.weight", (m.q_lora_rank,)),
                (p + "attn_q_b.weight", (m.q_lora_rank, m.n_head * hd)),
                (p + "attn_kv_a_mqa.weight", (e, m.kv_lora_rank + m.rope_dim)),
                (p + "attn_kv_a_norm.weight", (m.kv_lora_rank,)),
                (p + "attn_k_b.weight", (nope, m.kv_lora_rank, m.n_head)),
                (p + "attn_v_b.weight", (m.kv_lora_rank, m.head_dim_v_mla, m.n_head)),
                (p + "attn_output.weight", (m.n_head * m.head_dim_v_mla, e)),
            ]
        else:
            if m.arch == "phi3":
                out.append((p + "attn_qkv.weight", (e, q + 2 * kv)))
            else:
                out += [
                    (p + "attn_q.weight", (e, q)),
                    (p + "attn_k.weight", (e, kv)),
                    (p + "attn_v.weight", (e, kv)),
                ]
            if m.arch == "qwen2":
                out += [
                    (p + "attn_q.bias", (q,)),
                    (p + "attn_k.bias", (kv,)),
                    (p + "attn_v.bias", (kv,)),
                ]
            if m.arch == "olmoe":
                out += [(p + "attn_q_norm.weight", (e,)), (p + "attn_k_norm.weight", (e,))]
            out.append((p + "attn_output.weight", (q, e)))
        if m.arch == "gemma2":
            out.append((p + "post_attention_norm.weight", (e,)))
        out.append((p + "ffn_norm.weight", (e,)))
        if m.n_expert and i >= m.n_dense_lead:
            f, n = m.n_ff_expert, m.n_expert
            out += [
                (p + "ffn_gate_inp.weight", (e, n)),
                (p + "ffn_gate_exps.weight", (e, f, n)),
                (p + "ffn_up_exps.weight", (e, f, n)),
                (p + "ffn_down_exps.weight", (f, e, n)),
            ]
            if m.n_shared_expert:
                fs = f * m.n_shared_expert
                out += [
                    (p + "ffn_gate_shexp.weight", (e, fs)),
                    (p + "ffn_up_shexp.weight", (e, fs)),
                    (p + "ffn_down_shexp.weight", (fs, e)),
                ]
        elif m.arch == "phi3":
            out += [(p + "ffn_up.weight", (e, 2 * m.n_ff)), (p + "ffn_down.weight", (m.n_ff, e))]
        else:
            out += [
                (p + "ffn_gate.weight", (e, m.n_ff)),
                (p + "ffn_up.weight", (e, m.n_ff)),
                (p + "ffn_down.weight", (m.n_ff, e)),
            ]
        if m.arch == "gemma2":
            out.append((p + "post_ffw_norm.weight", (e,)))
    out.append(("output_norm.weight", (e,)))
    if not m.tied:
        out.append(("output.weight", (e, m.n_vocab)))
    return out


def _metadata(w: GGUFWriter, m: Synth) -> None:
    # A neutral name: llama.cpp keys tokenizer quirks on it ("phi3" wants <|endoftext|>).
    w.add_name("synthetic")
    w.add_context_length(m.context_length)
    w.add_embedding_length(m.n_embd)
    w.add_block_count(m.n_layer)
    w.add_head_count(m.n_head)
    w.add_head_count_kv(m.n_head_kv)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(0)  # ALL_F32
    if m.n_ff:
        w.add_feed_forward_length(m.n_ff)
    elif m.arch == "olmoe":
        w.add_feed_forward_length(m.n_ff_expert)  # OLMoE's expert width is n_ff
    if m.arch != "deepseek2" and (m.arch == "gemma2" or m.head_dim * m.n_head != m.n_embd):
        w.add_key_length(m.head_dim)
        w.add_value_length(m.head_dim)
    if m.arch == "phi3":
        w.add_rope_dimension_count(m.head_dim)
    if m.arch == "gemma2":
        w.add_sliding_window(m.sliding_window)
        w.add_attn_logit_softcapping(50.0)
        w.add_final_logit_softcapping(30.0)
    if m.n_expert:
        w.add_expert_count(m.n_expert)
        w.add_expert_used_count(m.n_expert_used)
        w.add_expert_feed_forward_length(m.n_ff_expert)
    if m.arch == "deepseek2":
        w.add_leading_dense_block_count(m.n_dense_lead)
        w.add_expert_shared_count(m.n_shared_expert)
        w.add_expert_weights_scale(1.0)
        w.add_q_lora_rank(m.q_lora_rank)
        w.add_kv_lora_rank(m.kv_lora_rank)
        w.add_rope_dimension_count(m.rope_dim)
        # The current converter's MLA layout: one latent "head" of kv_lora_rank + rope.
        w.add_key_length(m.kv_lora_rank + m.rope_dim)
        w.add_value_length(m.kv_lora_rank)
        w.add_key_length_mla(m.head_dim)
        w.add_value_length_mla(m.head_dim_v_mla)
    add_sentencepiece_vocab(w, m.n_vocab)


def write_gguf(m: Synth, path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), m.arch)
    _metadata(w, m)
    for name, shape in _tensors(m):
        np_shape = tuple(reversed(shape))
        if len(shape) == 1 and name.endswith("norm.weight"):
            data = np.ones(np_shape, dtype=np.float32)
        else:
            data = (rng.standard_normal(np_shape, dtype=np.float32) * 0.02).astype(np.float32)
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
