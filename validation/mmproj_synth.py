"""Synthetic vision projectors (mmproj GGUFs) at small versions of real geometries.

A SigLIP-style encoder (Gemma 3's projector type `gemma3`: ViT blocks with biases,
GELU, a 4x4 average pool, RMS norm and one projection to the text model's width) written
with the `gguf` package, the tensor names and keys llama.cpp's tools/mtmd/clip.cpp
reads (clip-impl.h). Weights are random: llama.cpp sizes its buffers by shapes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

Shape = tuple[int, ...]  # ggml order: ne0 first


@dataclass(frozen=True)
class MmprojSynth:
    name: str
    n_embd: int
    n_ff: int
    n_head: int
    n_layer: int
    image_size: int
    patch_size: int
    # the text model's embedding width (mm.input_projection output)
    text_embd: int
    # 2-D matrices: f16 (as published mmproj-*-f16.gguf) or f32
    matrix_type: str = "f16"
    projector_type: str = "gemma3"
    merge: int = 4


def tensors(m: MmprojSynth) -> list[tuple[str, Shape]]:
    e, f, p = m.n_embd, m.n_ff, m.patch_size
    n_pos = (m.image_size // p) ** 2
    out: list[tuple[str, Shape]] = [
        ("v.patch_embd.weight", (p, p, 3, e)),
        ("v.patch_embd.bias", (e,)),
        ("v.position_embd.weight", (e, n_pos)),
    ]
    for i in range(m.n_layer):
        b = f"v.blk.{i}."
        for t in ("attn_q", "attn_k", "attn_v", "attn_out"):
            out += [(b + t + ".weight", (e, e)), (b + t + ".bias", (e,))]
        out += [
            (b + "ln1.weight", (e,)),
            (b + "ln1.bias", (e,)),
            (b + "ln2.weight", (e,)),
            (b + "ln2.bias", (e,)),
            (b + "ffn_up.weight", (e, f)),
            (b + "ffn_up.bias", (f,)),
            (b + "ffn_down.weight", (f, e)),
            (b + "ffn_down.bias", (e,)),
        ]
    out += [
        ("v.post_ln.weight", (e,)),
        ("v.post_ln.bias", (e,)),
        ("mm.input_projection.weight", (m.text_embd, e)),
        ("mm.soft_emb_norm.weight", (e,)),
    ]
    return out


def _is_matrix(name: str, shape: Shape) -> bool:
    # the converter keeps the patch embedding and position table in f32 (Gemma 3's
    # published mmproj-model-f16.gguf: 811.79 MiB, ggml-org/llama.cpp#22790)
    return len(shape) >= 2 and name not in ("v.position_embd.weight", "v.patch_embd.weight")


def weight_bytes(m: MmprojSynth) -> int:
    """Sum of ggml_nbytes over the tensors (what clip.cpp allocates for weights)."""
    wide = 2 if m.matrix_type == "f16" else 4
    total = 0
    for name, shape in tensors(m):
        n = int(np.prod(shape))
        total += n * (wide if _is_matrix(name, shape) else 4)
    return total


def write_mmproj(m: MmprojSynth, path: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), "clip")
    w.add_name("synthetic-mmproj")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", m.projector_type)
    w.add_bool("clip.use_gelu", True)
    w.add_uint32("clip.vision.embedding_length", m.n_embd)
    w.add_uint32("clip.vision.feed_forward_length", m.n_ff)
    w.add_uint32("clip.vision.block_count", m.n_layer)
    w.add_uint32("clip.vision.projection_dim", m.text_embd)
    w.add_uint32("clip.vision.attention.head_count", m.n_head)
    w.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)
    w.add_uint32("clip.vision.image_size", m.image_size)
    w.add_uint32("clip.vision.patch_size", m.patch_size)
    w.add_uint32("clip.vision.projector.scale_factor", m.merge)
    w.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    w.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    w.add_uint32("general.file_type", 1 if m.matrix_type == "f16" else 0)
    for name, shape in tensors(m):
        np_shape = tuple(reversed(shape))
        if name.endswith(("ln1.weight", "ln2.weight", "post_ln.weight", "norm.weight")):
            data = np.ones(np_shape, dtype=np.float32)
        else:
            data = (rng.standard_normal(np_shape, dtype=np.float32) * 0.02).astype(np.float32)
        if _is_matrix(name, shape) and m.matrix_type == "f16":
            data = data.astype(np.float16)
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
