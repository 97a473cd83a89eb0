"""A catalog that keeps up: `rigspark-plan models --update` and Help ▸ Update the model
catalog… read the `config.json` of a curated list of Hugging Face repositories (and the
GGUF file listing of each one's quantized repository) through `huggingface_hub`,
validate what they give exactly as a shipped entry is validated, and keep the good ones
in the user cache (`catalog-updates.json`), which `load_catalog` merges under the
shipped catalog. Nothing here runs unless the user asks: the catalog is offline by
default.

Every repository has the same deadline (`remote.network_timeout`); a missing or gated
one is one line, and the others still come in. The caller may follow progress and stop
between repositories.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from rigspark_gui.catalog.remote_header import RemoteError
from rigspark_gui.core.errors import CatalogError, RigSparkError
from rigspark_gui.user_dirs import cache_dir

UPDATES_FILE = "catalog-updates.json"
STALE_DAYS = 183  # six months: the picker offers an update when the catalog is older
Progress = Callable[[int, int, str], None]  # done, total, what is being read


class Source(NamedTuple):
    """A repository the update reads: its config.json, and where its GGUFs are listed."""

    repo: str
    gguf_repo: str = ""


# Releases whose config.json `hf_import` reads (ungated), each with the GGUF repository
# that publishes its quantizations (file sizes become the entry's `published`). A release
# the shipped catalog already has is read but not added (`merge_updates`).
CURATED: tuple[Source, ...] = (
    Source("Qwen/Qwen3-8B", "unsloth/Qwen3-8B-GGUF"),
    Source("Qwen/Qwen3-4B-Instruct-2507", "unsloth/Qwen3-4B-Instruct-2507-GGUF"),
    Source("Qwen/Qwen3-30B-A3B-Instruct-2507", "unsloth/Qwen3-30B-A3B-Instruct-2507-GGUF"),
    Source("Qwen/Qwen3-Coder-30B-A3B-Instruct", "unsloth/Qwen3-Coder-30B-A3B-Instruct-GGUF"),
    Source("Qwen/Qwen3-235B-A22B-Instruct-2507", "unsloth/Qwen3-235B-A22B-Instruct-2507-GGUF"),
    Source("openai/gpt-oss-20b", "unsloth/gpt-oss-20b-GGUF"),
    Source("openai/gpt-oss-120b", "unsloth/gpt-oss-120b-GGUF"),
    Source("deepseek-ai/DeepSeek-R1-0528-Qwen3-8B", "unsloth/DeepSeek-R1-0528-Qwen3-8B-GGUF"),
    Source("deepseek-ai/DeepSeek-V3.1", "unsloth/DeepSeek-V3.1-GGUF"),
    Source("deepseek-ai/DeepSeek-V3.1-Terminus", "unsloth/DeepSeek-V3.1-Terminus-GGUF"),
    Source("moonshotai/Kimi-K2-Instruct-0905", "unsloth/Kimi-K2-Instruct-0905-GGUF"),
    Source("zai-org/GLM-4.6", "unsloth/GLM-4.6-GGUF"),
    Source("zai-org/GLM-4.7", "unsloth/GLM-4.7-GGUF"),
    Source("mistralai/Devstral-Small-2507", "unsloth/Devstral-Small-2507-GGUF"),
    Source("Alibaba-NLP/Tongyi-DeepResearch-30B-A3B", ""),
)


@dataclass(frozen=True, slots=True)
class UpdateResult:
    added: tuple[str, ...]  # entry ids read and kept
    errors: tuple[str, ...]  # one line per repository that gave nothing
    path: Path | None  # where they were kept
    cancelled: bool = False


@dataclass(slots=True)
class _Read:
    entries: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def updates_path() -> Path:
    return cache_dir() / UPDATES_FILE


MAX_UPDATES_BYTES = 16 << 20


def load_updates(path: Path | None = None) -> Any:
    """The entries a past update kept (a `Catalog`, validated once per content like the
    shipped catalog), or None when there are none; a file that cannot be read is left
    alone (the shipped catalog still loads)."""
    from rigspark_gui.catalog.json_file import parse_json
    from rigspark_gui.catalog.models import (
        Catalog,
        CatalogEntry,
        parse_catalog,
    )
    from rigspark_gui.catalog.validated import layout_of, read_bytes, read_validated
    from rigspark_gui.core.model import Checkpoint, Geometry, ModelSpec, QuantFile

    path = path or updates_path()
    try:
        if not path.is_file():
            return None
        # bounded like every file read: the shipped catalog is under 1 MiB
        data = read_bytes(
            path, what="catalog update file", error=CatalogError, max_bytes=MAX_UPDATES_BYTES
        )
        return read_validated(
            data,
            kind="catalog-updates",
            layout=layout_of(Catalog, CatalogEntry, ModelSpec, Geometry, QuantFile, Checkpoint),
            validate=lambda raw: parse_catalog(parse_json(raw, path), path.name),
        )
    except (OSError, CatalogError):
        return None


def shipped_date() -> datetime | None:
    """When the shipped catalog was last curated (`curated` at the top of models.json)."""
    from rigspark_gui.resources import data_file

    try:
        raw = json.loads(data_file("models.json").read_text(encoding="utf-8"))
        return datetime.fromisoformat(str(raw["curated"])).replace(tzinfo=UTC)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def shipped_age_days(now: datetime | None = None) -> int | None:
    when = shipped_date()
    return None if when is None else ((now or datetime.now(UTC)) - when).days


def is_stale(now: datetime | None = None) -> bool:
    age = shipped_age_days(now)
    return age is not None and age > STALE_DAYS and load_updates() is None


def run_update(
    sources: Sequence[Source] = CURATED,
    *,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
    timeout_s: float | None = None,
    path: Path | None = None,
) -> UpdateResult:
    """Read every source, keep the entries that validate; one error line per source."""
    from rigspark_gui.catalog.models import parse_catalog

    path = path or updates_path()
    read = _Read()
    stopped = False
    for done, source in enumerate(sources):
        if cancelled is not None and cancelled():
            stopped = True
            break
        if progress is not None:
            progress(done, len(sources), source.repo)
        try:
            read.entries.append(_entry(source, timeout_s))
        except RigSparkError as err:
            read.errors.append(" ".join(str(err).split()))
        except OSError as err:  # the user cache it reads through: full, read-only...
            read.errors.append(f"{source.repo}: {err.strerror or err}")
    if progress is not None and not stopped:
        progress(len(sources), len(sources), "")
    kept = _previous(path)
    for e in read.entries:
        kept[e["id"]] = e
    checked = parse_catalog({"schema_version": 1, "models": list(kept.values())}, path.name)
    good = {e.id for e in checked.entries}
    read.errors += list(checked.errors)
    if read.entries:
        try:
            _write(path, [e for e in kept.values() if e["id"] in good])
        except OSError as err:
            raise CatalogError(f"cannot write {path}: {err.strerror or err}") from err
    added = tuple(e["id"] for e in read.entries if e["id"] in good)
    return UpdateResult(added, tuple(read.errors), path if added else None, stopped)


def _previous(path: Path) -> dict[str, dict[str, Any]]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return {m["id"]: m for m in raw["models"] if isinstance(m, dict) and "id" in m}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _write(path: Path, models: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    body = {
        "schema_version": 1,
        "description": "Entries read by `rigspark-plan models --update` from Hugging Face",
        "models": models,
    }
    part.write_text(json.dumps(body, indent=1), encoding="utf-8")
    part.replace(path)


def _entry(source: Source, timeout_s: float | None) -> dict[str, Any]:
    """One repository's catalog entry, as `models.json` spells it."""
    from rigspark_gui.catalog import remote
    from rigspark_gui.catalog.hf_import import checkpoint_format, import_hf

    deadline = remote.Deadline(timeout_s)
    files = _listing(source.repo, deadline)
    if "config.json" not in files:
        raise RemoteError(f"{source.repo} has no config.json")
    token = remote._hf_token()
    url = remote._hf_url(source.repo, "config.json")
    body, _ = remote._get_range(url, 0, (4 << 20) - 1, token, deadline)
    folder = cache_dir() / "catalog-update" / source.repo.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.json"
    config.write_bytes(body)
    spec = import_hf(config).spec
    try:
        raw = json.loads(body)
    except ValueError:
        raw = {}
    fmt = checkpoint_format(raw) if isinstance(raw, dict) else "BF16"
    dtype = raw.get("torch_dtype") or raw.get("dtype") if isinstance(raw, dict) else None
    native = {"FP8": "fp8"}.get(fmt, "float16" if dtype == "float16" else "bfloat16")
    published = _published(source.gguf_repo, deadline) if source.gguf_repo else {}
    name = source.repo.split("/")[-1]
    when = datetime.now(UTC).date().isoformat()
    return {
        "id": re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "model",
        "name": name.replace("-", " "),
        "family": re.split(r"[-_ ]", name)[0],
        "hf_repo": source.repo,
        "source": f"{source.repo}/config.json",
        "verified_from": f"read from huggingface.co on {when} by `models --update`",
        "native_dtype": native,
        "geometry": asdict(spec.geometry),
        "published": published,
    }


