"""Plan a model on the web without downloading it: a GGUF's header is all a plan needs.

`--model-url URL` and `--model hf:REPO[:QUANT]` read the header with HTTP range requests
(redirects followed, as Hugging Face sends downloads to its CDN), growing the range
until the header's last tensor record is in, and keep it in the user cache as a sparse
file of the real size: the GGUF importer reads it as it reads a file on disk, and a
second plan needs no network. Split models (`-00001-of-0000N`) are read shard by shard.
A Hugging Face repository is listed with `huggingface_hub` (its token from HF_TOKEN or
the login file, its gated and missing-repo errors); a native repository plans from its
`config.json`.

The network is touched only here, and only when the user asks for a remote model.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rigspark_gui.catalog.gguf_names import is_first_shard, shard_names
from rigspark_gui.core.errors import ModelImportError
from rigspark_gui.core.model import ModelSpec

FIRST_READ = 1 << 20  # most headers fit; big vocabularies need a few MiB
MAX_HEADER_BYTES = 64 << 20
TIMEOUT_S = 20.0
RETRIES = 3
Progress = Callable[[str], None]


class RemoteError(ModelImportError):
    """A remote model that could not be read: one plain sentence."""


# ---------------------------------------------------------------- the GGUF header's end

_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


class _Short(Exception):
    """The bytes so far end inside the header."""


def header_end(data: bytes) -> int:
    """Where tensor data starts in a GGUF whose first bytes are `data` (header records,
    then alignment padding); raises _Short when `data` ends before that."""
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(data):
            raise _Short
        out = data[pos : pos + n]
        pos += n
        return out

    magic = take(4)
    if magic != b"GGUF":
        raise RemoteError("not a GGUF file (its first bytes are not GGUF)")
    endian = "<" if struct.unpack("<I", take(4))[0] < 0x10000 else ">"

    def u32() -> int:
        return int(struct.unpack(endian + "I", take(4))[0])

    def u64() -> int:
        return int(struct.unpack(endian + "Q", take(8))[0])

    def string() -> str:
        n = u64()
        if n > MAX_HEADER_BYTES:
            raise RemoteError("a GGUF string longer than the header cap")
        return take(n).decode("utf-8", "replace")

    def skip_value(vtype: int) -> object:
        if vtype in _SCALAR:
            raw = take(_SCALAR[vtype])
            return int.from_bytes(raw, "little" if endian == "<" else "big")
        if vtype == _STRING:
            return string()
        if vtype == _ARRAY:
            inner, count = u32(), u64()
            if count > MAX_HEADER_BYTES:
                raise RemoteError("a GGUF array longer than the header cap")
            if inner in _SCALAR:
                take(_SCALAR[inner] * count)
            else:
                for _ in range(count):
                    skip_value(inner)
            return None
        raise RemoteError(f"unknown GGUF value type {vtype}")

    n_tensors, n_kv = u64(), u64()
    if n_tensors > 1 << 24 or n_kv > 1 << 24:
        raise RemoteError("implausible GGUF header counts")
    alignment = 32
    for _ in range(n_kv):
        key = string()
        value = skip_value(u32())
        if key == "general.alignment" and isinstance(value, int) and value > 0:
            alignment = value
    for _ in range(n_tensors):
        string()
        dims = u32()
        if dims > 8:
            raise RemoteError("a GGUF tensor with more than 8 dimensions")
        take(8 * dims + 4 + 8)
    return (pos + alignment - 1) // alignment * alignment


# ---------------------------------------------------------------- HTTP


class _SameHostAuth(urllib.request.HTTPRedirectHandler):
    """Follow redirects, but never carry the token to another host (a CDN)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            old_host = urllib.parse.urlsplit(req.full_url).hostname
            if urllib.parse.urlsplit(newurl).hostname != old_host:
                new.remove_header("Authorization")
        return new


_OPENER = urllib.request.build_opener(_SameHostAuth)


