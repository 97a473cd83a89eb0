"""Plan a model on the web without downloading it: a GGUF's header is all a plan needs.

`--model-url URL` and `--model hf:REPO[:QUANT]` read the header with HTTP range requests
(redirects followed, as Hugging Face sends downloads to its CDN), growing the range
until the header's last tensor record is in, and keep it in the user cache as a sparse
file of the real size: the GGUF importer reads it as it reads a file on disk, and a
second plan needs no network. Split models (`-00001-of-0000N`) are read shard by shard.
A Hugging Face repository is listed with `huggingface_hub` (its token from HF_TOKEN or
the login file, its gated and missing-repo errors); a native repository plans from its
`config.json`.

The network is touched only here, and only when the user asks for a remote model. One
read has one deadline (`network_timeout()`: --network-timeout, RIGSPARK_NETWORK_TIMEOUT,
30 s) shared by its connections, socket waits, redirects (at most 10, a loop refused),
retries and the listing; every failure is one RemoteError sentence naming the URL.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rigspark_gui.catalog.gguf_names import is_first_shard, shard_names
from rigspark_gui.catalog.remote_header import (
    MAX_HEADER_BYTES,
    MAX_TIMEOUT_S,
    RemoteError,
    ShortHeader,
    header_end,
)
from rigspark_gui.core.model import ModelSpec

FIRST_READ = 1 << 20  # most headers fit; big vocabularies need a few MiB
TIMEOUT_S = 20.0  # the longest one socket wait, within the deadline
DEFAULT_TIMEOUT_S = 30.0  # one remote read in all: connections, redirects, retries
TIMEOUT_ENV = "RIGSPARK_NETWORK_TIMEOUT"
MAX_REDIRECTS = 10
RETRIES = 3
Progress = Callable[[str], None]


# ---------------------------------------------------------------- HTTP, with one deadline


class _Expired(Exception):
    """The deadline passed in the middle of a socket read (not an OSError, so urllib and
    http.client pass it up untouched)."""


class Deadline:
    """One time limit for a whole remote read: every connection, socket read, redirect
    and retry takes its time from the same budget."""

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = network_timeout(seconds)
        self.end = time.monotonic() + self.seconds
        self.received = 0  # bytes from the servers, headers included
        self.asked_at = 0  # `received` when the latest request went out
        self.answered_at: int | None = None  # `received` when its headers were in

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def left(self) -> float:
        """The time left, or _Expired when there is none."""
        left = self.remaining()
        if left <= 0:
            raise _Expired
        return left

    def message(self, url: str) -> str:
        if self.answered_at is not None:  # a body that trickles
            got = self.received - self.answered_at
            what = f"the server sent {got} byte{'' if got == 1 else 's'}"
        elif self.received > self.asked_at:
            what = f"the server sent {self.received - self.asked_at} bytes of its headers"
        else:
            what = "no answer"
        return f"{_show(url)}: {what} in {_seconds(self.seconds)} s (the network time limit)"


def network_timeout(seconds: float | None = None) -> float:
    """The total time limit of one remote read: `seconds` when given (the CLI's
    --network-timeout), else RIGSPARK_NETWORK_TIMEOUT, else 30 s."""
    if seconds is None:
        text = os.environ.get(TIMEOUT_ENV, "").strip()
        if not text:
            return DEFAULT_TIMEOUT_S
        try:
            seconds = float(text)
        except ValueError:
            raise RemoteError(
                f"{TIMEOUT_ENV} must be a number of seconds, got {text[:40]!r}"
            ) from None
    if not 0 < seconds <= MAX_TIMEOUT_S:
        raise RemoteError(f"the network time limit must be 0–{MAX_TIMEOUT_S} s, got {seconds:g}")
    return float(seconds)


def _seconds(value: float) -> str:
    return f"{value:g}"


class _GuardedSocket:
    """A connected socket whose every read waits at most the deadline's time left and
    stops when it is spent, so a server that trickles a byte a second cannot outlast it."""

    def __init__(self, sock: Any, deadline: Deadline) -> None:
        self._sock = sock
        self._deadline = deadline
        self._readers = 0  # as socket.makefile does: closed when its last reader is
        self._closing = False

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        self._sock.settimeout(min(self._deadline.left(), TIMEOUT_S))
        try:
            n = int(self._sock.recv_into(buffer, nbytes))
        except TimeoutError:
            if self._deadline.remaining() <= 0:
                raise _Expired from None
            raise
        self._deadline.received += n
        return n

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        self._readers += 1
        return io.BufferedReader(_GuardedReader(self))

    def close(self) -> None:
        self._closing = True
        if self._readers == 0:
            self._sock.close()

    def reader_closed(self) -> None:
        self._readers -= 1
        if self._closing and self._readers == 0:
            self._sock.close()

    def __getattr__(self, name: str) -> Any:  # sendall, close, setsockopt, …
        return getattr(self._sock, name)


class _GuardedReader(io.RawIOBase):
    def __init__(self, sock: _GuardedSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._sock.reader_closed()
        super().close()


def _guarded(base: type[http.client.HTTPConnection], deadline: Deadline) -> Any:
    class Connection(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            self.timeout = min(deadline.left(), TIMEOUT_S)  # the TCP (and TLS) handshake
            super().connect()
            self.sock = _GuardedSocket(self.sock, deadline)  # type: ignore[has-type]

    return Connection


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_guarded(http.client.HTTPConnection, self.deadline), req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(_guarded(http.client.HTTPSConnection, self.deadline), req)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects come back as HTTPErrors: `_open` follows them itself, counting them and
    watching for a loop."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


def _open(url: str, headers: dict[str, str], deadline: Deadline) -> Any:
    """The response for `url`, redirects followed (at most MAX_REDIRECTS, a loop refused,
    the token never carried to another host), within the deadline."""
    opener = urllib.request.build_opener(_HTTP(deadline), _HTTPS(deadline), _NoRedirect)
    seen = [url]
    headers = dict(headers)
    while True:
        req = urllib.request.Request(url, headers=headers)
        try:
            return opener.open(req, timeout=min(deadline.left(), TIMEOUT_S))
        except urllib.error.HTTPError as err:
            if err.code not in (301, 302, 303, 307, 308):
                raise
            location = err.headers.get("Location") or err.headers.get("URI")
            err.close()
            if not location:
                raise RemoteError(
                    f"{_show(url)}: a redirect (HTTP {err.code}) to nowhere"
                ) from None
        new = urllib.parse.urljoin(url, location)
        if urllib.parse.urlsplit(new).scheme not in ("http", "https"):
            raise RemoteError(f"{_show(url)}: redirects to a non-HTTP address ({new[:80]})")
        if new in seen:
            raise RemoteError(f"{_show(seen[0])}: redirects loop at {_show(new)}")
        seen.append(new)
        if len(seen) > MAX_REDIRECTS + 1:
            raise RemoteError(f"{_show(seen[0])}: more than {MAX_REDIRECTS} redirects")
        if urllib.parse.urlsplit(new).hostname != urllib.parse.urlsplit(url).hostname:
            headers.pop("Authorization", None)
        url = new


def _get_range(
    url: str, start: int, end: int, token: str | None, deadline: Deadline | None = None
) -> tuple[bytes, int | None]:
    """Bytes start..end (inclusive) and the file's total size when the server says it.
    Retries take their time from the same deadline."""
    deadline = deadline if deadline is not None else Deadline()
    headers = {"Range": f"bytes={start}-{end}", "User-Agent": "rigspark"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    last: Exception | None = None
    tries = 0
    while tries < RETRIES:
        tries += 1
        deadline.asked_at, deadline.answered_at = deadline.received, None
        try:
            with _open(url, headers, deadline) as resp:
                deadline.answered_at = deadline.received
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
        except _Expired:
            raise RemoteError(_out_of_time(url, deadline, last, tries)) from None
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
        except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
            last = err
        if deadline.remaining() <= 0:
            raise RemoteError(_out_of_time(url, deadline, last, tries))
        time.sleep(min(0.2 * 2 ** (tries - 1), max(deadline.remaining(), 0)))
        if deadline.remaining() <= 0:
            raise RemoteError(_out_of_time(url, deadline, last, tries))
    raise RemoteError(f"{_show(url)}: could not read it ({_reason(last)}) after {tries} tries")


def _out_of_time(url: str, deadline: Deadline, last: Exception | None, tries: int) -> str:
    """The deadline passed between tries: a wait that ran out says so; an error the
    server answered with is named."""
    timed_out = isinstance(last, TimeoutError) or isinstance(
        getattr(last, "reason", None), TimeoutError
    )
    if last is None or timed_out or deadline.answered_at is not None:
        return deadline.message(url)
    limit = _seconds(deadline.seconds)
    return f"{_show(url)}: {_reason(last)}, {tries} tries in {limit} s (the network time limit)"


def _reason(err: Exception | None) -> str:
    """One line for what went wrong, in the server's or the system's words."""
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code}"
    reason = getattr(err, "reason", None) or err
    text = str(reason).splitlines()[0] if str(reason).strip() else type(reason).__name__
    return text[:160]


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
    deadline: Deadline | None = None,
) -> Fetched:
    """The GGUF at `url` as a sparse local file holding only its header (every shard of
    a split model); from the cache when it has been read before. Every request shares
    one deadline (`network_timeout()` from now when none is given)."""
    name = _file_name(url)
    folder = _cache_folder(cache, url)
    meta = folder / "source.json"
    first = folder / name
    if meta.is_file() and first.is_file():
        return Fetched(first, 0)
    deadline = deadline if deadline is not None else Deadline()
    folder.mkdir(parents=True, exist_ok=True)
    base = url.rsplit("/", 1)[0]
    parts = shard_names(name)
    urls = [f"{base}/{n}" for n in parts] if parts is not None else [url]
    read = 0
    for i, shard_url in enumerate(urls):
        if progress is not None:
            progress(f"Reading the header of {_file_name(shard_url)} ({i + 1}/{len(urls)})")
        dest = folder / _file_name(shard_url)
        read += _fetch_one(shard_url, dest, token, max_bytes - read, deadline)
    meta.write_text(json.dumps({"url": url, "bytes_read": read}), encoding="utf-8")
    return Fetched(first, read)


def _fetch_one(url: str, dest: Path, token: str | None, budget: int, deadline: Deadline) -> int:
    data = b""
    total: int | None = None
    want = FIRST_READ
    while True:
        if len(data) >= budget:
            raise RemoteError(f"{_show(url)}: its header is larger than {budget >> 20} MiB")
        end = min(want, budget) - 1
        chunk, size = _get_range(url, len(data), end, token, deadline)
        total = size if size is not None else total
        data += chunk
        try:
            stop = header_end(data)
            break
        except ShortHeader:
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


def model_from_url(
    url: str, cache: Path, progress: Progress | None = None, timeout_s: float | None = None
) -> ModelSpec:
    """The model at a GGUF's URL, read within `timeout_s` (see `network_timeout`)."""
    from rigspark_gui.catalog.gguf_import import import_gguf

    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise RemoteError(f"--model-url takes an http(s) URL, got {url[:80]!r}")
    deadline = Deadline(timeout_s)
    fetched = fetch_header(url, cache, progress=progress, deadline=deadline)
    spec = import_gguf(fetched.path)
    return replace(spec, source=url)


