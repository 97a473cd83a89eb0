"""The models already on this computer, found in a fake HOME laid out as Ollama, LM
Studio, the Hugging Face cache and llama.cpp's cache lay out their files."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from importer_helpers import Dims, decoder_kv, decoder_tensors, write_gguf

from rigspark_gui.catalog.local_models import find_by_id, find_local_models, read_all
from rigspark_gui.cli import main
from rigspark_gui.core.errors import CatalogError

LLAMA_CONFIG = {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "max_position_embeddings": 131072, "vocab_size": 128256, "tie_word_embeddings": False,
}  # fmt: skip


def _gguf(path: Path) -> Path:
    d = Dims(n_layer=2, n_embd=64, n_head=2, n_head_kv=1, head_dim=32, n_ff=128, n_vocab=16)
    path.parent.mkdir(parents=True, exist_ok=True)
    kv = decoder_kv("llama", d)
    kv["general.name"] = "Tiny"
    return write_gguf(path, "llama", kv, decoder_tensors(d, wtype="Q8_0")).path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    src = _gguf(tmp_path / "src" / "tiny-Q8_0.gguf")
    data = src.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    # Ollama: a manifest per tag, the model layer's blob by digest
    store = home / ".ollama" / "models"
    (store / "blobs").mkdir(parents=True)
    (store / "blobs" / f"sha256-{digest}").write_bytes(data)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}",
             "size": len(data)},
            {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + "0" * 64,
             "size": 10},
        ],
    }  # fmt: skip
    for rel in ("registry.ollama.ai/library/tiny/latest", "hf.co/someone/Tiny-GGUF/Q8_0"):
        path = store / "manifests" / rel
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(manifest))
    broken = store / "manifests" / "registry.ollama.ai" / "library" / "broken" / "latest"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    # LM Studio: publisher/repo/file.gguf
    lms = home / ".lmstudio" / "models" / "lmstudio-community" / "Tiny-GGUF"
    lms.mkdir(parents=True)
    shutil.copy(src, lms / "Tiny-Q8_0.gguf")
    (lms / "mmproj-Tiny-F16.gguf").write_bytes(b"a projector, not a model")
    # the Hugging Face cache: snapshots link into blobs; a native checkpoint beside
    hub = home / ".cache" / "huggingface" / "hub"
    repo = hub / "models--someone--Tiny-GGUF"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / digest).write_bytes(data)
    snap = repo / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "Tiny-Q8_0.gguf").symlink_to(repo / "blobs" / digest)
    native = hub / "models--meta-llama--Llama-3.1-8B-Instruct" / "snapshots" / "def456"
    native.mkdir(parents=True)
    (native / "config.json").write_text(json.dumps(LLAMA_CONFIG))
    (native / "model-00001-of-00004.safetensors").write_bytes(b"\0" * 64)
    # llama.cpp's cache, with a file that only looks like a GGUF
    cache = home / ".cache" / "llama.cpp"
    cache.mkdir(parents=True)
    shutil.copy(src, cache / "someone_Tiny-GGUF_Tiny-Q8_0.gguf")
    (cache / "garbage.gguf").write_bytes(b"GGUF" + b"\xff" * 60)
    return home


def test_every_store_is_found_and_read_from_its_header(home: Path) -> None:
    scan = find_local_models(env={}, home=home)
    by_store = {(m.store, m.name) for m in scan.found}
    assert by_store == {
        ("Ollama", "tiny:latest"),
        ("Ollama", "hf.co/someone/Tiny-GGUF:Q8_0"),
        ("LM Studio", "lmstudio-community/Tiny-GGUF/Tiny-Q8_0.gguf"),
        ("Hugging Face cache", "someone/Tiny-GGUF/Tiny-Q8_0.gguf"),
        ("Hugging Face cache", "meta-llama/Llama-3.1-8B-Instruct"),
        ("llama.cpp cache", "someone_Tiny-GGUF_Tiny-Q8_0.gguf"),
        ("llama.cpp cache", "garbage.gguf"),
    }
    assert any("broken" in s and "unreadable manifest" in s for s in scan.skipped)
    specs, skipped = read_all(scan)
    assert any(s.startswith(str(home / ".cache" / "llama.cpp" / "garbage.gguf")) for s in skipped)
    ids = {s.id for s in specs}
    assert "ollama:tiny:latest" in ids and "hfcache:meta-llama/Llama-3.1-8B-Instruct" in ids
    tiny = next(s for s in specs if s.id == "ollama:tiny:latest")
    assert tiny.ollama_tag == "tiny:latest" and tiny.file_quant == "Q8_0"
    assert tiny.family == "On this computer"
    native = next(s for s in specs if s.id.startswith("hfcache:meta-llama"))
    assert native.geometry.n_layer == 32 and native.hf_repo == "meta-llama/Llama-3.1-8B-Instruct"


def test_tool_locations_follow_their_environment_variables(home: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"
    shutil.move(home / ".ollama" / "models", moved)
    assert not any(m.store == "Ollama" for m in find_local_models(env={}, home=home).found)
    found = find_local_models(env={"OLLAMA_MODELS": str(moved)}, home=home).found
    assert any(m.name == "tiny:latest" for m in found)


def test_a_folder_the_user_adds(tmp_path: Path) -> None:
    _gguf(tmp_path / "mine" / "deep" / "a-Q8_0.gguf")
    found = find_local_models(env={}, home=tmp_path / "nohome", folders=[tmp_path / "mine"]).found
    assert [m.store for m in found] == ["folder"]


@pytest.fixture
def as_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OLLAMA_MODELS", "HF_HOME", "HF_HUB_CACHE", "LLAMA_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    return home


def test_cli_lists_them_and_plans_one_with_its_real_name(capsys, as_home: Path) -> None:
    assert main(["models", "--local", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    names = {m["name"] for m in out["models"]}
    assert "tiny:latest" in names and "meta-llama/Llama-3.1-8B-Instruct" in names
    assert any("garbage.gguf" in s for s in out["skipped"])
    rig = ["--rig", "examples/rig-2x3090.json", "--json"]
    assert main(["place", "--model", "ollama:tiny:latest", *rig]) == 0
    commands = {c["engine"]: c for c in json.loads(capsys.readouterr().out)["launch_commands"]}
    assert commands["ollama"]["argv"] == ["ollama", "run", "tiny:latest"]  # in Ollama's store
    assert (
        main(["place", "--model", "lmstudio:lmstudio-community/Tiny-GGUF/Tiny-Q8_0.gguf", *rig])
        == 0
    )
    commands = {c["engine"]: c for c in json.loads(capsys.readouterr().out)["launch_commands"]}
    model_arg = commands["llama.cpp"]["argv"][commands["llama.cpp"]["argv"].index("-m") + 1]
    assert model_arg == str(
        as_home / ".lmstudio/models/lmstudio-community/Tiny-GGUF/Tiny-Q8_0.gguf"
    )


def test_an_unknown_local_id_names_what_is_there(as_home: Path) -> None:
    with pytest.raises(CatalogError, match=r"no model 'ollama:nope'.*ollama:tiny:latest"):
        find_by_id("ollama:nope")


def test_the_window_lists_them_first_and_plans_one(
    qtbot, as_home: Path, tmp_path, monkeypatch
) -> None:
    from PySide6.QtCore import QSettings

    from rigspark_gui.ui import background
    from rigspark_gui.ui.main_window import MainWindow
    from rigspark_gui.ui.model_picker import ID_ROLE

    monkeypatch.setattr(background, "POOL", background.SyncPool())
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    from rigspark_gui.catalog.rig_file import load_rig

    w = MainWindow(rig=load_rig(Path("examples/rig-2x3090.json"), None), detect_on_start=False,
                   settings=settings)  # fmt: skip
    qtbot.addWidget(w)
    w.scan_local_models()
    picker = w.controls.model_picker
    assert picker.itemText(0) == "— On this computer —"
    ids = [picker.itemData(i, ID_ROLE) for i in range(picker.count())]
    assert "ollama:tiny:latest" in ids[:8]
    assert "skipped" in w.statusBar().currentMessage()
    picker.setCurrentIndex(ids.index("ollama:tiny:latest"))
    picker.activated.emit(ids.index("ollama:tiny:latest"))
    assert w.session.spec.ollama_tag == "tiny:latest"
    assert w.session.plan is not None and w.session.plan.recommended is not None


def test_a_folder_that_is_not_there_is_one_line(capsys, tmp_path: Path) -> None:
    assert main(["models", "--local", "--folder", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such folder" in err


def test_split_models_are_listed_once_with_every_part_counted(tmp_path: Path) -> None:
    from rigspark_gui.catalog.gguf_names import is_first_shard, shard_names

    folder = tmp_path / "split"
    folder.mkdir()
    for i in (1, 2, 3):
        (folder / f"big-Q4_K_M-{i:05d}-of-00003.gguf").write_bytes(b"x" * (100 * i))
    found = find_local_models(env={}, home=tmp_path / "nohome", folders=[folder]).found
    assert [m.path.name for m in found] == ["big-Q4_K_M-00001-of-00003.gguf"]
    assert found[0].size_bytes == 600
    assert shard_names("a.gguf") is None and is_first_shard("a.gguf")
    assert not is_first_shard("big-Q4_K_M-00002-of-00003.gguf")