def _get_range(url: str, start: int, end: int, token: str | None) -> tuple[bytes, int | None]:
    """Bytes start..end (inclusive) and the file's total size when the server says it."""
    headers = {"Range": f"bytes={start}-{end}", "User-Agent": "rigspark"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    last: Exception | None = None
    for attempt in range(RETRIES):
        try:
            req = urllib.request.Request(url, headers=headers)
            with _OPENER.open(req, timeout=TIMEOUT_S) as resp:
                want = end - start + 1
                total = _total_size(resp.headers.get("Content-Range"), resp.status)
                if resp.status == 200:  # ranges ignored: read what we need, then stop
                    length = resp.headers.get("Content-Length")
                    total = int(length) if length and length.isdigit() else None
                    body = resp.read(end + 1)[start:]
                else:
                    body = resp.read(want + 1)
                if len(body) > want:
                    body = body[:want]
                if total is not None and len(body) < min(want, total - start):
                    raise RemoteError(f"{_show(url)}: the response ended early (truncated)")
                return body, total
        except urllib.error.HTTPError as err:
            if err.code in (401, 403):
                raise RemoteError(
                    f"{_show(url)}: access denied (HTTP {err.code}); a gated or private "
                    "model needs a token: set HF_TOKEN or log in with `hf auth login`"
                ) from None
            if err.code == 404:
                raise RemoteError(f"{_show(url)}: not found (HTTP 404)") from None
            if err.code == 416:
                return b"", None
            last = err
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as err:
            last = err
        time.sleep(0.2 * 2**attempt)
    reason = getattr(last, "reason", None) or last
    raise RemoteError(f"{_show(url)}: could not read it ({reason}) after {RETRIES} tries")


def _total_size(content_range: str | None, status: int) -> int | None:
    if status != 206 or not content_range:
        return None
    m = re.match(r"bytes \d+-\d+/(\d+)", content_range)
    return int(m.group(1)) if m else None


def _show(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.netloc}{parts.path}"[-120:]


# ---------------------------------------------------------------- the header, cached


@dataclass(frozen=True)
class Fetched:
    path: Path  # the sparse local copy (first shard)
    bytes_read: int  # over the network this time (0 when the cache answered)


def _cache_folder(cache: Path, key: str) -> Path:
    return cache / "remote" / hashlib.sha256(key.encode()).hexdigest()[:24]


def fetch_header(
    url: str,
    cache: Path,
    token: str | None = None,
    progress: Progress | None = None,
    max_bytes: int = MAX_HEADER_BYTES,
) -> Fetched:
    """The GGUF at `url` as a sparse local file holding only its header (every shard of
    a split model); from the cache when it has been read before."""
    name = _file_name(url)
    folder = _cache_folder(cache, url)
    meta = folder / "source.json"
    first = folder / name
    if meta.is_file() and first.is_file():
        return Fetched(first, 0)
    folder.mkdir(parents=True, exist_ok=True)
    base = url.rsplit("/", 1)[0]
    parts = shard_names(name)
    urls = [f"{base}/{n}" for n in parts] if parts is not None else [url]
    read = 0
    for i, shard_url in enumerate(urls):
        if progress is not None:
            progress(f"Reading the header of {_file_name(shard_url)} ({i + 1}/{len(urls)})")
        read += _fetch_one(shard_url, folder / _file_name(shard_url), token, max_bytes - read)
    meta.write_text(json.dumps({"url": url, "bytes_read": read}), encoding="utf-8")
    return Fetched(first, read)


def _fetch_one(url: str, dest: Path, token: str | None, budget: int) -> int:
    data = b""
    total: int | None = None
    want = FIRST_READ
    while True:
        if len(data) >= budget:
            raise RemoteError(f"{_show(url)}: its header is larger than {budget >> 20} MiB")
        end = min(want, budget) - 1
        chunk, size = _get_range(url, len(data), end, token)
        total = size if size is not None else total
        data += chunk
        try:
            stop = header_end(data)
            break
        except _Short:
            if not chunk or (total is not None and len(data) >= total):
                raise RemoteError(f"{_show(url)}: the file ends inside its GGUF header") from None
            want *= 4
    tmp = dest.with_suffix(".part")
    with open(tmp, "wb") as f:
        f.write(data[:stop])
        f.truncate(max(total or 0, stop))  # sparse: the size is real, the data never read
    os.replace(tmp, dest)
    return len(data)


def _file_name(url: str) -> str:
    name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200]
    return name if name.lower().endswith(".gguf") else (name or "model") + ".gguf"


def model_from_url(url: str, cache: Path, progress: Progress | None = None) -> ModelSpec:
    from rigspark_gui.catalog.gguf_import import import_gguf

    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise RemoteError(f"--model-url takes an http(s) URL, got {url[:80]!r}")
    fetched = fetch_header(url, cache, progress=progress)
    spec = import_gguf(fetched.path)
    return replace(spec, source=url)


# ---------------------------------------------------------------- Hugging Face


