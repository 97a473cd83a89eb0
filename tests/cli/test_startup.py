"""A fresh process answers as an in-process call does (nothing depends on import order)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from rigspark_gui.cli import main


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cli_process_answers_as_the_in_process_call(capsys) -> None:
    args = ["plan", "--model", "llama-3.1-8b-instruct", "--context", "16k", "--json"]
    rig = ["--rig", "examples/rig-2x3090.json"]
    assert main([*args, *rig]) == 0
    in_process = json.loads(capsys.readouterr().out)
    out = _run(
        f"""
        import sys
        from rigspark_gui.cli import main
        sys.exit(main({[*args, *rig]!r}))
        """
    )
    assert json.loads(out) == in_process


def test_the_cli_knows_every_local_model_prefix() -> None:
    from rigspark_gui.catalog.local_models import _ID_PREFIX
    from rigspark_gui.cli import LOCAL_ID_PREFIXES

    assert set(_ID_PREFIX.values()) - {"file"} == LOCAL_ID_PREFIXES


@pytest.mark.parametrize("command", ["plan", "place", "rank", "models", "detect", "calibrate",
                                     "gpus", "export", "reconcile"])  # fmt: skip
def test_a_named_command_gets_its_own_flags(command: str, capsys) -> None:
    from rigspark_gui.cli_args import SUBCOMMANDS, build_parser

    assert command in SUBCOMMANDS
    with pytest.raises(SystemExit) as done:
        build_parser([command, "--help"]).parse_args([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert f"rigspark-plan {command}" in out
    assert "--json" in out  # every command answers scripts in JSON
