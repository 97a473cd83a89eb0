"""`rigspark-plan export`: the same inputs as `plan`, every format, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rigspark_gui.cli import main
from rigspark_gui.report.model import load_report

from .conftest import RIG_FILE

ARGS = [
    "export",
    "--model",
    "llama-3.3-70b-instruct",
    "--rig",
    str(RIG_FILE),
    "--context",
    "32k",
    "--kv-k",
    "q8_0",
]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_export_json_round_trip(capsys, tmp_path) -> None:
    path = tmp_path / "plan.json"
    code, out, err = run(capsys, *ARGS, "--format", "json", "-o", str(path))
    assert code == 0, err
    assert str(path) in out
    report = load_report(path)
    assert report.model.id == "llama-3.3-70b-instruct"
    assert report.settings.context == 32768
    # flash attention was left to llama.cpp (auto) and resolved on for the q8_0 V cache
    assert report.settings.kv_v.value == "q8_0" and report.settings.is_auto("flash_attn")
    assert report.resolved is not None and report.resolved.flash_attn
    assert report.fit is not None and report.fit.command.startswith("-c ")
    assert report.recommended is not None and report.recommended.value == "multi-gpu"
    # the same figures `plan --json` prints
    code, out, _ = run(capsys, "plan", *ARGS[1:], "--json")
    assert code == 0
    plan = json.loads(out)
    assert [p["required_bytes"] for p in plan["paths"]] == [p.required_bytes for p in report.paths]


@pytest.mark.parametrize("fmt", ["html", "pdf", "md"])
def test_export_formats(qapp, capsys, tmp_path, fmt: str) -> None:
    path = tmp_path / f"plan.{fmt}"
    code, _, err = run(capsys, *ARGS, "--format", fmt, "-o", str(path))
    assert code == 0, err
    assert path.stat().st_size > 1000
    if fmt == "md":
        assert (tmp_path / "plan-fit.png").exists() and (tmp_path / "plan-kv.png").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--format", "xml"], "invalid choice: 'xml'"),
        (["--model", "nope"], "unknown model 'nope'"),
        (["--kv-v", "q4_0", "--flash-attn", "off"], "needs flash attention"),
        (["--quant", "Q9_X"], "no quantization 'Q9_X'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, extra, message) -> None:
    path = tmp_path / "plan.html"
    code, _, err = run(capsys, *ARGS, *extra, "-o", str(path))
    assert code == 2
    assert message in err and err.count("\n") == 1
    assert not path.exists()


def test_unwritable_output_is_exit_2_and_leaves_nothing(capsys, tmp_path) -> None:
    target = tmp_path / "missing" / "plan.html"
    code, _, err = run(capsys, *ARGS, "--format", "html", "-o", str(target))
    assert code == 2
    assert err.startswith("rigspark-plan: error: cannot write") and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_export_never_loads_the_window(tmp_path) -> None:
    """Charts and PDF need QtGui only: the CLI still never loads widgets or the ui."""
    code = (
        "import sys\n"
        "from rigspark_gui.cli import main\n"
        f"rc = main({[*ARGS, '--format', 'pdf', '-o', str(tmp_path / 'p.pdf')]!r})\n"
        "bad = [m for m in sys.modules if m.startswith(('PySide6.QtWidgets', 'pyqtgraph',"
        " 'rigspark_gui.ui'))]\n"
        "assert rc == 0 and not bad, (rc, bad)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no display, no QT_QPA_PLATFORM
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "p.pdf").read_bytes().startswith(b"%PDF")