def _listing(repo: str, deadline: Any) -> dict[str, int]:
    """Every file of a repository with its bytes, or one RemoteError line."""
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    from rigspark_gui.catalog import remote

    def tree() -> list[Any]:
        api = remote._hf_api()
        return list(api.list_repo_tree(repo, recursive=True, token=remote._hf_token()))

    try:
        items = remote._within(deadline, tree)
    except remote._Expired:
        raise RemoteError(
            f"{repo}: Hugging Face did not list it within {deadline.seconds:g} s"
        ) from None
    except GatedRepoError:
        raise RemoteError(
            f"{repo} is gated: accept its license on huggingface.co, then set HF_TOKEN"
        ) from None
    except RepositoryNotFoundError:
        raise RemoteError(f"no Hugging Face repository {repo} (or it is private)") from None
    except HfHubHTTPError as err:
        raise RemoteError(f"{repo}: Hugging Face answered {err}".splitlines()[0]) from None
    except Exception as err:  # connection errors come from the HTTP library underneath
        raise RemoteError(f"{repo}: could not reach Hugging Face ({type(err).__name__})") from None
    return {i.path: int(getattr(i, "size", 0) or 0) for i in items if hasattr(i, "path")}


def _published(gguf_repo: str, deadline: Any) -> dict[str, dict[str, Any]]:
    """The GGUF repository's file sizes per standard quantization (split files summed);
    Unsloth's dynamic UD- mixes are left out (the catalog plans standard mixes)."""
    from rigspark_gui.catalog.gguf_names import shard_names
    from rigspark_gui.catalog.resolve import quant_in

    try:
        files = _listing(gguf_repo, deadline)
    except RemoteError:
        return {}
    groups: dict[str, dict[str, int]] = {}  # quant -> first file's name -> bytes
    for path, size in sorted(files.items()):
        base = path.rsplit("/", 1)[-1]
        if not base.lower().endswith(".gguf") or "mmproj" in base.lower() or size <= 0:
            continue
        quant = quant_in(base)
        if quant is None or quant.startswith("UD-"):
            continue
        shards = shard_names(base)
        first = (
            path.rsplit("/", 1)[0] + "/" + shards[0]
            if shards and "/" in path
            else (shards[0] if shards else path)
        )
        files_of = groups.setdefault(quant, {})
        files_of[first] = files_of.get(first, 0) + size
    out: dict[str, dict[str, Any]] = {}
    for quant, by_file in groups.items():
        first, total = next(iter(by_file.items()))  # one file (or split set) per quant
        out[quant] = {
            "file_bytes": total,
            "source": f"{gguf_repo}: {first} (huggingface.co listing)",
        }
    return out