# ---------------------------------------------------------------- Hugging Face


def _hf_api() -> Any:
    from huggingface_hub import HfApi

    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)


def model_from_hf(
    text: str, cache: Path, progress: Progress | None = None, timeout_s: float | None = None
) -> ModelSpec:
    """`hf:REPO[:QUANT]`: the repo's GGUF of that quantization (Q4_K_M when none is
    named, as llama.cpp's -hf does), or a native repo's config.json; the listing and
    the header read share one deadline of `timeout_s` (see `network_timeout`)."""
    from rigspark_gui.catalog.resolve import quant_in

    body = text.removeprefix("hf:")
    repo, _, quant = body.partition(":")
    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", repo):
        raise RemoteError(f"{repo!r} is not a Hugging Face repository (owner/name)")
    index = _cache_folder(cache, f"hf:{body}") / "choice.json"
    deadline = Deadline(timeout_s)
    try:
        files = _hf_files(repo, deadline)
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
        return _native(repo, url, cache, token, deadline)
    fetched = fetch_header(url, cache, token=token, progress=progress, deadline=deadline)
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


def _hf_files(repo: str, deadline: Deadline) -> list[str]:
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
    )

    try:
        return _within(deadline, lambda: list(_hf_api().list_repo_files(repo, token=_hf_token())))
    except _Expired:
        raise RemoteError(
            f"{repo}: Hugging Face did not list the repository in "
            f"{_seconds(deadline.seconds)} s (the network time limit)"
        ) from None
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


def _within(deadline: Deadline, call: Callable[[], list[str]]) -> list[str]:
    """`call()` on a daemon thread, waited for until the deadline (huggingface_hub's own
    HTTP client has per-read timeouts only); _Expired when it is still running then."""
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as err:  # handed to the caller's thread
            box["error"] = err

    thread = threading.Thread(target=run, name="rigspark-hf-list", daemon=True)
    thread.start()
    thread.join(max(deadline.remaining(), 0))
    if thread.is_alive():
        raise _Expired
    if "error" in box:
        raise box["error"]
    return list(box["value"])


def _native(repo: str, url: str, cache: Path, token: str | None, deadline: Deadline) -> ModelSpec:
    from rigspark_gui.catalog.hf_import import import_hf_config

    folder = _cache_folder(cache, f"hf-config:{repo}")
    path = folder / "config.json"
    if not path.is_file():
        body, _ = _get_range(url, 0, (4 << 20) - 1, token, deadline)
        folder.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    result = import_hf_config(path)
    spec: ModelSpec = getattr(result, "spec", result)
    return replace(spec, hf_repo=repo, source=f"hf:{repo}")
