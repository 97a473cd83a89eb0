"""The models already on this computer: Ollama's store, LM Studio's folders, the Hugging
Face cache, llama.cpp's download cache and folders the user adds.

Locations and layouts are the tools' own:
- Ollama (`OLLAMA_MODELS`, default `~/.ollama/models`): a manifest per tag at
  `manifests/<host>/<namespace>/<model>/<tag>` (JSON, its layer of media type
  `application/vnd.ollama.image.model` names the GGUF by digest), blobs at
  `blobs/sha256-<hex>`; the tag reads `model:tag` for `registry.ollama.ai/library`,
  `namespace/model:tag` for other namespaces and `host/namespace/model:tag` otherwise.
- LM Studio: `~/.lmstudio/models/<publisher>/<repo>/*.gguf` (older versions
  `~/.cache/lm-studio/models`).
- Hugging Face (`HF_HUB_CACHE`, else `HF_HOME/hub`, default `~/.cache/huggingface/hub`):
  `models--<org>--<name>/snapshots/<revision>/` holds GGUF files or a native checkpoint
  (`config.json` + safetensors).
- llama.cpp (`LLAMA_CACHE`, default `~/.cache/llama.cpp`): GGUF files `-hf` downloaded.

Finding is a bounded directory walk (depth, entries, no symlinked folders); reading a
model is its header only, through the same bounded importers as File ▸ Import. A file
that cannot be read is named and skipped; the scan never raises for one file.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rigspark_gui.catalog.gguf_names import is_first_shard, shard_names
from rigspark_gui.core.errors import CatalogError, RigSparkError
from rigspark_gui.core.model import ModelSpec

MAX_DEPTH = 8
MAX_ENTRIES = 50_000  # directory entries looked at per store
MAX_MANIFEST_BYTES = 1 << 20
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
OLLAMA_HOST, OLLAMA_NAMESPACE = "registry.ollama.ai", "library"
_ID_PREFIX = {"Ollama": "ollama", "LM Studio": "lmstudio", "Hugging Face cache": "hfcache",
              "llama.cpp cache": "llamacpp", "folder": "file"}  # fmt: skip


@dataclass(frozen=True)
class LocalModel:
    name: str  # as its tool names it: an Ollama tag, "publisher/repo/file", a path
    store: str  # "Ollama", "LM Studio", "Hugging Face cache", "llama.cpp cache", "folder"
    path: Path  # the GGUF (first shard) or the checkpoint folder with config.json
    size_bytes: int  # on disk, every shard
    ollama_tag: str = ""
    hf_repo: str = ""

    @property
    def kind(self) -> str:
        return "checkpoint" if self.path.is_dir() else "gguf"


@dataclass
class Scan:
    found: list[LocalModel] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "path: why", one per file


def stores(env: Mapping[str, str], home: Path) -> list[tuple[str, Path]]:
    """Where each tool keeps its models on this computer (existing or not)."""
    cache = Path(env.get("XDG_CACHE_HOME") or home / ".cache")
    hf_home = Path(env.get("HF_HOME") or cache / "huggingface")
    return [
        ("Ollama", Path(env.get("OLLAMA_MODELS") or home / ".ollama" / "models")),
        ("LM Studio", home / ".lmstudio" / "models"),
        ("LM Studio", cache / "lm-studio" / "models"),
        ("Hugging Face cache", Path(env.get("HF_HUB_CACHE") or hf_home / "hub")),
        ("llama.cpp cache", Path(env.get("LLAMA_CACHE") or cache / "llama.cpp")),
    ]


def find_local_models(
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    folders: Sequence[Path] = (),
    progress: Callable[[str], None] | None = None,
) -> Scan:
    """Every model file in the tools' stores and `folders`, found but not yet read."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    scan = Scan()
    seen: set[tuple[Path, str]] = set()  # a file found twice is listed once, per Ollama tag
    places = [*stores(env, home), *(("folder", Path(f)) for f in folders)]
    for store, root in places:
        if not root.is_dir():
            continue
        if progress is not None:
            progress(f"Looking in {store}: {root}")
        if store == "Ollama":
            found = _ollama(root, scan)
        elif store == "Hugging Face cache":
            found = _hf_cache(root, scan)
        else:
            found = _gguf_files(root, store)
        for m in found:
            key = (m.path.resolve(), m.ollama_tag)
            if key not in seen:
                seen.add(key)
                scan.found.append(m)
    return scan


def read_local_model(model: LocalModel) -> ModelSpec:
    """Its header, planned like an imported file, with the names its tool uses."""
    if model.kind == "checkpoint":
        from rigspark_gui.catalog.hf_import import import_hf_config

        result = import_hf_config(model.path)
        spec: ModelSpec = getattr(result, "spec", result)
    else:
        from rigspark_gui.catalog.gguf_import import import_gguf

        spec = import_gguf(model.path)
    return replace(
        spec,
        id=local_model_id(model),
        family="On this computer",
        ollama_tag=model.ollama_tag,
        hf_repo=model.hf_repo,
        name=f"{model.name} ({model.store})"[:300],
    )


def local_model_id(model: LocalModel) -> str:
    return f"{_ID_PREFIX[model.store]}:{model.name}"[:200]


