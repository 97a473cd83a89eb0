"""A multimodal projector (mmproj GGUF) read like a model header: the same bounded
reader (`gguf_header.read_part`), local or over HTTP ranges (`remote.fetch_header`),
turned into the engine's `Projector` with the keys tools/mtmd/clip.cpp reads
(clip-impl.h: `clip.projector_type`, `clip.vision.*`, `clip.audio.*`)."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from rigspark_gui.catalog.gguf_header import MetaValue, PartHeader, import_error, read_part
from rigspark_gui.core.memory import max_image_size, warmup_image_size
from rigspark_gui.core.model import Projector

# where clip_n_mmproj_embd (clip.cpp) reads the width the projector feeds the text
# model: (tensor, dimension) per projector type
_OUTPUT_WIDTH: dict[str, tuple[str, int]] = {
    **dict.fromkeys(
        (
            "mlp", "phi4", "pixtral", "lightonocr", "dots_ocr", "dots3note_v", "muse-glimmer",
            "ultravox", "voxtral", "musicflamingo", "qwen3a", "glma", "lfm2", "kimivl",
            "paddleocr", "kimik25", "yasa2", "deepseek4v",
        ),
        ("mm.2.weight", 1),
    ),
    **dict.fromkeys(
        ("qwen2vl_merger", "qwen2.5vl_merger", "exaone4_5", "janus_pro", "youtuvl", "ling3vl"),
        ("mm.1.bias", 0),
    ),
    "gemma3": ("mm.input_projection.weight", 0),
    "gemma3nv": ("mm.input_projection.weight", 0),
    **dict.fromkeys(
        ("gemma4v", "gemma4uv", "gemma4a", "gemma4ua"), ("mm.input_projection.weight", 1)
    ),
    **dict.fromkeys(("idefics3", "qwen2a"), ("mm.model.fc.weight", 1)),
    **dict.fromkeys(("internvl", "nemotron_v2_vl", "meralion"), ("mm.3.weight", 1)),
}  # fmt: skip
# sanity bounds on what a header may claim
_LIMITS = {"n_embd": 1 << 16, "n_ff": 1 << 20, "n_head": 1024, "n_layer": 1024}
_MAX_IMAGE = 1 << 16
_MAX_PATCH = 1024


def _value(meta: dict[str, MetaValue], key: str) -> object:
    v = meta.get(key)
    return None if v is None else v.value


def _int(part: PartHeader, key: str, *, required: bool = True, limit: int = 1 << 20) -> int:
    raw = _value(part.meta, key)
    fname = part.path.name
    if raw is None:
        if required:
            raise import_error(fname, f"not a projector: the key {key} is missing")
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= limit:
        raise import_error(fname, f"{key} = {str(raw)[:40]!r} is out of range")
    return raw


def _text(part: PartHeader, key: str) -> str:
    raw = _value(part.meta, key)
    return raw if isinstance(raw, str) else ""


def projector_of(part: PartHeader, source: str = "", path: str = "") -> Projector:
    """The projector a header describes; ModelImportError (one line) when the file is
    not an mmproj GGUF or claims sizes out of range. `path`: the file or URL it was
    chosen as, which the launch command names."""
    fname = part.path.name
    if _text(part, "general.architecture") != "clip":
        raise import_error(fname, "not a projector (mmproj) GGUF: its architecture is not clip")
    vision = bool(_value(part.meta, "clip.has_vision_encoder"))
    audio = bool(_value(part.meta, "clip.has_audio_encoder"))
    if not (vision or audio):
        raise import_error(fname, "not a projector: it has neither a vision nor an audio encoder")
    prefix = "clip.vision" if vision else "clip.audio"
    kind = _text(part, "clip.projector_type") or _text(part, f"{prefix}.projector_type")
    if not kind:
        raise import_error(fname, "not a projector: clip.projector_type is missing")
    dims = {
        name: _int(part, f"{prefix}.{key}", limit=limit)
        for name, key, limit in (
            ("n_embd", "embedding_length", _LIMITS["n_embd"]),
            ("n_ff", "feed_forward_length", _LIMITS["n_ff"]),
            ("n_head", "attention.head_count", _LIMITS["n_head"]),
            ("n_layer", "block_count", _LIMITS["n_layer"]),
        )
    }
    image = _int(part, "clip.vision.image_size", required=vision, limit=_MAX_IMAGE)
    patch = _int(part, "clip.vision.patch_size", required=vision, limit=_MAX_PATCH)
    merge = _int(part, "clip.vision.projector.scale_factor", required=False, limit=64)
    merge = merge or _int(part, "clip.vision.spatial_merge_size", required=False, limit=64)
    if not merge:
        merge = 4 if kind == "gemma3" else 1  # clip.cpp's defaults (gemma3: n_merge = 4)
    weights = sum(t.n_bytes for t in part.tensors)
    width = 0
    where = _OUTPUT_WIDTH.get(kind)
    if where is not None:
        t = next((t for t in part.tensors if t.name == where[0]), None)
        width = t.ne[where[1]] if t is not None and len(t.ne) > where[1] else 0
    return Projector(
        projector_type=kind,
        modality="vision+audio" if vision and audio else ("vision" if vision else "audio"),
        image_size=image,
        patch_size=patch,
        n_merge=merge,
        projection_dim=width,
        weights_bytes=weights,
        warmup_image_size=warmup_image_size(kind, image, patch, merge) if vision else 0,
        max_image_size=max_image_size(kind, patch, merge) if vision else 0,
        file_name=fname,
        source=source or str(part.path),
        path=path,
        **dims,
    )


def read_projector(path: str | os.PathLike[str]) -> Projector:
    """A local mmproj GGUF's projector (its header only; tensor data is never read)."""
    p = Path(path).expanduser()
    return projector_of(read_part(p), path=str(p))


def projector_from_url(url: str, cache: Path, timeout_s: float | None = None) -> Projector:
    """An mmproj GGUF at `url`, its header read with HTTP ranges (within `timeout_s`)."""
    from rigspark_gui.catalog.remote import Deadline, RemoteError, fetch_header

    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise RemoteError(f"--mmproj takes a file or an http(s) URL, got {url[:80]!r}")
    fetched = fetch_header(url, cache, deadline=Deadline(timeout_s))
    return projector_of(read_part(fetched.path), source=url, path=url)


def load_projector(arg: str, cache: Path, timeout_s: float | None = None) -> Projector:
    """`--mmproj FILE|URL`: a local file, or a URL read remotely within `timeout_s` (any
    scheme: one that is not http(s) is refused in one line, not looked up as a path)."""
    if "://" in arg:
        return projector_from_url(arg, cache, timeout_s)
    return read_projector(arg)
