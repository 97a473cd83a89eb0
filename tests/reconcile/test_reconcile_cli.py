"""`rigspark-plan reconcile LOG`: the real log's buffers per device, as text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rigspark_gui import cli, cli_commands_plan
from rigspark_gui.formats.model_spec import read_model_spec

DATA = Path(__file__).parent / "data"


@pytest.fixture
def model_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The log's model stands in a file here; reading it gives the recorded header."""
    spec = read_model_spec(json.loads((DATA / "llama3-gqa-Q4_K_M.spec.json").read_text()))
    path = tmp_path / "llama3-gqa-Q4_K_M.gguf"
    path.write_bytes(b"GGUF")
    real = cli_commands_plan.load_model

    def load(args):  # type: ignore[no-untyped-def]
        if getattr(args, "model_file", None) == path:
            return spec
        return real(args)

    monkeypatch.setattr(cli_commands_plan, "load_model", load)
    return path


def test_reconcile_prints_every_buffer_per_device(capsys, model_file: Path) -> None:
    log = str(DATA / "llama_cpp_load.log")
    rig = ["--rig", "examples/rig-cpu-only.json"]
    assert cli.main(["reconcile", log, "--model-file", str(model_file), *rig]) == 0
    out = capsys.readouterr().out
    for kind in ("weights", "KV", "compute", "output"):
        assert f"cpu     {kind}" in out
    assert cli.main(["reconcile", log, "--model-file", str(model_file), *rig, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema_version"] == 1
    matched = {r["kind"] for r in data["rows"] if r["status"] == "match"}
    assert {"model", "kv", "output"} <= {k.lower() for k in matched}


def test_a_log_whose_model_is_not_here_asks_for_it(capsys) -> None:
    log = str(DATA / "llama_cpp_load.log")
    assert cli.main(["reconcile", log, "--rig", "examples/rig-cpu-only.json"]) == 2
    err = capsys.readouterr().err
    assert "is not on this computer: name the model with --model or --model-file" in err


def test_a_log_with_nothing_usable_is_one_line(capsys, tmp_path: Path) -> None:
    junk = tmp_path / "junk.log"
    junk.write_text("hello\nnothing here\n")
    assert cli.main(["reconcile", str(junk), "--rig", "examples/rig-cpu-only.json"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_window_reconciles_a_log_with_the_model_on_screen(qtbot, tmp_path, monkeypatch) -> None:
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QFileDialog

    from rigspark_gui.catalog.gpu_database import load_gpu_database
    from rigspark_gui.catalog.rig_file import load_rig
    from rigspark_gui.resources import data_file
    from rigspark_gui.ui import background, dialogs
    from rigspark_gui.ui.main_window import MainWindow

    monkeypatch.setattr(background, "POOL", background.SyncPool())
    monkeypatch.setattr(dialogs, "HEADLESS", True)
    dialogs.shown.clear()
    rig = load_rig(Path("examples/rig-cpu-only.json"), load_gpu_database(data_file("gpus.json")))
    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=rig, detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    spec = read_model_spec(json.loads((DATA / "llama3-gqa-Q4_K_M.spec.json").read_text()))
    w.session.add_model(spec)
    w.session.set_model(spec.id)
    log = DATA / "llama_cpp_load.log"
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a: (str(log), "")))
    w.reconcile_action.trigger()
    text = w.text_view.toPlainText()
    assert "is not on this computer: compared with" in text
    assert "match" in text and "KV" in text
    assert dialogs.shown == []
