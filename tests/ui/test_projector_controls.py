"""The projector controls beside Text only: choose an mmproj file (read like `--mmproj
FILE`), go back to the catalog's, size the image the compute buffer is reserved for
(`--image-size`) and keep the projector on the CPU (`--no-mmproj-offload`), as a user
clicks and types them; bad files are one message and leave the plan as it was; the
choices are remembered; the window's projector bytes are the CLI's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QSettings, Qt
from PySide6.QtWidgets import QFileDialog

from rigspark_gui.cli import main
from rigspark_gui.core.units import human_bytes
from rigspark_gui.ui import background, dialogs
from rigspark_gui.ui.main_window import MainWindow
from tests.ui.conftest import rig_2x3090
from tests.ui.test_main_window import pick

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

from mmproj_synth import MmprojSynth, weight_bytes, write_mmproj  # noqa: E402

# a fixed-size projector feeding a 4096-wide model (Llama 3.1 8B), and one for Gemma 3
# 27B's 5376; a dynamic-resolution one (Pixtral's type: warm-up 16 x 14 = 224 px, up
# to sqrt(1024) x 14 = 448 px a side, core/memory/projector.py)
FOR_8B = MmprojSynth("small", 256, 1024, 4, 2, 448, 14, 4096)
FOR_27B = MmprojSynth("wide", 256, 1024, 4, 2, 448, 14, 5376)
DYNAMIC = MmprojSynth("dyn", 256, 1024, 4, 2, 448, 14, 4096, projector_type="pixtral", merge=1)
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


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setattr(background, "POOL", background.SyncPool())
    monkeypatch.setattr(dialogs, "HEADLESS", True)  # a message is recorded, never modal
    dialogs.shown.clear()


def _choose(qtbot, window, monkeypatch, path: Path) -> None:
    """Projector ▾ ▸ Choose file… with `path` picked in the file dialog."""
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a: (str(path), "")))
    controls = window.controls.projector
    qtbot.mouseClick(controls.button, Qt.MouseButton.LeftButton)
    assert controls.panel.isVisible()
    qtbot.mouseClick(controls.panel.choose_button, Qt.MouseButton.LeftButton)


def _type_image_size(qtbot, window, text: str) -> None:
    controls = window.controls.projector
    qtbot.mouseClick(controls.button, Qt.MouseButton.LeftButton)
    spin = controls.panel.image_size
    spin.lineEdit().selectAll()
    qtbot.keyClicks(spin.lineEdit(), text)
    qtbot.keyClick(spin.lineEdit(), Qt.Key.Key_Return)


def _paths_projector_bytes(window) -> int:
    """The projector segment of the Paths chart's multi-GPU bar (it holds GPU 0, where
    the projector goes)."""
    rows = window.paths_tab.fit_chart.spec.rows
    row = next(r for r in rows if r.label == "multi-gpu")
    return sum(s.n_bytes for s in row.segments if s.role == "projector")


def test_choose_a_projector_file_for_a_text_model_and_remove_it(
    qtbot, window, tmp_path, monkeypatch
) -> None:
    path = tmp_path / "mmproj-small-f16.gguf"
    write_mmproj(FOR_8B, path)
    pick(qtbot, window, "llama 3.1 8b")
    controls = window.controls.projector
    panel = controls.panel
    assert "none for this model" in controls.button.toolTip()
    assert not panel.image_size.isEnabled() and not panel.on_cpu.isEnabled()
    assert not panel.catalog_button.isEnabled()
    assert _paths_projector_bytes(window) == 0

    _choose(qtbot, window, monkeypatch, path)
    plan = window.session.plan
    assert window.session.spec.projector.file_name == path.name
    assert plan.projector is not None and plan.projector.weights_bytes == weight_bytes(FOR_8B)
    # what the user sees: its own segment in the Paths chart, its name and size in the tip
    assert _paths_projector_bytes(window) == plan.projector.device_bytes
    tip = controls.button.toolTip()
    assert path.name in tip and f"file {human_bytes(path.stat().st_size)}" in tip
    assert f"{human_bytes(plan.projector.device_bytes)} on gpu:0" in tip
    assert path.name in panel.file_label.text()
    assert panel.image_size.isEnabled() and panel.on_cpu.isEnabled()
    assert window.controls.text_only.isEnabled()
    assert dialogs.shown == []

    # the model came with none: the way back removes the file
    qtbot.mouseClick(controls.button, Qt.MouseButton.LeftButton)
    assert panel.catalog_button.isEnabled() and "Remove" in panel.catalog_button.text()
    qtbot.mouseClick(panel.catalog_button, Qt.MouseButton.LeftButton)
    assert window.session.spec.projector is None and window.session.plan.projector is None
    assert _paths_projector_bytes(window) == 0
    assert not panel.image_size.isEnabled()


def test_bad_projector_files_are_one_message_and_keep_the_plan(
    qtbot, window, tmp_path, monkeypatch
) -> None:
    from gguf import GGUFWriter

    pick(qtbot, window, "gemma 3 27b")
    before = window.session.plan
    catalog = window.session.spec.projector
    assert catalog is not None and before.projector is not None
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + b"\xff" * 64)
    hostile = tmp_path / "hostile.gguf"
    w = GGUFWriter(str(hostile), "clip")
    w.add_bool("clip.has_vision_encoder", True)
    w.add_string("clip.projector_type", "gemma3")
    w.add_uint32("clip.vision.embedding_length", 4_000_000)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    other = tmp_path / "mmproj-for-8b.gguf"
    write_mmproj(FOR_8B, other)  # 4096 wide: not Gemma 3 27B's 5376
    missing = tmp_path / "gone.gguf"
    for path, words in (
        (garbage, garbage.name),
        (hostile, "out of range"),
        (other, "4096-wide"),
        (missing, missing.name),
    ):
        dialogs.shown.clear()
        _choose(qtbot, window, monkeypatch, path)
        assert len(dialogs.shown) == 1, path
        shown = dialogs.shown[0]
        assert shown.title == "Projector not loaded" and words in shown.message
        assert window.session.spec.projector == catalog
        assert window.session.plan is before  # not replanned: the last good plan stays
        assert not window.problem.isVisible()
    assert "mmproj-model-f16.gguf" in window.controls.projector.button.toolTip()

    # a file that fits replaces the catalog's; "Use the catalog's projector" brings it back
    wide = tmp_path / "mmproj-wide.gguf"
    write_mmproj(FOR_27B, wide)
    _choose(qtbot, window, monkeypatch, wide)
    assert window.session.plan.projector.file_name == wide.name
    panel = window.controls.projector.panel
    qtbot.mouseClick(window.controls.projector.button, Qt.MouseButton.LeftButton)
    assert panel.catalog_button.text().replace("&", "") == "Use the catalog's projector"
    qtbot.mouseClick(panel.catalog_button, Qt.MouseButton.LeftButton)
    assert window.session.spec.projector == catalog
    assert window.session.plan.projector.device_bytes == before.projector.device_bytes


def test_image_size_and_keep_on_cpu_follow_the_projector(
    qtbot, window, tmp_path, monkeypatch
) -> None:
    path = tmp_path / "mmproj-dyn.gguf"
    write_mmproj(DYNAMIC, path)
    pick(qtbot, window, "llama 3.1 8b")
    _choose(qtbot, window, monkeypatch, path)
    panel = window.controls.projector.panel
    warm = window.session.plan.projector
    assert warm.image_size == 224 and warm.warmup
    assert panel.image_size.text() == "warm-up" and panel.image_size.singleStep() == 14
    assert "keeps images up to 448 px" in panel.image_size.toolTip()

    _type_image_size(qtbot, window, "448")
    big = window.session.plan.projector
    assert window.session.settings.image_size == 448
    assert big.image_size == 448 and big.compute_bytes > warm.compute_bytes
    assert _paths_projector_bytes(window) == big.device_bytes
    assert "448 × 448 px on gpu:0" in panel.image_size.toolTip()
    assert "at 448 px" in window.controls.projector.button.toolTip()

    # Keep on CPU: the projector leaves GPU 0 for system memory
    qtbot.mouseClick(window.controls.projector.button, Qt.MouseButton.LeftButton)
    qtbot.keyClick(panel.on_cpu, Qt.Key.Key_Space)
    assert not window.session.settings.mmproj_offload
    plan = window.session.plan
    assert plan.projector.device == "cpu"
    cpu = next(d for d in plan.device_loads if d.device == "cpu")
    gpu = next(d for d in plan.device_loads if d.device == "gpu:0")
    assert cpu.projector_bytes == plan.projector.device_bytes and gpu.projector_bytes == 0
    window.tabs.setCurrentWidget(window.layers_tab)
    assert "--no-mmproj-offload" in window.layers_tab.command_text.toPlainText()
    assert "projector" not in window.layers_tab.lane("gpu:0").bar.toolTip()
    window.tabs.setCurrentWidget(window.paths_tab)

    # Text only leaves the projector out: its controls are off and say why
    qtbot.mouseClick(window.controls.text_only, Qt.MouseButton.LeftButton)
    assert not panel.image_size.isEnabled() and not panel.on_cpu.isEnabled()
    assert "Text only" in panel.note.text()
    qtbot.mouseClick(window.controls.text_only, Qt.MouseButton.LeftButton)
    assert panel.image_size.isEnabled() and panel.image_size.value() == 448

    # back to the warm-up image: 0 is "warm-up" (None)
    _type_image_size(qtbot, window, "0")
    assert window.session.settings.image_size is None
    assert panel.image_size.text() == "warm-up" and window.session.plan.projector.warmup


def test_the_panel_works_from_the_keyboard(qtbot, window) -> None:
    pick(qtbot, window, "gemma 3 27b")
    controls = window.controls.projector
    controls.button.setFocus()
    qtbot.keyClick(controls.button, Qt.Key.Key_Space)
    panel = controls.panel
    assert panel.isVisible()
    assert panel.focusWidget() is panel.choose_button
    qtbot.keyClick(panel, Qt.Key.Key_Escape)
    assert not panel.isVisible()


def test_image_size_and_keep_on_cpu_are_remembered(qtbot, tmp_path) -> None:
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    first = MainWindow(rig=rig_2x3090(), detect_on_start=False, settings=settings)
    qtbot.addWidget(first)
    first.show()
    pick(qtbot, first, "gemma 3 27b")
    _type_image_size(qtbot, first, "1024")
    box = first.controls.projector.panel.on_cpu
    # on its box: the row is wider than the check box and its words
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))
    assert first.session.settings.image_size == 1024
    first.close()
    again = MainWindow(rig=rig_2x3090(), detect_on_start=False, settings=settings)
    qtbot.addWidget(again)
    s = again.session.settings
    assert s.image_size == 1024 and not s.mmproj_offload
    panel = again.controls.projector.panel
    assert panel.image_size.value() == 1024 and panel.on_cpu.isChecked()
    assert again.session.plan is None or again.session.plan.projector.device == "cpu"


@pytest.mark.parametrize(
    ("model", "pick_text", "synth", "size"),
    [("gemma-3-27b-it", "gemma 3 27b", None, 1024), ("llama-3.1-8b-instruct", "llama 3.1 8b",
     DYNAMIC, 448)],
)  # fmt: skip
def test_the_window_and_the_cli_count_the_same_projector_bytes(
    qtbot, window, tmp_path, monkeypatch, capsys, model, pick_text, synth, size
) -> None:
    rig = tmp_path / "rig.json"
    rig.write_text(json.dumps(RIG))
    argv = ["plan", "--model", model, "--rig", str(rig), "--json", "--kv-compare", "none"]
    argv += ["--image-size", str(size)]
    mmproj = tmp_path / "mmproj-dyn.gguf"
    if synth is not None:
        write_mmproj(synth, mmproj)
        argv += ["--mmproj", str(mmproj)]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    cli = json.loads(out)

    assert window.rig_panel.open_rig_file(rig)
    pick(qtbot, window, pick_text)
    if synth is not None:
        _choose(qtbot, window, monkeypatch, mmproj)
    _type_image_size(qtbot, window, str(size))
    plan = window.session.plan
    load = plan.projector
    assert cli["projector"]["image_size"] == load.image_size
    for key in ("device", "weights_bytes", "compute_bytes", "host_bytes"):
        assert cli["projector"][key] == getattr(load, key), key
    window_bytes = {d.device: d.projector_bytes for d in plan.device_loads}
    assert {d["device"]: d["projector_bytes"] for d in cli["device_loads"]} == window_bytes
    if synth is not None:  # the image size is what sized it: above the 224 px warm-up
        assert load.image_size == size and not load.warmup