def _hf_api() -> Any:
    from huggingface_hub import HfApi

    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)


def model_from_hf(text: str, cache: Path, progress: Progress | None = None) -> ModelSpec:
    """`hf:REPO[:QUANT]`: the repo's GGUF of that quantization (Q4_K_M when none is
    named, as llama.cpp's -hf does), or a native repo's config.json."""
    from rigspark_gui.catalog.resolve import quant_in

    body = text.removeprefix("hf:")
    repo, _, quant = body.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", repo):
        raise RemoteError(f"{repo!r} is not a Hugging Face repository (owner/name)")
    index = _cache_folder(cache, f"hf:{body}") / "choice.json"
    try:
        files = _hf_files(repo)
    except RemoteError:
        if index.is_file():  # offline: what was chosen last time
            files = None
        else:
            raise
    if files is None:
        choice = json.loads(index.read_text(encoding="utf-8"))
    else:
        choice = _choose(repo, files, quant, quant_in)
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_text(json.dumps(choice), encoding="utf-8")
    url = _hf_url(repo, choice["file"])
    token = _hf_token()
    if choice["kind"] == "config":
        return _native(repo, url, cache, token)
    fetched = fetch_header(url, cache, token=token, progress=progress)
    from rigspark_gui.catalog.gguf_import import import_gguf

    spec = import_gguf(fetched.path)
    return replace(spec, source=f"hf:{repo}:{choice['quant']}", hf_repo=repo)


def _hf_token() -> str | None:
    try:
        from huggingface_hub import get_token

        token = get_token()
        return str(token) if token else None
    except Exception:  # a broken login file must not stop a public download
        return None


def _hf_url(repo: str, file: str) -> str:
    from huggingface_hub import hf_hub_url

    endpoint = os.environ.get("HF_ENDPOINT") or None
    return str(hf_hub_url(repo, file, endpoint=endpoint))


def _hf_files(repo: str) -> list[str]:
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
    )

    try:
        return list(_hf_api().list_repo_files(repo, token=_hf_token()))
    except GatedRepoError:
        raise RemoteError(
            f"{repo} is gated: accept its license on huggingface.co, then set HF_TOKEN "
            "or log in with `hf auth login`"
        ) from None
    except RepositoryNotFoundError:
        raise RemoteError(f"no Hugging Face repository {repo} (or it is private)") from None
    except HfHubHTTPError as err:
        raise RemoteError(f"{repo}: Hugging Face answered {err}".splitlines()[0]) from None
    except Exception as err:  # connection errors come from the HTTP library underneath
        raise RemoteError(f"{repo}: could not reach Hugging Face ({type(err).__name__})") from None


def _choose(
    repo: str, files: list[str], quant: str, quant_in: Callable[[str], str | None]
) -> dict[str, str]:
    ggufs = [
        f
        for f in files
        if f.lower().endswith(".gguf")
        and "mmproj" not in f.lower()
        and is_first_shard(f.rsplit("/", 1)[-1])
    ]
    if not ggufs:
        if "config.json" in files:
            return {"kind": "config", "file": "config.json", "quant": ""}
        raise RemoteError(f"{repo} has no GGUF file and no config.json")
    by_quant: dict[str, str] = {}
    for f in ggufs:
        q = quant_in(f.rsplit("/", 1)[-1])
        if q is not None:
            by_quant.setdefault(q, f)
    wanted = (quant_in(f"x-{quant}") or quant.upper()) if quant else "Q4_K_M"
    if wanted in by_quant:
        return {"kind": "gguf", "file": by_quant[wanted], "quant": wanted}
    if not quant and len(ggufs) == 1:
        only = ggufs[0]
        return {"kind": "gguf", "file": only, "quant": quant_in(only) or "file"}
    offered = ", ".join(sorted(by_quant)) or ", ".join(ggufs[:5])
    raise RemoteError(f"{repo} has no {wanted} GGUF (it offers {offered})")


def _native(repo: str, url: str, cache: Path, token: str | None) -> ModelSpec:
    from rigspark_gui.catalog.hf_import import import_hf_config

    folder = _cache_folder(cache, f"hf-config:{repo}")
    path = folder / "config.json"
    if not path.is_file():
        body, _ = _get_range(url, 0, (4 << 20) - 1, token)
        folder.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    result = import_hf_config(path)
    spec: ModelSpec = getattr(result, "spec", result)
    return replace(spec, hf_repo=repo, source=f"hf:{repo}")
