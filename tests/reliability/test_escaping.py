"""Names from files strangers share never become shell syntax or markup."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from fuzz.seeds import decoder_gguf
from rigspark_gui.catalog.gguf_import import import_gguf
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.launch import launch_commands
from rigspark_gui.core.model.model_spec import ModelSpec
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings

HOSTILE_NAMES = (
    "$(rm -rf ~)",
    "; rm -rf ~",
    "`rm -rf ~`",
    "a' ; rm -rf ~ ; echo '",
    'x" && rm -rf ~',
)
# Harmless twins that would leave a file behind if a shell ever ran them.
CANARY_NAMES = ("$(touch PWNED1)", "; touch PWNED2", "`touch PWNED3`", "' ; touch PWNED4 ; '")

RIG = Rig(
    name="one GPU",
    gpus=(
        Gpu(
            name="NVIDIA GeForce RTX 3090",
            vendor=Vendor.NVIDIA,
            memory_total_bytes=24 * GIB,
            bandwidth_gbps=936.2,
        ),
    ),
    ram_total_bytes=64 * GIB,
    cpu=Cpu(cores=16, memory_bandwidth_gbps=50.0),
)


def imported(tmp_path: Path, name: str, file_stem: str = "model") -> ModelSpec:
    path = tmp_path / f"{file_stem}.gguf"
    path.write_bytes(decoder_gguf("llama", extra={"general.name": name}))
    spec = import_gguf(path)
    assert spec.name == name
    return spec


def shell_lines(text: str) -> list[str]:
    """The lines of a launch text that a user pastes into a shell (not the Modelfile)."""
    return [
        line
        for line in text.splitlines()
        if line.strip() and not line.startswith(("#", "FROM ", "PARAMETER "))
    ]


def commands(spec: ModelSpec) -> list[str]:
    s = PlanSettings(context=4096)
    p = plan(spec, RIG, s, load_perf())
    assert p.placement is not None
    out = launch_commands(p.placement, spec, spec.available_quants[0], s, RIG)
    return [c.text for c in out if c.supported]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_model_name_stays_one_argument(tmp_path: Path, name: str) -> None:
    spec = imported(tmp_path, name, file_stem=name.replace("/", "_"))

    texts = commands(spec)

    assert texts
    for text in texts:
        for line in shell_lines(text):
            tokens = shlex.split(line)
            assert "rm" not in tokens, line
            assert "~" not in tokens, line
            # The name, where it appears, is inside one argument, never loose syntax.
            for tok in tokens:
                assert not tok.startswith(("$(", "`", ";")) or "rm -rf ~" in tok


@pytest.mark.parametrize("name", CANARY_NAMES)
def test_a_shell_running_the_command_runs_nothing_else(tmp_path: Path, name: str) -> None:
    spec = imported(tmp_path, name, file_stem=name.replace("/", "_"))
    run_dir = tmp_path / "run"
    run_dir.mkdir()

    for text in commands(spec):
        for line in shell_lines(text):
            # printf stands in for the program: the shell expands the line exactly as it
            # would for the real command, and prints each argument it got.
            out = subprocess.run(
                ["bash", "--noprofile", "--norc", "-c", "printf '%s\\n' " + line],
                capture_output=True,
                text=True,
                cwd=run_dir,
                timeout=10,
                check=True,
            )
            assert out.stdout.splitlines() == shlex.split(line)
    assert list(run_dir.iterdir()) == []  # no PWNED file: no command ran


@pytest.mark.gui
def test_paths_summary_escapes_markup(qtbot, tmp_path: Path) -> None:
    from rigspark_gui.ui.paths_tab import PathsTab

    name = "<b>bold</b> <img src='x.png'> & [link](http://example.invalid) *md*"
    spec = imported(tmp_path, name)
    tab = PathsTab()
    qtbot.addWidget(tab)

    tab.show_plan(plan(spec, RIG, PlanSettings(context=4096), load_perf()))

    html = tab.summary.text()
    assert "<img" not in html and "<b>bold</b>" not in html
    assert "&lt;b&gt;bold&lt;/b&gt; &lt;img src=&#x27;x.png&#x27;&gt; &amp;" in html
    # What the user reads is the name exactly as the file spells it.
    from PySide6.QtGui import QTextDocument

    doc = QTextDocument()
    doc.setHtml(html)
    assert doc.toPlainText().startswith(name + " runs on the")


def test_names_from_files_are_never_rich_text(qtbot, tmp_path) -> None:
    from PySide6.QtCore import QSettings, Qt

    from rigspark_gui.core.rig import GIB, Gpu, Rig, Vendor
    from rigspark_gui.ui.rig_panel import RigPanel

    hostile = "<b>bold</b><img src=x>"
    rig = Rig(
        name=hostile,
        ram_total_bytes=8 * GIB,
        gpus=(Gpu(name=hostile, vendor=Vendor.NVIDIA, memory_total_bytes=GIB),),
        notes=(hostile,),
    )
    panel = RigPanel(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(panel)
    panel.set_detected(rig)
    for label in (panel.name_label, panel.notes_label, panel.status_label):
        assert label.textFormat() == Qt.TextFormat.PlainText
    assert hostile in panel.name_label.text()