def find_by_id(
    text: str, env: Mapping[str, str] | None = None, home: Path | None = None
) -> ModelSpec | None:
    """`ollama:llama3.1:8b`, `lmstudio:…`, `hfcache:…`, `llamacpp:…` (the ids `models
    --local` prints): that model, read from its file; None when the text has no such
    prefix."""
    prefix = text.split(":", 1)[0]
    if prefix not in _ID_PREFIX.values() or prefix == "file":
        return None
    scan = find_local_models(env, home)
    for m in scan.found:
        if local_model_id(m) == text or (m.ollama_tag and f"ollama:{m.ollama_tag}" == text):
            return read_local_model(m)
    names = ", ".join(local_model_id(m) for m in scan.found[:5]) or "none found"
    raise CatalogError(f"no model {text!r} on this computer (models here: {names})")


def read_all(
    scan: Scan, progress: Callable[[int, int, str], None] | None = None
) -> tuple[list[ModelSpec], list[str]]:
    """Every found model's header; unreadable ones are named in the second list."""
    specs: list[ModelSpec] = []
    skipped = list(scan.skipped)
    for i, m in enumerate(scan.found):
        if progress is not None:
            progress(i, len(scan.found), m.name)
        try:
            specs.append(read_local_model(m))
        except (RigSparkError, OSError, ValueError) as err:
            skipped.append(f"{m.path}: {err}")
    return specs, skipped


# ---------------------------------------------------------------- stores


def _walk(root: Path) -> Iterator[Path]:
    """Files under `root`, depth- and count-bounded, never through a symlinked folder."""
    budget = MAX_ENTRIES
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack and budget > 0:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            budget -= 1
            if budget <= 0:
                return
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 < MAX_DEPTH and not entry.name.startswith("."):
                        stack.append((Path(entry.path), depth + 1))
                elif entry.is_file():  # files may be links (the Hugging Face cache's are)
                    yield Path(entry.path)
            except OSError:
                continue


def _first_shard(path: Path) -> bool:
    return is_first_shard(path.name)


def _size(path: Path) -> int:
    """On disk, every part of a split model."""
    names = shard_names(path.name) or [path.name]
    return sum(_stat_size(path.with_name(n)) for n in names)


def _gguf_files(root: Path, store: str) -> list[LocalModel]:
    out: list[LocalModel] = []
    for path in _walk(root):
        if path.suffix.lower() != ".gguf" or not _first_shard(path):
            continue
        if "mmproj" in path.name.lower():
            continue  # a vision projector beside its model, not a model
        rel = path.relative_to(root)
        name = str(rel) if store != "folder" else str(path)
        repo = "/".join(rel.parts[:2]) if store == "LM Studio" and len(rel.parts) >= 3 else ""
        out.append(LocalModel(name, store, path, _size(path), hf_repo=repo))
    return out


def _hf_cache(root: Path, scan: Scan) -> list[LocalModel]:
    out: list[LocalModel] = []
    try:
        repos = sorted(p for p in root.iterdir() if p.name.startswith("models--"))
    except OSError:
        return out
    for repo_dir in repos:
        repo = repo_dir.name.removeprefix("models--").replace("--", "/")
        snapshots = repo_dir / "snapshots"
        if not snapshots.is_dir():
            continue
        try:
            revisions = sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime)
        except OSError:
            continue
        if not revisions:
            continue
        latest = revisions[-1]  # the newest download of this repo
        ggufs = [p for p in _walk(latest) if p.suffix.lower() == ".gguf" and _first_shard(p)]
        for path in ggufs:
            if "mmproj" not in path.name.lower():
                name = f"{repo}/{path.relative_to(latest)}"
                out.append(LocalModel(name, "Hugging Face cache", path, _size(path), hf_repo=repo))
        if not ggufs and (latest / "config.json").is_file():
            weights = sum(_stat_size(p) for p in latest.glob("*.safetensors"))
            if weights:
                out.append(LocalModel(repo, "Hugging Face cache", latest, weights, hf_repo=repo))
            else:
                scan.skipped.append(f"{latest}: a config.json without safetensors weights")
    return out


def _stat_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _ollama(root: Path, scan: Scan) -> list[LocalModel]:
    out: list[LocalModel] = []
    manifests = root / "manifests"
    if not manifests.is_dir():
        return out
    for path in _walk(manifests):
        rel = path.relative_to(manifests).parts
        if len(rel) != 4:
            continue  # host/namespace/model/tag
        host, namespace, model, tag = rel
        if host == OLLAMA_HOST and namespace == OLLAMA_NAMESPACE:
            name = f"{model}:{tag}"
        elif host == OLLAMA_HOST:
            name = f"{namespace}/{model}:{tag}"
        else:
            name = f"{host}/{namespace}/{model}:{tag}"
        try:
            if path.stat().st_size > MAX_MANIFEST_BYTES:
                raise ValueError("manifest larger than 1 MiB")
            layers = json.loads(path.read_text(encoding="utf-8")).get("layers", [])
            digest = next(
                str(layer["digest"])
                for layer in layers
                if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_MODEL_LAYER
            )
        except StopIteration:
            scan.skipped.append(f"{path}: the manifest names no model layer")
            continue
        except (OSError, ValueError, AttributeError, KeyError, TypeError) as err:
            scan.skipped.append(f"{path}: unreadable manifest ({err})")
            continue
        if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
            scan.skipped.append(f"{path}: unexpected digest {digest[:80]!r}")
            continue
        blob = root / "blobs" / digest.replace(":", "-")
        if not blob.is_file():
            scan.skipped.append(f"{path}: its model blob {blob.name} is missing")
            continue
        repo = f"{namespace}/{model}" if host == "hf.co" else ""
        out.append(
            LocalModel(name, "Ollama", blob, _stat_size(blob), ollama_tag=name, hf_repo=repo)
        )
    return out
