"""What llama.cpp's CPU backend copies into its CPU_REPACK buffer: the weights of the
units that run on the CPU, in the types its GEMM kernels repack into interleaved rows,
beside the memory-mapped file.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.memory.tensors import TensorRow, gguf_padded, synth_rows
from rigspark_gui.core.model import Geometry, ModelSpec, TensorGroup, TensorInfo

# llama.cpp's CPU backend repacks some weight types into interleaved rows for its
# GEMM kernels (ggml/src/ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type): the
# tensor moves from the memory-mapped file into an extra CPU_REPACK buffer of the same
# size. Only matrices a MUL_MAT (2-D) or MUL_MAT_ID (3-D experts) reads qualify, and only
# with ne[1] % 8 == 0. x86: Q4_0, Q4_K, IQ4_NL, MXFP4 with AVX2; Q2_K with AVX-512 too.
# Arm NEON with dotprod / i8mm: Q4_0, Q4_K, Q5_K, Q6_K, IQ4_NL, MXFP4, Q8_0.
REPACK_TYPES: dict[str, frozenset[str]] = {
    "avx2": frozenset({"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"}),
    "avx512": frozenset({"Q2_K"}),
    "neon_dotprod": frozenset({"Q4_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "MXFP4", "Q8_0"}),
}
# Tensors read by ops other than MUL_MAT/MUL_MAT_ID (llm_tensor_info_for): never repacked.
_NOT_MATMUL = ("token_embd.", "_norm.", ".bias", "ffn_gate_inp.", "attn_sinks", "rope_")


class RepackBytes(NamedTuple):
    """CPU_REPACK bytes per placeable unit, for the units that run on the CPU."""

    block_bytes: tuple[int, ...]
    block_expert_bytes: tuple[int, ...]  # routed-expert share of each
    output_bytes: int
    unmapped_bytes: int  # file bytes outside the CPU_Mapped range when all is on the CPU

    @property
    def total(self) -> int:
        return sum(self.block_bytes) + self.output_bytes


def _repacked(t: TensorInfo | TensorRow, types: frozenset[str]) -> bool:
    # 2-D weights of MUL_MAT; 3-D only as MUL_MAT_ID experts (MLA's 3-D attn_k_b/attn_v_b
    # are MUL_MAT operands, which the repack buffer refuses for n_dims != 2)
    dims_ok = len(t.shape) == 2 or (len(t.shape) == 3 and t.expert)
    if t.type not in types or not dims_ok or t.shape[1] % 8:
        return False
    return not any(k in t.name for k in _NOT_MATMUL)


def repack_types(cpu_features: tuple[str, ...] | list[str]) -> frozenset[str]:
    """The weight types the CPU backend repacks on a CPU with these features."""
    types: frozenset[str] = frozenset()
    feats = set(cpu_features)
    if "avx512" in feats:
        feats.add("avx2")
    for f in feats:
        types |= REPACK_TYPES.get(f, frozenset())
    return types


def is_repacked(t: TensorInfo | TensorRow, types: frozenset[str]) -> bool:
    """Whether the CPU backend moves tensor `t` into CPU_REPACK (types: repack_types)."""
    return _repacked(t, types) and t.group is not TensorGroup.INPUT


def _unmapped_bytes(tensors: Sequence[TensorInfo | TensorRow], repacked: list[bool]) -> int:
    """File bytes outside the mapped range: llama.cpp maps only from the first to the end
    of the last tensor its CPU buffer holds (llama_model_loader::get_mapping_range), so
    repacked tensors at the head or tail of the file, and the last mapped tensor's
    alignment padding, are not in it. Tensors lie in file order, each padded to 32."""
    kept = [i for i, r in enumerate(repacked) if not r]
    if not kept:
        return sum(gguf_padded(t.n_bytes) for t in tensors)
    first, last = kept[0], kept[-1]
    head = sum(gguf_padded(t.n_bytes) for t in tensors[:first])
    tail = sum(gguf_padded(t.n_bytes) for t in tensors[last + 1 :])
    return head + tail + gguf_padded(tensors[last].n_bytes) - tensors[last].n_bytes


def cpu_repack_bytes(
    spec: ModelSpec, quant: str, cpu_features: tuple[str, ...] | list[str]
) -> RepackBytes | None:
    """What llama.cpp's CPU backend copies into CPU_REPACK for a CPU with these features
    (keys of REPACK_TYPES; avx512 implies avx2). None when nothing is repacked.

    Tied embeddings: the head is the token table loaded a second time, as a MUL_MAT
    weight, so a repackable table type is repacked (the GET_ROWS copy stays mapped)."""
    types = repack_types(cpu_features)
    if not types:
        return None
    g = spec.geometry
    tensors: Sequence[TensorInfo | TensorRow] = (
        spec.tensors if spec.tensors is not None else synth_rows(g, quant)
    )
    blocks = [0] * g.n_layer
    experts = [0] * g.n_layer
    output = 0
    repacked = [_repacked(t, types) and t.group is not TensorGroup.INPUT for t in tensors]
    for t in tensors:
        if t.group is TensorGroup.BLOCK and t.layer is not None:
            if _repacked(t, types):
                blocks[t.layer] += gguf_padded(t.n_bytes)
                if t.expert:
                    experts[t.layer] += gguf_padded(t.n_bytes)
        elif t.group is TensorGroup.OUTPUT and _repacked(t, types):
            output += gguf_padded(t.n_bytes)
        elif t.name == "token_embd.weight" and g.tied_embeddings and t.type in types:
            output += gguf_padded(t.n_bytes) if t.shape[1] % 8 == 0 else 0
    if not any(blocks) and not output:
        return None
    return RepackBytes(
        block_bytes=tuple(blocks),
        block_expert_bytes=tuple(experts),
        output_bytes=output,
        unmapped_bytes=_unmapped_bytes(tensors, repacked),
    )


@lru_cache(maxsize=8192)
def _synth_repack(g: Geometry, quant: str, features: tuple[str, ...]) -> RepackBytes | None:
    return cpu_repack_bytes(
        ModelSpec(id="_", name="_", geometry=g, quants=(quant,)), quant, features
    )


def repack_for(spec: ModelSpec, quant: str, features: tuple[str, ...]) -> RepackBytes | None:
    """cpu_repack_bytes, cached for catalog models (their tensors are synthesized)."""
    if not features:
        return None
    if spec.tensors is None:
        return _synth_repack(spec.geometry, quant, tuple(sorted(features)))
    return cpu_repack_bytes(spec, quant, features)
