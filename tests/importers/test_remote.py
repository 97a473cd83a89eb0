"""Remote models: a GGUF's header read over HTTP ranges from a local server (redirects,
401/404, truncated and slow answers, a trickle, redirect loops and chains, a server that
never answers), cached for offline plans, and Hugging Face repos listed through
huggingface_hub against the same server. Every read has one deadline."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import gguf
import numpy as np
import pytest

from rigspark_gui.catalog import remote
from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.catalog.remote import RemoteError, fetch_header, header_end
from rigspark_gui.cli import main

MIB = 1 << 20


def sparse_gguf(path: Path, n_layer: int = 32, vocab: int = 128256) -> Path:
    """A Llama-3.1-8B-shaped Q4_K GGUF of its real size (~4.6 GB) whose tensor data is a
    hole: the header is real, the disk holds a few MB. A big vocabulary makes the header
    longer than the first range read."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("Sparse 8B")
    w.add_context_length(131072)
    w.add_embedding_length(4096)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(14336)
    w.add_head_count(32)
    w.add_head_count_kv(8)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(15)  # Q4_K_M
    w.add_token_list([f"token-{i:06d}" for i in range(vocab)])
    q4k = gguf.GGMLQuantizationType.Q4_K
    q6k = gguf.GGMLQuantizationType.Q6_K
    f32 = gguf.GGMLQuantizationType.F32

    def add(name: str, ne: tuple[int, ...], qt: gguf.GGMLQuantizationType) -> None:
        """ne in ggml's order (row length first); the writer takes numpy's byte shape."""
        block, size = gguf.GGML_QUANT_SIZES[qt]
        byte_shape = (*ne[:0:-1], ne[0] // block * size)
        nbytes = int(np.prod(byte_shape))
        w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qt)

    add("token_embd.weight", (4096, vocab), q4k)
    for il in range(n_layer):
        p = f"blk.{il}."
        add(p + "attn_norm.weight", (4096,), f32)
        add(p + "attn_q.weight", (4096, 4096), q4k)
        add(p + "attn_k.weight", (4096, 1024), q4k)
        add(p + "attn_v.weight", (4096, 1024), q6k)
        add(p + "attn_output.weight", (4096, 4096), q4k)
        add(p + "ffn_norm.weight", (4096,), f32)
        add(p + "ffn_gate.weight", (4096, 14336), q4k)
        add(p + "ffn_up.weight", (4096, 14336), q4k)
        add(p + "ffn_down.weight", (14336, 4096), q6k)
    add("output_norm.weight", (4096,), f32)
    add("output.weight", (4096, vocab), q6k)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    head = path.stat().st_size
    total = head + sum(ti.nbytes for ti in w.tensors[0].values()) + 32 * 1000
    with open(path, "r+b") as f:
        f.truncate(total)
    return path


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    files: dict[str, Path]
    served: int
    log: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.log.append(self.path)
        if self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", "/cdn/" + self.path.removeprefix("/redirect/"))
            self.end_headers()
            return
        if self.path.startswith("/loop/"):  # A → B → A …
            other = "b" if self.path.startswith("/loop/a/") else "a"
            name = self.path.rsplit("/", 1)[-1]
            return self._redirect(f"/loop/{other}/{name}")
        if self.path.startswith("/chain/"):  # /chain/0 → /chain/1 → … (never ends)
            step = int(self.path.split("/")[2])
            return self._redirect(f"/chain/{step + 1}/{self.path.rsplit('/', 1)[-1]}")
        if self.path.startswith("/trickle/"):
            return self._trickle()
        if self.path.startswith("/fail/"):  # a slow 500, every time
            time.sleep(0.3)
            self.send_error(500)
            return
        if self.path.startswith("/gated/"):
            self.send_error(401)
            return
        if self.path.startswith("/api/models/"):
            return self._tree()
        name = self.path.rsplit("/", 1)[-1]
        path = self.server.files.get(name)
        if path is None:
            self.send_error(404)
            return
        size = path.stat().st_size
        start, end = 0, size - 1
        rng = self.headers.get("Range")
        if rng and not self.path.startswith("/norange/"):
            a, b = rng.removeprefix("bytes=").split("-")
            start, end = int(a), min(int(b), size - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        else:
            self.send_response(200)
        length = end - start + 1
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.path.startswith("/truncated/"):
            length = min(length, 1000)
        with open(path, "rb") as f:
            f.seek(start)
            left = length
            while left > 0:
                chunk = f.read(min(left, 1 << 16))
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return
                self.server.served += len(chunk)
                left -= len(chunk)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _trickle(self) -> None:
        """Headers at once, then one byte a second (a GGUF's first bytes), for a minute."""
        self.send_response(206)
        self.send_header("Content-Range", f"bytes 0-{MIB - 1}/{4 * MIB}")
        self.send_header("Content-Length", str(MIB))
        self.end_headers()
        for byte in (b"GGUF" + bytes(60))[:60]:
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return
            time.sleep(1.0)

    def _tree(self) -> None:
        # huggingface_hub's list_repo_tree: /api/models/{repo}/tree/{revision}
        repo = self.path.removeprefix("/api/models/").split("/tree/")[0]
        if repo.startswith("gated"):
            self.send_response(403)
            self.send_header("X-Error-Code", "GatedRepo")
            self.send_header("X-Error-Message", "Access to model is restricted.")
            self.end_headers()
            return
        if repo != "someone/Sparse-8B-GGUF":
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.end_headers()
            return
        body = json.dumps(
            [
                {"type": "file", "path": name, "size": p.stat().st_size, "oid": "0" * 40}
                for name, p in self.server.files.items()
            ]
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sparse_gguf(tmp_path_factory.mktemp("sparse") / "Sparse-8B-Q4_K_M.gguf")


@pytest.fixture
def server(big: Path) -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.files = {big.name: big}
    srv.served = 0
    srv.log = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv: _Server, path: str) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/{path}"


def test_header_end_needs_the_whole_header(big: Path) -> None:
    head = big.read_bytes()[: 8 * MIB]
    end = header_end(head)
    assert 1 * MIB < end < 8 * MIB  # the vocabulary pushes it past the first read
    with pytest.raises(remote.ShortHeader):
        header_end(head[: end // 2])


def test_a_sparse_multi_gb_gguf_plans_from_its_url_reading_under_16_mib(
    server: _Server, big: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    assert big.stat().st_size > 4_000_000_000
    monkeypatch.setenv("RIGSPARK_CACHE_DIR", str(tmp_path / "cache"))
    rig = ["--rig", "examples/rig-2x3090.json", "--json"]
    assert main(["plan", "--model-url", _url(server, "redirect/" + big.name), *rig]) == 0
    by_url = json.loads(capsys.readouterr().out)
    assert server.served < 16 * MIB
    assert main(["plan", "--model-file", str(big), *rig]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert by_url["paths"] == by_file["paths"]  # the same bytes, to the byte
    # a second plan needs no server
    server.shutdown()
    assert main(["plan", "--model-url", _url(server, "redirect/" + big.name), *rig]) == 0
    assert json.loads(capsys.readouterr().out)["paths"] == by_file["paths"]


def test_a_server_that_ignores_ranges_is_read_only_as_far_as_needed(
    server: _Server, big: Path, tmp_path: Path
) -> None:
    fetched = fetch_header(_url(server, "norange/" + big.name), tmp_path)
    assert import_gguf(fetched.path).geometry.n_layer == 32
    assert fetched.bytes_read < 16 * MIB


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("gated/x.gguf", "access denied (HTTP 401); a gated or private model needs a token"),
        ("missing.gguf", "not found (HTTP 404)"),
        ("truncated/Sparse-8B-Q4_K_M.gguf", "ended early"),
        ("trickle/Sparse-8B-Q4_K_M.gguf", "the server sent"),
        ("loop/a/Sparse-8B-Q4_K_M.gguf", "redirects loop at"),
        ("chain/0/Sparse-8B-Q4_K_M.gguf", "more than 10 redirects"),
    ],
)
def test_http_failures_are_one_sentence(
    server: _Server, tmp_path: Path, path: str, message: str, monkeypatch
) -> None:
    monkeypatch.setattr(remote, "RETRIES", 1)
    monkeypatch.setenv("RIGSPARK_NETWORK_TIMEOUT", "2")
    with pytest.raises(RemoteError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        fetch_header(_url(server, path), tmp_path)
    assert "\n" not in str(err.value)


def test_a_slow_server_times_out(tmp_path: Path, monkeypatch) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # accepts, never answers
    monkeypatch.setattr(remote, "TIMEOUT_S", 0.3)
    monkeypatch.setattr(remote, "RETRIES", 2)
    port = listener.getsockname()[1]
    with pytest.raises(RemoteError, match=r"could not read it .* after 2 tries"):
        fetch_header(f"http://127.0.0.1:{port}/slow.gguf", tmp_path)
    listener.close()


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that accepts the connection and never says a word."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/silent.gguf"
    listener.close()


HOSTILE_SERVERS = {
    "trickle": ("trickle/Sparse-8B-Q4_K_M.gguf", r": the server sent \d+ bytes? in 2 s \("),
    "never answers": ("", r"silent\.gguf: no answer in 2 s \(the network time limit\)"),
    "redirect loop": ("loop/a/Sparse-8B-Q4_K_M.gguf", r"\.gguf: redirects loop at .*/loop/a/"),
    "redirect chain": ("chain/0/Sparse-8B-Q4_K_M.gguf", r"\.gguf: more than 10 redirects$"),
}


@pytest.mark.parametrize("name", HOSTILE_SERVERS)
def test_a_hostile_server_ends_in_one_line_within_the_deadline(
    server: _Server, silent: str, tmp_path: Path, capsys, monkeypatch, name: str
) -> None:
    """A trickle, a silent server, a redirect loop and an endless chain: exit 2 and one
    line of RigSpark's own within the configured time (never the HTTP library's words)."""
    monkeypatch.setenv("RIGSPARK_CACHE_DIR", str(tmp_path / "cache"))
    path, message = HOSTILE_SERVERS[name]
    url = _url(server, path) if path else silent
    began = time.monotonic()
    argv = ["plan", "--model-url", url, "--network-timeout", "2"]
    code = main([*argv, "--rig", "examples/rig-2x3090.json", "--json"])
    took = time.monotonic() - began
    err = capsys.readouterr().err
    assert code == 2
    assert took < 10  # 2 s and the last socket wait's slack; the brief's bound is 40 s
    lines = [line for line in err.splitlines() if not line.startswith("rigspark-plan: Reading")]
    assert len(lines) == 1, err
    assert lines[0].startswith("rigspark-plan: error: "), err
    assert re.search(message, lines[0]), lines[0]
    assert "infinite loop" not in err and "30x" not in err
    if name == "redirect loop":  # refused at once, not retried
        assert len(server.log) == 2


def test_retries_share_the_deadline(silent: str, tmp_path: Path, monkeypatch) -> None:
    """Ten tries of 1 s socket waits still end at the 2 s deadline."""
    monkeypatch.setattr(remote, "TIMEOUT_S", 1.0)
    monkeypatch.setattr(remote, "RETRIES", 10)
    began = time.monotonic()
    with pytest.raises(RemoteError, match=r"no answer in 2 s"):
        remote.model_from_url(silent, tmp_path, timeout_s=2)
    assert time.monotonic() - began < 4


def test_a_server_that_keeps_failing_is_retried_only_until_the_deadline(
    server: _Server, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(remote, "RETRIES", 50)
    began = time.monotonic()
    with pytest.raises(RemoteError, match=r"/fail/x\.gguf: HTTP 500, \d+ tries in 2 s \(the"):
        remote.model_from_url(_url(server, "fail/x.gguf"), tmp_path, timeout_s=2)
    assert time.monotonic() - began < 4
    assert 2 <= len(server.log) < 10


def test_a_hugging_face_listing_that_never_comes_ends_at_the_deadline(
    tmp_path: Path, monkeypatch
) -> None:
    """huggingface_hub's own client has per-read timeouts only: the listing is waited
    for until the deadline (a stand-in that never answers, so no thread lingers on)."""
    release = threading.Event()

    class Api:
        def list_repo_files(self, repo: str, token: object = None) -> list[str]:
            release.wait(30)
            return []

    monkeypatch.setattr(remote, "_hf_api", Api)
    monkeypatch.setattr(remote, "_hf_token", lambda: None)
    began = time.monotonic()
    try:
        with pytest.raises(RemoteError, match=r"^someone/M-GGUF: Hugging Face did not list"):
            remote.model_from_hf("hf:someone/M-GGUF", tmp_path, timeout_s=2)
    finally:
        release.set()
    assert time.monotonic() - began < 4


def test_the_deadline_defaults_to_30_s_and_is_configurable(monkeypatch) -> None:
    from rigspark_gui.cli_args import build_parser

    monkeypatch.delenv("RIGSPARK_NETWORK_TIMEOUT", raising=False)
    assert remote.DEFAULT_TIMEOUT_S == 30.0
    assert remote.network_timeout() == 30.0 and remote.Deadline().seconds == 30.0
    args = build_parser(["plan"]).parse_args(["plan", "--model-url", "http://x/y.gguf"])
    assert args.network_timeout is None  # so the env var, then 30 s, decide
    monkeypatch.setenv("RIGSPARK_NETWORK_TIMEOUT", "7.5")
    assert remote.network_timeout() == 7.5
    assert remote.network_timeout(3) == 3.0  # the CLI flag wins
    for bad in ("soon", "0", "-1", "inf"):
        monkeypatch.setenv("RIGSPARK_NETWORK_TIMEOUT", bad)
        with pytest.raises(RemoteError, match=r"RIGSPARK_NETWORK_TIMEOUT|network time limit"):
            remote.network_timeout()


def test_the_token_stays_on_its_host_across_redirects(monkeypatch) -> None:
    seen: list[dict[str, str]] = []

    class Opener:
        def open(self, req, timeout):  # type: ignore[no-untyped-def]
            seen.append(dict(req.header_items()))
            if len(seen) == 1:
                import email.message
                import urllib.error

                headers = email.message.Message()
                headers["Location"] = "http://cdn.example/f.gguf"
                raise urllib.error.HTTPError(req.full_url, 302, "Found", headers, None)
            return "response"

    monkeypatch.setattr(remote.urllib.request, "build_opener", lambda *a: Opener())
    got = remote._open(
        "http://hub.example/f.gguf", {"Authorization": "Bearer t"}, remote.Deadline(5)
    )
    assert got == "response"
    assert "Authorization" in seen[0] and "Authorization" not in seen[1]


def test_not_a_gguf_is_said(server: _Server, tmp_path: Path, monkeypatch) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"<html>not a model</html>" * 100)
    server.files["junk.gguf"] = junk
    with pytest.raises(RemoteError, match="not a GGUF file"):
        fetch_header(_url(server, "junk.gguf"), tmp_path / "cache")


def test_hugging_face_repo_and_quant(
    server: _Server, big: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", _url(server, "").rstrip("/"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("RIGSPARK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_TOKEN", "")
    rig = ["--rig", "examples/rig-2x3090.json", "--json"]
    # hf_hub_url's resolve path: /{repo}/resolve/main/{file}; the server serves by name
    assert main(["plan", "--model", "hf:someone/Sparse-8B-GGUF:Q4_K_M", *rig]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["model_id"].startswith("file:")
    assert server.served < 16 * MIB
    assert main(["plan", "--model", "hf:someone/Sparse-8B-GGUF:IQ2_XS", *rig]) == 2
    assert "has no IQ2_XS GGUF (it offers Q4_K_M)" in capsys.readouterr().err
    assert main(["plan", "--model", "hf:gated-org/Model-GGUF", *rig]) == 2
    assert "gated" in capsys.readouterr().err
    assert main(["plan", "--model", "hf:nobody/Nothing", *rig]) == 2
    assert "no Hugging Face repository nobody/Nothing" in capsys.readouterr().err


def test_nothing_here_touches_the_network_unless_asked(tmp_path: Path) -> None:
    """A plan of a catalog model, a file or a local name never opens a socket."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import socket, sys
        def refuse(*a, **k):
            raise RuntimeError("network access attempted")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from rigspark_gui.cli import main
        rig = ["--rig", "examples/rig-2x3090.json", "--json"]
        for model in (["--model", "llama3.1:8b"], ["--model", "meta-llama/Llama-3.1-8B-Instruct"]):
            assert main(["plan", *model, *rig]) == 0
        assert main(["models", "--local", "--json"]) == 0
        """
    )
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_window_opens_a_remote_model_and_says_why_not(
    qtbot, server: _Server, big: Path, tmp_path: Path, monkeypatch
) -> None:
    from PySide6.QtCore import QSettings

    from rigspark_gui.catalog.rig_file import load_rig
    from rigspark_gui.ui import background, dialogs
    from rigspark_gui.ui.main_window import MainWindow

    monkeypatch.setattr(background, "POOL", background.SyncPool())
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    dialogs.shown.clear()
    monkeypatch.setenv("RIGSPARK_CACHE_DIR", str(tmp_path / "cache"))
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=load_rig(Path("examples/rig-2x3090.json"), None), detect_on_start=False,
                   settings=settings)  # fmt: skip
    qtbot.addWidget(w)
    w.open_remote(_url(server, "redirect/" + big.name))
    assert w.session.spec.name == "Sparse 8B" and w.session.plan is not None
    assert "from its header" in w.statusBar().currentMessage()
    monkeypatch.setattr(remote, "RETRIES", 1)
    w.open_remote(_url(server, "missing.gguf"))
    assert dialogs.shown[-1].title == "Open from the web"
    assert "not found (HTTP 404)" in dialogs.shown[-1].message
    monkeypatch.setenv("RIGSPARK_NETWORK_TIMEOUT", "2")  # the window's limit, as the CLI's
    w.open_remote(_url(server, "loop/a/" + big.name))
    assert "redirects loop at" in dialogs.shown[-1].message
    assert "\n" not in dialogs.shown[-1].message
