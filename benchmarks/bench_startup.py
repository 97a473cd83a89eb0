"""Start-up, whole process, against the bare interpreter (not a test).

Run: .venv/bin/python benchmarks/bench_startup.py [--runs 9]

Each command runs as a new process, alternating with `python -c pass` from the same
venv so both see the same machine load; medians and ratios are printed:
- `rigspark-plan plan --json` (Llama 3.1 8B on examples/rig-cpu-only.json) and
  `rank --json` over the whole catalog;
- the interpreter importing only the standard modules the CLI cannot do without
  (argparse, json, pathlib, typing): the floor under any command;
- local-llmup's `can-run llama3.1:8b --json` and `recommend --json` (its catalog
  ranking), a Node tool that answers the same questions, when npm can install it (into
  the user cache, once): the targets are `plan --json` at most 0.5x `can-run` and
  `rank --json` at most 1.5x `recommend`;
- the window from launch to its first paint (`RIGSPARK_EXIT_WHEN_PAINTED=1`) against an
  empty PySide6 window, on one Xvfb server when Xvfb is installed, else offscreen
  (target: at most 3x).
Bytecode is cached as a user's interpreter does (PYTHONDONTWRITEBYTECODE is unset), after
one warm-up run of each command; the warm-up also validates the files a command reads,
whose records later runs find kept (catalog/validated.py), as a user's second run does.
Settings and caches go to a temporary HOME.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LLMUP_VERSION = "0.11.4"

EMPTY_WINDOW = """
import sys, time
from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication(sys.argv)
w = QMainWindow()
w.resize(1400, 900)
class FirstPaint(QObject):
    def eventFilter(self, obj, event):
        if obj is w and event.type() == QEvent.Type.Paint:
            print(f"painted {time.time_ns()}", flush=True)
            app.quit()
        return False
spy = FirstPaint()
w.installEventFilter(spy)
w.show()
app.exec()
"""


def _env(home: Path, display: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), **display)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    return env


def _wall(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1000


def _to_paint(argv: list[str], env: dict[str, str]) -> float:
    """Launch to first paint: the child prints the wall clock of its first paint."""
    start = time.time_ns()
    out = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    for line in out.stdout.splitlines():
        if line.startswith("painted "):
            return (int(line.split()[1]) - start) / 1e6
    raise RuntimeError(f"no paint reported by {argv[0]}: {out.stderr[-500:]}")


@contextmanager
def _display() -> Iterator[str | None]:
    """One Xvfb server for every window run, so its start-up is in none of them."""
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        yield None
        return
    number = next(n for n in range(99, 200) if not Path(f"/tmp/.X11-unix/X{n}").exists())
    server = subprocess.Popen(
        [xvfb, f":{number}", "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not Path(f"/tmp/.X11-unix/X{number}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        yield f":{number}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _llmup(cache: Path) -> Path | None:
    """local-llmup from the user cache, installed there with npm on first use."""
    where = cache / "rigspark" / "bench-node"
    exe = where / "node_modules" / ".bin" / "local-llmup"
    if exe.exists():
        return exe
    npm = shutil.which("npm")
    if npm is None:
        return None
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--silent", "--prefix", str(where), f"local-llmup@{LLMUP_VERSION}"],
        capture_output=True,
        timeout=300,
    )
    return exe if done.returncode == 0 and exe.exists() else None


def _alternate(runs: int, cases: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    for measure in cases.values():
        measure()  # warm-up: bytecode written, files in the page cache
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, measure in cases.items():
            times[name].append(measure())
    return times


def _report(title: str, times: dict[str, list[float]], baseline: str) -> None:
    base = statistics.median(times[baseline])
    print(title)
    for name, values in times.items():
        med = statistics.median(values)
        print(
            f"  {name:<34} median {med:7.1f} ms  (min {min(values):6.1f}, max {max(values):6.1f})"
            f"  {med / base:5.2f}x {baseline}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--no-window", action="store_true")
    args = parser.parse_args()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    home = Path(tempfile.mkdtemp(prefix="rigspark-bench-"))
    try:
        env = _env(home, {})
        python = str(BIN / "python")
        plan = [str(BIN / "rigspark-plan"), "plan", "--model", "llama-3.1-8b-instruct",
                "--rig", "examples/rig-cpu-only.json", "--json"]  # fmt: skip
        rank = [str(BIN / "rigspark-plan"), "rank", "--rig", "examples/rig-cpu-only.json",
                "--json"]  # fmt: skip
        stdlib = [python, "-c", "import argparse, json, pathlib, typing"]
        cases: dict[str, Callable[[], float]] = {
            "python -c pass": lambda: _wall([python, "-c", "pass"], env),
            # the floor of any CLI written like this one: the standard modules it needs
            "python: argparse, json, pathlib": lambda: _wall(stdlib, env),
            "rigspark-plan plan --json": lambda: _wall(plan, env),
            "rigspark-plan rank --json": lambda: _wall(rank, env),
        }
        llmup = _llmup(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")))
        if llmup is not None:
            can_run = [str(llmup), "can-run", "llama3.1:8b", "--json"]
            recommend = [str(llmup), "recommend", "--json"]
            cases["local-llmup can-run --json"] = lambda: _wall(can_run, env)
            cases["local-llmup recommend --json"] = lambda: _wall(recommend, env)
        times = _alternate(args.runs, cases)
        _report("CLI, whole process:", times, "python -c pass")
        if llmup is not None:
            for ours, theirs, target in (
                ("rigspark-plan plan --json", "local-llmup can-run --json", 0.5),
                ("rigspark-plan rank --json", "local-llmup recommend --json", 1.5),
            ):
                ratio = statistics.median(times[ours]) / statistics.median(times[theirs])
                mark = "met" if ratio <= target else "NOT met"
                print(f"  {ours} / {theirs}: {ratio:.2f}x (target {target}x: {mark})")
        else:
            print("  local-llmup: not measured (npm not available)")

        if not args.no_window:
            script = home / "empty_window.py"
            script.write_text(EMPTY_WINDOW)
            wenv = dict(env, RIGSPARK_EXIT_WHEN_PAINTED="1")
            with _display() as display:
                if display is not None:
                    wenv.update(DISPLAY=display, QT_QPA_PLATFORM="xcb")
                window = {
                    "empty PySide6 window": lambda: _to_paint([python, str(script)], wenv),
                    "rigspark window": lambda: _to_paint([str(BIN / "rigspark")], wenv),
                }
                where = f"Xvfb {display}" if display else "offscreen (Xvfb not installed)"
                painted = _alternate(args.runs, window)
                _report(
                    f"Window, launch to first paint ({where}):", painted, "empty PySide6 window"
                )
                ratio = statistics.median(painted["rigspark window"]) / statistics.median(
                    painted["empty PySide6 window"]
                )
                mark = "met" if ratio <= 3 else "NOT met"
                print(f"  rigspark window / empty PySide6 window: {ratio:.2f}x (target 3x: {mark})")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
