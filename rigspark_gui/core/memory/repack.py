"""What llama.cpp's CPU backend copies into its CPU_REPACK buffer: the weights of the
units that run on the CPU, in the types its GEMM kernels repack into interleaved rows,
beside the memory-mapped file; and how loading without mmap (or without repacking)
changes what stays resident.

Measured with llama-server b11434 (validation/rss_b11434.json, docs/validation.md): with
the file mapped, the pages of every repacked tensor are read to build the copy and stay
resident beside it (RssFile), so the weights count twice; read into memory
(`--load-mode none`, `--no-mmap` before b11434) only the copy and the other tensors are
held; with `--no-repack` only the mapped file, and the CPU runs slower kernels. Each
engine is planned with the loading it picks by itself (engine_reads_in; koboldcpp reads
the file in, Ollama depends on the placement, LM Studio maps it) unless the plan pins
one; docs/engines.md gives each rule's source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from rigspark_gui.core.memory.tensors import TensorRow, gguf_padded, synth_rows
from rigspark_gui.core.model import Geometry, ModelSpec, TensorGroup, TensorInfo
from rigspark_gui.core.rig import Gpu, Vendor
from rigspark_gui.core.settings import Backend, PlanSettings

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
# DeepSeek V4: the compressors' positional tables (_ape) are GET_ROWS operands, and
# attn_output_a, 2-D in the file, is loaded reshaped to 3-D (TENSOR_ALLOW_RESHAPE)
_NOT_MATMUL: tuple[str, ...] = (
    *("token_embd.", "_norm.", ".bias", "ffn_gate_inp.", "attn_sinks", "rope_"),
    *("_ape.", "attn_output_a."),
)


class RepackBytes(NamedTuple):
    """CPU_REPACK bytes per placeable unit, for the units that run on the CPU."""

    block_bytes: tuple[int, ...]
    block_expert_bytes: tuple[int, ...]  # routed-expert share of each
    output_bytes: int
    unmapped_bytes: int  # file bytes outside the CPU_Mapped range when all is on the CPU

    @property
    def total(self) -> int:
        return sum(self.block_bytes) + self.output_bytes

    def read_in(self, tied: bool) -> RepackBytes:
        """The extra bytes when the file is read into memory instead of mapped: the
        repacked tensors are held once (in CPU_REPACK, not also in the CPU buffer), so
        nothing is extra but a tied head's second copy of the token table; every tensor
        is in a buffer, so no file range is left out either."""
        zeros = (0,) * len(self.block_bytes)
        return RepackBytes(zeros, zeros, self.output_bytes if tied else 0, 0)


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


# the engines whose launch commands carry both of llama.cpp's loading flags (llama-server)
LOAD_FLAG_BACKENDS = (Backend.LLAMA_CPP,)
# the engines whose launch can turn repacking off; the others always repack
REPACK_FLAG_BACKENDS = (Backend.LLAMA_CPP,)
# the engines whose launch can say both ways whether the file is mapped or read in: a
# flag (llama-server `--load-mode none`, koboldcpp `--usemmap`), Ollama's `use_mmap`
# parameter, LM Studio's "Try mmap()" load setting (a note: `lms load` has no flag)
MMAP_CHOICE_BACKENDS = (Backend.LLAMA_CPP, Backend.KOBOLDCPP, Backend.OLLAMA, Backend.LM_STUDIO)
# llama.cpp b11434's flags (common/arg.cpp); `--load-mode none` was `--no-mmap` before
NO_MMAP_FLAG = "--load-mode none"
NO_REPACK_FLAG = "--no-repack"
# koboldcpp >= 1.77 reads the file in unless told to map it (koboldcpp.py 1.102, commit
# 000115dd: `inputs.use_mmap = args.usemmap`; 1.76 had `--nommap`, mapping by default)
KOBOLD_MMAP_FLAG = "--usemmap"
# how each engine but llama-server loads the file by itself, and how its launch pins it
ENGINE_LOADING: dict[Backend, str] = {
    Backend.KOBOLDCPP: f"reads the weights in (it maps the file only with {KOBOLD_MMAP_FLAG})",
    Backend.OLLAMA: (
        "reads the weights in when no layer goes to a GPU or a Metal GPU takes only part of "
        "them, else maps the file (its use_mmap parameter pins either)"
    ),
    Backend.LM_STUDIO: 'maps the file ("Try mmap()" on; turned off in its load settings)',
}


def engine_reads_in(
    backend: Backend, repacks: bool, gpus: Sequence[Gpu] | None = None, *, repack: bool = True
) -> bool:
    """Whether an engine left to its own loading reads the weights in rather than
    mapping them. `gpus`: the GPUs its layers go to on this path (empty: the CPU alone;
    None: not said, taken as a GPU path on no Apple GPU).

    llama.cpp: RigSpark's own choice, read in where the CPU backend repacks weights.
    koboldcpp: always (no `--usemmap`). Ollama >= 0.30 (server/sched.go
    disableMmapDefaultReason, commit fb307609): read in when no layer goes to a GPU
    (`num_gpu` 0 or none) or a Metal GPU takes only part of them, mapped otherwise (also
    read in with CUDA on Windows, which a rig does not say: planned mapped, the larger
    figure). LM Studio: mapped ("Try mmap()" on, lms-kv-config schema `tryMmap`)."""
    if backend is Backend.LLAMA_CPP:
        return repacks and repack
    if backend is Backend.KOBOLDCPP:
        return True
    if backend is Backend.OLLAMA:
        if gpus is None:
            return False
        return not gpus or any(g.vendor is Vendor.APPLE for g in gpus)
    return False


def reads_in(s: PlanSettings, repacks: bool, gpus: Sequence[Gpu] | None = None) -> bool:
    """Whether the plan loads the weights without mmap: when told to, on an engine whose
    launch can say so, else as the engine loads by itself (engine_reads_in)."""
    if s.mmap is not None and s.backend in MMAP_CHOICE_BACKENDS:
        return not s.mmap
    return engine_reads_in(s.backend, repacks, gpus, repack=s.repack)


def repack_for(
    spec: ModelSpec,
    quant: str,
    features: tuple[str, ...],
    s: PlanSettings | None = None,
    gpus: Sequence[Gpu] | None = None,
) -> RepackBytes | None:
    """cpu_repack_bytes, cached for catalog models (their tensors are synthesized); with
    `s`, what its loading settings leave resident beside the file's own bytes (nothing
    with --no-repack; only a tied head's copy when read in without mmap), on an engine
    that loads its own way as that engine does (`gpus`: the path's, see reads_in)."""
    if not features or (s is not None and not s.repack and s.backend in REPACK_FLAG_BACKENDS):
        return None
    if spec.tensors is None:
        r = _synth_repack(spec.geometry, quant, tuple(sorted(features)))
    else:
        r = cpu_repack_bytes(spec, quant, features)
    if r is None or s is None or not reads_in(s, True, gpus):
        return r
    return r.read_in(spec.geometry.tied_embeddings)


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuLoading:
    """How a path loads the weights its CPU holds when the CPU backend repacks some of
    them: the flag its launch carries, and its memory both ways."""

    # the launch flag ("" : llama.cpp's default, the file mapped)
    flag: str
    # weights the CPU backend copies into CPU_REPACK on this path
    repacked_bytes: int
    # the path's required memory as planned, and with llama.cpp's defaults (the file
    # mapped and repacked: the repacked tensors' pages stay resident beside the copy)
    required_bytes: int
    mapped_required_bytes: int
    # one sentence
    note: str


def loading_note(flag: str, repacked_bytes: int, required: int, mapped: int) -> str:
    """What the loading flag does to this path, in one sentence."""
    gib = 1 << 30
    copy = f"llama.cpp repacks {repacked_bytes / gib:.1f} GiB of weights for the CPU"
    both = f"{mapped / gib:.1f} GiB with the file mapped"
    if flag == NO_MMAP_FLAG:
        return (
            f"{copy}: loaded without mmap ({flag}) it holds them once, "
            f"{required / gib:.1f} GiB instead of {both}, at the same speed"
        )
    if flag == NO_REPACK_FLAG:
        return (
            f"{copy} unless told not to: with {flag} it needs {required / gib:.1f} GiB "
            f"instead of {both}, with slower CPU kernels"
        )
    return f"{copy} and keeps the mapped pages beside the copy: {both}"
