"""`models --update` against a local Hugging Face stand-in (HF_ENDPOINT): configs read,
validated like shipped entries, kept in the user cache and merged under the catalog."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rigspark_gui.catalog import update
from rigspark_gui.catalog.models import load_catalog, resolve_model
from rigspark_gui.catalog.update import Source, run_update

CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 262144,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}
REPOS = {
    "someone/Tiny-Updated-4B": {"config.json": json.dumps(CONFIG).encode()},
    "someone/Tiny-Updated-4B-GGUF": {
        "Tiny-Updated-4B-Q4_K_M.gguf": 2_497_280_960,
        "Tiny-Updated-4B-UD-Q4_K_XL.gguf": 2_600_000_000,
        "Q8_0/Tiny-Updated-4B-Q8_0-00001-of-00002.gguf": 3_000_000_000,
        "Q8_0/Tiny-Updated-4B-Q8_0-00002-of-00002.gguf": 1_280_000_000,
    },
    "someone/Odd-Arch": {"config.json": json.dumps({"model_type": "mamba"}).encode()},
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path.startswith("/api/models/"):
            repo = path.removeprefix("/api/models/").split("/tree/")[0]
            if repo.startswith("gated/"):
                return self._send(403, headers={"X-Error-Code": "GatedRepo"})
            files = REPOS.get(repo)
            if files is None:
                return self._send(404, headers={"X-Error-Code": "RepoNotFound"})
            listing = [
                {"type": "file", "path": name, "oid": "0" * 40,
                 "size": body if isinstance(body, int) else len(body)}
                for name, body in files.items()
            ]  # fmt: skip
            body = json.dumps(listing).encode()
            return self._send(200, body, {"Content-Type": "application/json"})
        repo, _, name = path.lstrip("/").partition("/resolve/main/")
        config = REPOS.get(repo, {}).get(name)
        if not isinstance(config, bytes):
            return self._send(404)
        self._send(206, config, {"Content-Range": f"bytes 0-{len(config) - 1}/{len(config)}"})


@pytest.fixture
def hub(monkeypatch) -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    yield url
    srv.shutdown()
    srv.server_close()


SOURCES = (
    Source("someone/Tiny-Updated-4B", "someone/Tiny-Updated-4B-GGUF"),
    Source("gated/Secret-7B"),
    Source("someone/Missing-1B"),
    Source("someone/Odd-Arch"),
)


def test_update_reads_validates_keeps_and_merges(hub: str) -> None:
    seen: list[tuple[int, int, str]] = []
    result = run_update(SOURCES, progress=lambda d, t, r: seen.append((d, t, r)), timeout_s=10)
    assert result.added == ("tiny-updated-4b",)
    assert seen[0] == (0, 4, "someone/Tiny-Updated-4B") and seen[-1] == (4, 4, "")
    # one line per repository that gave nothing, naming it and why
    assert len(result.errors) == 3
    gated, missing, odd = result.errors
    assert "gated/Secret-7B is gated" in gated and "\n" not in gated
    assert "no Hugging Face repository someone/Missing-1B" in missing
    assert "not supported yet: mamba" in odd
    # kept in the user cache and merged under the shipped catalog
    assert result.path is not None and result.path.is_file()
    catalog = load_catalog()
    entry = catalog.find("tiny-updated-4b")
    assert entry.geometry.n_layer == 36 and entry.geometry.tied_embeddings
    # standard quantizations' published sizes, split files summed, dynamic mixes left out
    assert entry.published["Q4_K_M"].file_bytes == 2_497_280_960
    assert entry.published["Q8_0"].file_bytes == 4_280_000_000
    assert not any(q.startswith("UD-") for q in entry.published)
    assert resolve_model("someone/Tiny-Updated-4B").spec.id == "tiny-updated-4b"
    assert "tiny-updated-4b" not in {e.id for e in load_catalog(updates=False).entries}


def test_update_can_be_cancelled_before_any_read(hub: str) -> None:
    result = run_update(SOURCES, cancelled=lambda: True, timeout_s=10)
    assert result.cancelled and result.added == () and result.path is None


def test_a_shipped_entry_is_never_replaced_by_an_update(hub: str, monkeypatch) -> None:
    monkeypatch.setitem(REPOS, "Qwen/Qwen3-4B", {"config.json": json.dumps(CONFIG).encode()})
    shipped = load_catalog(updates=False).find("qwen3-4b")
    run_update((Source("Qwen/Qwen3-4B"),), timeout_s=10)
    assert load_catalog().find("qwen3-4b") == shipped


def test_offline_by_default_and_stale_after_six_months(monkeypatch) -> None:
    # nothing is read unless asked: a plain load has no updates and touches no network
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert update.load_updates() is None
    when = update.shipped_date()
    assert when is not None
    assert not update.is_stale(when)
    assert update.is_stale(datetime(when.year + 1, when.month, 1, tzinfo=UTC))


def test_the_window_update_shows_progress_can_cancel_and_adds_models(
    qtbot, hub: str, monkeypatch
) -> None:
    from rigspark_gui.core.speed import SpeedModel
    from rigspark_gui.ui import catalog_update_dialog as dialog
    from rigspark_gui.ui.session import PlannerSession

    monkeypatch.setattr(dialog, "CURATED", SOURCES)
    monkeypatch.setattr(dialog, "run_update", lambda **kw: run_update(SOURCES, timeout_s=10, **kw))
    session = PlannerSession(list(load_catalog(updates=False).specs()), SpeedModel())
    from PySide6.QtWidgets import QWidget

    parent = QWidget()
    qtbot.addWidget(parent)
    run = dialog.CatalogUpdate(parent, session)
    labels: list[str] = []
    run.progress.moved.connect(lambda d, t, repo: labels.append(run.dialog.labelText()))
    with qtbot.waitSignal(run.finished, timeout=30000) as done:
        run.start()
    result = done.args[0]
    assert result.added == ("tiny-updated-4b",)
    assert any("someone/Tiny-Updated-4B" in text and "1 of 4" in text for text in labels)
    assert session.spec_by_id("tiny-updated-4b") is not None  # joins the picker's models
    text = dialog.summary(result)
    assert "1 models read and added: tiny-updated-4b." in text and "gated" in text
    # Cancel (the dialog's button) stops before the next repository
    stopped = dialog.CatalogUpdate(parent, session)
    stopped.dialog.canceled.emit()  # pressed before the first repository is read
    with qtbot.waitSignal(stopped.finished, timeout=30000) as done:
        stopped.start()
    assert done.args[0].cancelled and "Stopped" in dialog.summary(done.args[0])


def test_models_update_on_the_command_line(hub: str, capsys, monkeypatch) -> None:
    from rigspark_gui.cli import main

    monkeypatch.setattr(update, "CURATED", SOURCES)
    monkeypatch.setattr(update.run_update, "__defaults__", (SOURCES,))
    code = main(["models", "--update", "--json", "--network-timeout", "10"])
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert code == 0 and data["added"] == ["tiny-updated-4b"]
    assert "[1/4] reading someone/Tiny-Updated-4B" in err
    # one line per repository that gave nothing
    assert sum("gated/Secret-7B is gated" in line for line in err.splitlines()) == 1
    code = main(["models", "--json"])
    listed = [m["id"] for m in json.loads(capsys.readouterr().out)["models"]]
    assert "tiny-updated-4b" in listed


def test_an_unwritable_cache_is_one_line_and_exit_2(
    hub: str, capsys, monkeypatch, tmp_path: Path
) -> None:
    from rigspark_gui.cli import main

    blocked = tmp_path / "a-file-not-a-folder"
    blocked.write_text("x", encoding="utf-8")
    monkeypatch.setattr(update.run_update, "__defaults__", (SOURCES,))
    monkeypatch.setattr(update, "updates_path", lambda: blocked / "catalog-updates.json")
    code = main(["models", "--update", "--network-timeout", "10"])
    err = capsys.readouterr().err.strip().splitlines()
    # the repository that validates cannot be kept: said in one line, never a traceback
    assert code == 2, err
    assert str(blocked) in err[-1] and "Traceback" not in "\n".join(err)


def test_an_oversized_update_file_is_left_alone(tmp_path: Path, monkeypatch) -> None:
    big = tmp_path / "catalog-updates.json"
    with big.open("wb") as f:
        f.truncate(update.MAX_UPDATES_BYTES + 1)  # sparse: no disk used
    assert update.load_updates(big) is None
    monkeypatch.setattr(update, "updates_path", lambda: big)
    assert load_catalog().find("qwen3-4b") is not None  # the shipped catalog still loads
