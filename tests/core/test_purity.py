"""The engine stays pure, and nothing in the program reaches the network."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_core_imports_no_qt_hardware_or_io_packages() -> None:
    code = (
        "import sys, pkgutil, importlib, rigspark_gui.core as c\n"
        "for m in pkgutil.iter_modules(c.__path__):\n"
        "    importlib.import_module('rigspark_gui.core.' + m.name)\n"
        "names = ('PySide6', 'pyqtgraph', 'psutil', 'pynvml', 'gguf')\n"
        "bad = [m for m in names if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == ""


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    out = subprocess.run([str(lint)], capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stdout[-2000:]


NO_NETWORK = """
import socket, sys
def refuse(*a, **k):
    raise RuntimeError("network access attempted")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
socket.getaddrinfo = refuse
from rigspark_gui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_cli_works_with_sockets_blocked() -> None:
    for argv in (
        ["plan", "--model", "qwen2.5-7b-instruct", "--rig", "examples/rig-2x3090.json", "--json"],
        ["detect", "--json"],
        ["models"],
    ):
        out = subprocess.run(
            [sys.executable, "-c", NO_NETWORK, *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert "network access attempted" not in out.stderr


CONCERNS = ("model", "memory", "placement", "speed", "serving", "launch", "fit", "plan")


def _program_imports() -> list[tuple[Path, str, str]]:
    import ast

    found = []
    for path in (ROOT / "rigspark_gui").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.extend((path, node.module, alias.name) for alias in node.names)
            elif isinstance(node, ast.Import):
                found.extend((path, alias.name, "") for alias in node.names)
    return found


def test_each_concern_is_reached_through_its_public_face_only() -> None:
    leaks = []
    for path, module, _name in _program_imports():
        parts = module.split(".")
        if parts[:2] != ["rigspark_gui", "core"] or len(parts) < 4 or parts[2] not in CONCERNS:
            continue
        home = ROOT / "rigspark_gui" / "core" / parts[2]
        if home not in path.parents:
            leaks.append(f"{path.relative_to(ROOT)} imports {module}")
    assert leaks == []


def test_no_private_name_crosses_a_module() -> None:
    private = [
        f"{path.relative_to(ROOT)}: {name} from {module}"
        for path, module, name in _program_imports()
        if module.startswith("rigspark_gui") and name.startswith("_") and name != "__version__"
    ]
    assert private == []


MAX_MODULE_LINES = 600


def test_no_module_grows_past_a_readable_size() -> None:
    """A module past ~600 lines holds more than one responsibility: split it by concern."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in (ROOT / "rigspark_gui").rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
