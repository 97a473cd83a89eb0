"""Start-up without pydantic plugins: pydantic still works, answers are unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from rigspark_gui.cli import main


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_models_build_without_the_plugin_machinery() -> None:
    out = _run(
        """
        import sys
        from rigspark_gui.startup import without_pydantic_plugins
        without_pydantic_plugins()
        from pydantic import BaseModel
        class M(BaseModel):
            x: int
        print(M(x=1).x, "importlib.metadata" in sys.modules)
        import pydantic.plugin._loader as loader
        print(loader.get_plugins() == ())
        print(loader.PYDANTIC_ENTRY_POINT_GROUP)  # any other name: the real loader
        """
    )
    assert out.split() == ["1", "False", "True", "pydantic"]


def test_a_no_op_once_the_real_loader_is_in() -> None:
    out = _run(
        """
        import sys
        from pydantic import BaseModel
        class M(BaseModel):
            x: int
        real = sys.modules["pydantic.plugin._loader"]
        from rigspark_gui.startup import without_pydantic_plugins
        without_pydantic_plugins()
        print(sys.modules["pydantic.plugin._loader"] is real)
        """
    )
    assert out.split() == ["True"]


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
