"""Projectors through the catalog and the CLI: data/projectors.json, an mmproj GGUF read
like a model header (local, remote over HTTP ranges, hostile), `--mmproj`, `--text-only`
(llama.cpp's `--no-mmproj`), `--no-mmproj-offload` and the JSON's `projector_bytes`."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from gguf import GGUFWriter

from rigspark_gui.catalog.mmproj import read_projector
from rigspark_gui.catalog.projectors import catalog_projectors, load_projectors
from rigspark_gui.cli import main
from rigspark_gui.core.errors import CatalogError, ModelImportError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

from mmproj_synth import MmprojSynth, weight_bytes, write_mmproj  # noqa: E402

SMALL = MmprojSynth("small", 256, 1024, 4, 2, 448, 14, 4096)  # feeds a 4096-wide model
RIG = {
    "schema_version": 1,
    "name": "one 24 GB card",
    "gpus": [
        {
            "name": "NVIDIA GeForce RTX 3090",
            "memory_total_bytes": 25769803776,
            "memory_free_bytes": 25283264512,
        }
    ],
    "ram_total_bytes": 68719476736,
}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def rig(tmp_path: Path) -> Path:
    path = tmp_path / "rig.json"
    path.write_text(json.dumps(RIG))
    return path


@pytest.fixture
def mmproj(tmp_path: Path) -> Path:
    path = tmp_path / "mmproj-small-f16.gguf"
    write_mmproj(SMALL, path)
    return path


def test_the_catalog_lists_gemma3s_projector_with_its_files() -> None:
    entry = catalog_projectors()["gemma-3-27b-it"]
    assert entry.projector is not None
    assert entry.projector.projector_type == "gemma3" and entry.projector.projection_dim == 5376
    # the published file: these weights plus 25,056 bytes of header, as for the 4B
    ggml = next(f for f in entry.files if f.repo == "ggml-org/gemma-3-27b-it-GGUF")
    assert ggml.file_bytes == entry.projector.weights_bytes + 25_056
    four = catalog_projectors()["gemma-3-4b-it"]
    assert four.projector is not None
    assert round(four.projector.weights_bytes / (1 << 20), 2) == 811.79  # llama.cpp#22790
    assert catalog_projectors()["mistral-small-3.1-24b-instruct-2503"].projector is None


def test_a_malformed_projector_list_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "projectors.json"
    bad.write_text(json.dumps({"schema_version": 1, "projectors": {"x": {"files": []}}}))
    with pytest.raises(CatalogError, match=r"projectors.json: .*files"):
        load_projectors(bad)


def test_an_mmproj_header_reads_like_a_model_header(mmproj: Path) -> None:
    p = read_projector(mmproj)
    assert p.projector_type == "gemma3" and p.n_embd == 256 and p.n_layer == 2
    assert p.weights_bytes == weight_bytes(SMALL)  # every tensor's ggml_nbytes
    assert p.projection_dim == 4096 and p.warmup_image_size == 448 and p.n_merge == 4


def _hostile(path: Path, **keys: object) -> Path:
    w = GGUFWriter(str(path), "clip")
    for key, value in keys.items():
        name = key.replace("__", ".")
        if isinstance(value, bool):
            w.add_bool(name, value)
        elif isinstance(value, int):
            w.add_uint32(name, value)
        else:
            w.add_string(name, str(value))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_hostile_or_foreign_headers_are_one_line(tmp_path: Path, mmproj: Path) -> None:
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + b"\xff" * 64)
    with pytest.raises(ModelImportError):
        read_projector(garbage)
    huge = _hostile(
        tmp_path / "huge.gguf",
        clip__has_vision_encoder=True,
        clip__projector_type="gemma3",
        clip__vision__embedding_length=4_000_000,
    )
    with pytest.raises(ModelImportError, match="out of range"):
        read_projector(huge)
    model = tmp_path / "model.gguf"
    w = GGUFWriter(str(model), "llama")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ModelImportError, match="not a projector"):
        read_projector(model)


def test_plan_with_mmproj_shows_projector_bytes_and_text_only_drops_them(
    capsys: pytest.CaptureFixture[str], rig: Path, mmproj: Path
) -> None:
    base = ("plan", "--model", "llama-3.1-8b-instruct", "--rig", str(rig), "--json")
    code, out, err = run(capsys, *base, "--kv-compare", "none", "--mmproj", str(mmproj))
    assert code == 0, err
    data = json.loads(out)
    gpu = next(d for d in data["device_loads"] if d["device"] == "gpu:0")
    assert data["projector"]["device"] == "gpu:0"
    assert (
        gpu["projector_bytes"]
        == data["projector"]["weights_bytes"] + (data["projector"]["compute_bytes"])
    )
    code, out, err = run(
        capsys, *base, "--kv-compare", "none", "--mmproj", str(mmproj), "--no-mmproj"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["projector"] is None and data["settings"]["text_only"] is True
    assert all(d["projector_bytes"] == 0 for d in data["device_loads"])
    code, out, err = run(
        capsys, *base, "--kv-compare", "none", "--mmproj", str(mmproj), "--no-mmproj-offload"
    )
    data = json.loads(out)
    cpu = next(d for d in data["device_loads"] if d["device"] == "cpu")
    assert data["projector"]["device"] == "cpu" and cpu["projector_bytes"] > 0


def test_a_catalog_vision_model_plans_its_projector(
    capsys: pytest.CaptureFixture[str], rig: Path
) -> None:
    argv = ("plan", "--model", "gemma-3-27b-it", "--rig", str(rig), "--kv-compare", "none")
    code, out, err = run(capsys, *argv, "--context", "8192")
    assert code in (0, 1), err
    assert "projector" in out and "mmproj-model-f16.gguf on gpu:0" in out
    code, out, _ = run(capsys, *argv, "--context", "8192", "--text-only")
    assert "Projector" not in out


def test_a_projector_for_another_model_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], rig: Path, tmp_path: Path
) -> None:
    other = tmp_path / "mmproj-2560.gguf"
    write_mmproj(MmprojSynth("w", 256, 1024, 4, 2, 448, 14, 2560), other)
    argv = ("plan", "--model", "llama-3.1-8b-instruct", "--rig", str(rig), "--mmproj", str(other))
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "2560-wide" in err


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    file: Path


class _Ranges(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        data = self.server.file.read_bytes()
        rng = self.headers.get("Range", "bytes=0-")
        a, b = rng.removeprefix("bytes=").split("-")
        start, end = int(a), min(int(b or len(data) - 1), len(data) - 1)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self.wfile.write(data[start : end + 1])


@pytest.fixture
def served(mmproj: Path) -> Iterator[str]:
    srv = _Server(("127.0.0.1", 0), _Ranges)
    srv.file = mmproj
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/{mmproj.name}"
    finally:
        srv.shutdown()


def test_a_remote_mmproj_is_read_with_ranges(
    capsys: pytest.CaptureFixture[str], rig: Path, served: str
) -> None:
    argv = ("plan", "--model", "llama-3.1-8b-instruct", "--rig", str(rig), "--json")
    code, out, err = run(capsys, *argv, "--kv-compare", "none", "--mmproj", served)
    assert code == 0, err
    assert json.loads(out)["projector"]["weights_bytes"] == weight_bytes(SMALL)


def test_a_pasted_command_lines_projector_grows_fits_margin(
    capsys: pytest.CaptureFixture[str], rig: Path, tmp_path: Path
) -> None:
    from synth import Synth, write_gguf

    text = tmp_path / "text.gguf"
    write_gguf(Synth("t", "llama", 2, 512, 8, 2, 1536, 4096), text)
    proj = tmp_path / "mmproj.gguf"
    write_mmproj(MmprojSynth("p", 256, 1024, 4, 2, 896, 14, 512), proj)
    base = ("fit", "--rig", str(rig), "--json", "--", "llama-server", "-m", str(text))

    def margin(*extra: str) -> int:
        code, out, err = run(capsys, *base, *extra)
        assert code == 0, err
        data = json.loads(out)
        assert data["unmodelled"] == []  # the projector flags are understood
        return int(data["devices"][0]["margin_bytes"])

    plain = margin()
    with_mm = margin("--mmproj", str(proj))
    # llama-server: fit_params_target += weights + compute at warm-up (35.85 MiB logged by
    # b11434 for this projector, validation/projector_b11434.json row s896-e256)
    assert with_mm - plain == read_projector(proj).weights_bytes + 28 * (1 << 20)
    assert round((with_mm - plain) / (1 << 20), 2) == 35.85
    assert margin("--mmproj", str(proj), "--no-mmproj") == plain
    assert margin("-mm", str(proj), "--no-mmproj-offload") == plain


def test_the_report_shows_projector_and_draft_columns(
    qapp, capsys: pytest.CaptureFixture[str], rig: Path, tmp_path: Path
) -> None:
    # `qapp`: the report draws its charts with Qt; a QApplication made first keeps the
    # process able to open windows in later tests
    out_md = tmp_path / "plan.md"
    argv = ("export", "--model", "gemma-3-27b-it", "--rig", str(rig), "--context", "8192")
    code, _, err = run(
        capsys, *argv, "--model-draft", "gemma-3-1b-it", "--format", "md", "-o", str(out_md)
    )
    assert code == 0, err
    text = out_md.read_text()
    assert "| Projector | Draft model |" in text


def test_a_url_of_another_scheme_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], rig: Path
) -> None:
    code, out, err = run(capsys, "plan", "--model", "gemma-3-27b-it", "--rig", str(rig),
                         "--mmproj", "ftp://example.org/mmproj.gguf")  # fmt: skip
    assert code == 2 and not out
    assert err.count("\n") == 1 and "http(s) URL" in err
