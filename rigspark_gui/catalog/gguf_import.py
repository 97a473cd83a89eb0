"""Import a GGUF file (or a set of split GGUF parts) as a ModelSpec, from its header only.

Each part's header is read by gguf_header (one walk, every length bounded before it is
read) and its metadata turned into a Geometry by gguf_geometry; this module finds the parts
of a split model and checks they agree, refuses architectures the planner cannot size yet,
and groups the tensors into the ModelSpec.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from rigspark_gui.catalog.gguf_gemma_dsa import DSA_ARCHS, MTP_SKIP_ARCHS
from rigspark_gui.catalog.gguf_geometry import (
    Metadata,
    read_geometry,
    swa_period,
    validation_reason,
)
from rigspark_gui.catalog.gguf_header import (
    INT_TYPES,
    PartHeader,
    RawTensor,
    import_error,
    read_part,
    safe_label,
)
from rigspark_gui.catalog.gguf_hybrid import HYBRID_ARCHS
from rigspark_gui.catalog.gguf_names import SPLIT_NAME as _SPLIT_NAME
from rigspark_gui.core.model import ModelSpec, TensorGroup, TensorInfo

__all__ = ["FILE_TYPE_LABELS", "import_gguf", "swa_period"]

# llama.cpp's LLAMA_FTYPE enum (include/llama.h); gaps are removed or deprecated types.
FILE_TYPE_LABELS: dict[int, str] = {
    0: "F32",  # llama.cpp names it LLAMA_FTYPE_ALL_F32
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
}

# Architectures whose memory is (partly) recurrent state, or that have no decoder KV
# cache at all: their geometry does not map onto KV-per-layer sizing yet.
_UNSUPPORTED_ARCHS = frozenset(
    {
        "mamba",
        "mamba2",
        "rwkv6",
        "rwkv6qwen2",
        "rwkv7",
        "arwkv7",
        "jamba",
        "falcon-h1",
        "plamo2",
        "t5",
        "t5encoder",
        "bert",
        "nomic-bert",
        "nomic-bert-moe",
        "jina-bert-v2",
        "neo-bert",
        "modern-bert",
    }
)
_RECURRENT_TENSOR_MARKERS = (".ssm_", ".time_mix_", ".channel_mix_", ".shortconv")

_BLOCK_NAME = re.compile(r"^blk\.(\d+)\.")
_INPUT_PREFIXES = ("token_embd", "position_embd", "token_types", "per_layer_token_embd")
# created with layer index 0 (Gemma's per-layer projection): placed with layer 0
_LAYER0_PREFIXES = ("per_layer_model_proj", "per_layer_proj_norm")


# --------------------------------------------------------------------------- assembly


def _split_parts(path: Path) -> tuple[list[Path], str]:
    """All parts of a split model named like llama.cpp's gguf-split does, and the base name."""
    match = _SPLIT_NAME.match(path.name)
    if match is None:
        return [path], path.stem
    no, count = int(match["no"]), int(match["count"])
    if not 1 <= no <= count:
        raise import_error(path.name, f"split part number {no} is outside 1..{count}")
    prefix = match["prefix"]
    parts = [path.with_name(f"{prefix}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)]
    missing = [p.name for p in parts if not p.is_file()]
    if missing:
        more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        shown = ", ".join(missing[:8]) + more
        raise import_error(
            path.name, f"split model is missing {len(missing)} of {count} parts: {shown}"
        )
    return parts, prefix


def _split_value(part: PartHeader, key: str) -> int | None:
    val = part.meta.get(key)
    if val is None:
        return None
    if val.vtype not in INT_TYPES:
        raise import_error(part.path.name, f"metadata {key} must be an integer")
    return int(val.value)


def _check_split(parts: list[PartHeader]) -> None:
    count = len(parts)
    for i, part in enumerate(parts):
        declared = _split_value(part, "split.count")
        no = _split_value(part, "split.no")
        if count == 1:
            if declared is not None and declared > 1:
                raise import_error(
                    part.path.name,
                    f"this is one part of a {declared}-part split model, "
                    "but its name does not follow NAME-00001-of-0000N.gguf",
                )
            continue
        if declared is not None and declared != count:
            raise import_error(
                part.path.name, f"says the model has {declared} parts, its name says {count}"
            )
        if no is not None and no != i:
            raise import_error(part.path.name, f"says it is part {no + 1}, its name says {i + 1}")
    total = _split_value(parts[0], "split.tensors.count")
    found = sum(len(p.tensors) for p in parts)
    if count > 1 and total is not None and total != found:
        raise import_error(
            parts[0].path.name, f"the split model declares {total} tensors, its parts hold {found}"
        )


def _past_trunk(name: str, n_layer: int) -> bool:
    match = _BLOCK_NAME.match(name)
    return match is not None and int(match[1]) >= n_layer


def _group(name: str, n_layer: int) -> tuple[TensorGroup, int | None]:
    if name.startswith(_INPUT_PREFIXES):
        return TensorGroup.INPUT, None
    if name.startswith(_LAYER0_PREFIXES):
        return TensorGroup.BLOCK, 0
    match = _BLOCK_NAME.match(name)
    if match is not None:
        layer = int(match[1])
        if layer < n_layer:
            return TensorGroup.BLOCK, layer
    # output head, output norm, rope tables, and blocks past block_count
    return TensorGroup.OUTPUT, None


def _file_quant(m: Metadata, tensors: Iterable[RawTensor]) -> str | None:
    val = m.values.get("general.file_type")
    if val is not None and val.vtype in INT_TYPES:
        label = FILE_TYPE_LABELS.get(int(val.value))
        if label is not None:
            return label
    weight: Counter[str] = Counter()
    for t in tensors:
        weight[t.type_name] += t.n_bytes
    return weight.most_common(1)[0][0] if weight else None


def import_gguf(path: str | os.PathLike[str]) -> ModelSpec:
    """Read a GGUF header (any part of a split model) into a ModelSpec with exact tensors."""
    given = Path(path)
    parts_paths, base = _split_parts(given)
    parts = [read_part(p) for p in parts_paths]
    _check_split(parts)
    first = parts[0]
    fname = first.path.name if len(parts) == 1 else f"{base} ({len(parts)} parts)"
    m = Metadata(first.meta, fname)

    arch = m.text("general.architecture")
    if not arch:
        m.fail("missing metadata general.architecture")
    if len(arch) > 64 or not arch.isprintable():
        m.fail(f"general.architecture {safe_label(arch)} is not an architecture name")
    merged: dict[str, RawTensor] = {}
    for part in parts:
        for t in part.tensors:
            if t.name in merged:
                raise import_error(fname, f"tensor {safe_label(t.name)} appears in two parts")
            merged[t.name] = t
    if not merged:
        m.fail("the file holds no tensors")
    if arch in _UNSUPPORTED_ARCHS or (
        arch not in HYBRID_ARCHS
        and any(marker in name for name in merged for marker in _RECURRENT_TENSOR_MARKERS)
    ):
        m.fail(f"not supported yet: {arch} (recurrent, hybrid or encoder architecture)")

    geometry = read_geometry(m, arch, merged)
    # MTP blocks: skipped by the loader unless drafting with them
    if arch in HYBRID_ARCHS:
        trunk = geometry.n_layer - geometry.n_layer_nextn
        merged = {k: t for k, t in merged.items() if not _past_trunk(k, trunk)}
    elif arch in MTP_SKIP_ARCHS:  # the DSA loaders read the MTP block's router bias
        trunk = geometry.n_layer - geometry.n_layer_nextn
        read = (".exp_probs_b.bias",) if arch in DSA_ARCHS else ()
        merged = {k: t for k, t in merged.items() if not _past_trunk(k, trunk) or k.endswith(read)}
    infos: list[TensorInfo] = []
    for t in merged.values():
        group, layer = _group(t.name, geometry.n_layer)
        if t.name == "token_embd_norm.weight" and arch in HYBRID_ARCHS:
            group = TensorGroup.OUTPUT  # LFM2's final norm (LLM_TENSOR_OUTPUT_NORM_LFM2)
        infos.append(
            TensorInfo(
                name=t.name,
                type=t.type_name,
                shape=t.ne,
                group=group,
                layer=layer,
                expert="_exps" in t.name,
                n_bytes=t.n_bytes,
            )
        )
    name = (m.text("general.name") or "").strip() or base
    try:
        return ModelSpec(
            id=("file:" + base)[:200],
            name=name[:300],
            family=(m.text("general.basename") or "").strip()[:100],
            geometry=geometry,
            tensors=tuple(infos),
            file_quant=_file_quant(m, merged.values()),
            source=str(first.path),
            imported=True,
        )
    except ValueError as exc:
        m.fail(f"unusable model ({validation_reason(exc)})")
