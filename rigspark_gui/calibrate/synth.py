"""The small model a calibration run times: a Llama-style decoder with random weights,
written in F16 with the `gguf` package, larger than any CPU's last-level cache (so decode
streams from RAM as a real model's does) and small enough to quantize in seconds."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
from gguf import GGUFWriter

CONTEXT = 4096


class Shape(NamedTuple):
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    head_dim: int


# Llama-3 ratios (GQA 4:1, FFN 2.75x): 0.38 B parameters, 0.75 GB in F16, 0.2 GB in Q4_0
DEFAULT_SHAPE = Shape(8, 2048, 16, 4, 5632, 4096, 128)


def _tensors(m: Shape) -> list[tuple[str, tuple[int, ...]]]:
    e, q, kv = m.n_embd, m.n_head * m.head_dim, m.n_head_kv * m.head_dim
    N_FF, N_VOCAB = m.n_ff, m.n_vocab
    out = [("token_embd.weight", (e, N_VOCAB))]
    for i in range(m.n_layer):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", (e,)),
            (p + "attn_q.weight", (e, q)),
            (p + "attn_k.weight", (e, kv)),
            (p + "attn_v.weight", (e, kv)),
            (p + "attn_output.weight", (q, e)),
            (p + "ffn_norm.weight", (e,)),
            (p + "ffn_gate.weight", (e, N_FF)),
            (p + "ffn_up.weight", (e, N_FF)),
            (p + "ffn_down.weight", (N_FF, e)),
        ]
    out += [("output_norm.weight", (e,)), ("output.weight", (e, N_VOCAB))]
    return out


def write_model(path: Path, shape: Shape | None = None, seed: int = 0) -> Path:
    """Write the F16 model to `path` (about 0.75 GB at the default shape)."""
    m = shape or DEFAULT_SHAPE
    N_VOCAB = m.n_vocab
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), "llama")
    w.add_name("rigspark-calibration")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(m.n_embd)
    w.add_block_count(m.n_layer)
    w.add_feed_forward_length(m.n_ff)
    w.add_head_count(m.n_head)
    w.add_head_count_kv(m.n_head_kv)
    w.add_rope_dimension_count(m.head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(1)  # mostly F16
    add_sentencepiece_vocab(w, N_VOCAB)
    # Speed does not depend on the values: one block of random numbers, repeated, fills
    # every matrix (drawing 0.4 billion of them would take longer than the whole timing).
    pool = (rng.standard_normal(1 << 20, dtype=np.float32) * 0.02).astype(np.float16)
    for name, dims in _tensors(m):
        np_shape = tuple(reversed(dims))
        # norms stay F32
        data = np.ones(np_shape, dtype=np.float32) if len(dims) == 1 else np.resize(pool, np_shape)
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def add_sentencepiece_vocab(w: GGUFWriter, n_vocab: int) -> None:
    """A minimal SentencePiece vocabulary of `n_vocab` tokens: <unk>, <s>, </s>, the 256
    byte tokens llama.cpp looks up, then filler pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581t{i}" for i in range(n_vocab - len(tokens))]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 3 + [-1000.0] * 256 + [-float(i) for i in range(n_vocab - 259)])
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (n_vocab - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
