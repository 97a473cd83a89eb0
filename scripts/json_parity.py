"""CLI JSON parity: capture `rigspark-plan` JSON output over a fixed case matrix, then compare.

A refactor that must not change any figure can be checked against the commit before it:
capture a baseline from a pristine worktree, capture again from the refactored tree, compare.

    git worktree add /tmp/baseline HEAD
    python scripts/json_parity.py capture /tmp/parity-baseline --root /tmp/baseline \\
        --python .venv/bin/python
    python scripts/json_parity.py capture /tmp/parity-new --python .venv/bin/python
    python scripts/json_parity.py compare /tmp/parity-baseline /tmp/parity-new

The matrix (125 cases): `plan --json` for ten catalog models of varied architecture (dense,
MoE, sliding-window, MLA, gpt-oss, a tiny one) x the four example rigs x three setting sets
(120), then `rank --json` on one rig, `place --json` on two cases, `models --json` and
`gpus --json`. The rig is always a file under examples/ (never detection).

Each case runs `PY -m rigspark_gui.cli ARGS` with cwd=ROOT and PYTHONPATH=ROOT, so the code
under ROOT is what runs (checked once before the matrix), in an environment built from
scratch: only PATH (and SYSTEMROOT on Windows) is inherited; HOME is a fresh temporary
directory per case with XDG_CACHE_HOME, XDG_CONFIG_HOME and XDG_DATA_HOME inside it, so no
user cache, settings or calibration leaks in; COLUMNS=100, LC_ALL=C.UTF-8, HF_HUB_OFFLINE=1,
PYTHONHASHSEED=0 (set iteration order fixed; `--hash-seed random` leaves it random).

Each case is written to OUTDIR/<nnn>-<slug>.json as {"argv", "rc", "stdout", "stderr"}; argv
is the CLI's arguments (after `-m rigspark_gui.cli`). Normalisation: the case's temporary
HOME and the resolved ROOT are replaced by <HOME> and <ROOT> in stdout and stderr (none of the
current outputs contain either, nor any timestamp); nothing else is touched.

`compare DIR_A DIR_B` lists every case whose rc, stdout or stderr differ (or that is missing
from one side), with the first differing line, prints "N of M identical" and exits 1 on any
difference, 0 otherwise. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CASE_FILE = re.compile(r"^\d{3}-.+\.json$")
MAX_WORKERS = 2
CASE_TIMEOUT_S = 300

MODELS: tuple[str, ...] = (
    "llama-3.1-8b-instruct",  # dense, GQA
    "llama-3.1-70b-instruct",  # large dense
    "qwen3-30b-a3b",  # MoE
    "mixtral-8x7b-instruct-v0.1",  # MoE on the llama architecture
    "gemma-3-27b-it",  # sliding-window attention (5:1)
    "llama-4-scout-17b-16e-instruct",  # MoE + chunked/sliding attention
    "deepseek-v2-lite-chat",  # MLA, small MoE
    "deepseek-v3",  # MLA, 671B MoE
    "gpt-oss-20b",  # gpt-oss: MXFP4 MoE, sliding window 128
    "qwen2.5-0.5b-instruct",  # tiny dense
)
RIGS: tuple[str, ...] = (
    "examples/rig-2x3090.json",
    "examples/rig-2x8xh100.json",
    "examples/rig-cpu-only.json",
    "examples/rig-two-hosts-3090.json",
)
SETTINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("default", ()),
    (
        "ctx32k-q8kv-fa",
        ("--context", "32768", "--kv-k", "q8_0", "--kv-v", "q8_0", "--flash-attn", "on"),
    ),
    ("ctx4k-q4km", ("--context", "4096", "--quant", "Q4_K_M")),
)


@dataclass(frozen=True)
class Case:
    slug: str
    argv: tuple[str, ...]


def _stem(path: str) -> str:
    return Path(path).stem.removeprefix("rig-")


def cases() -> list[Case]:
    """The fixed matrix, in a fixed order."""
    out: list[Case] = []
    for model in MODELS:
        for rig in RIGS:
            for name, flags in SETTINGS:
                argv = ("plan", "--json", "--model", model, "--rig", rig, *flags)
                out.append(Case(f"plan-{model}-{_stem(rig)}-{name}", argv))
    out.append(Case("rank-2x3090", ("rank", "--json", "--rig", RIGS[0])))
    out.append(
        Case(
            "place-llama-3.1-70b-instruct-2x3090",
            ("place", "--json", "--model", "llama-3.1-70b-instruct", "--rig", RIGS[0]),
        )
    )
    out.append(
        Case(
            "place-qwen3-30b-a3b-two-hosts-3090-ctx32k",
            ("place", "--json", "--model", "qwen3-30b-a3b", "--rig", RIGS[3], "--context", "32768"),
        )
    )
    out.append(Case("models", ("models", "--json")))
    out.append(Case("gpus", ("gpus", "--json")))
    return [Case(f"{i:03d}-{c.slug}", c.argv) for i, c in enumerate(out, start=1)]


def _env(root: Path, home: Path, hash_seed: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "SYSTEMROOT") if k in os.environ}
    env.update(
        {
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "PYTHONPATH": str(root),
            "COLUMNS": "100",
            "LC_ALL": "C.UTF-8",
            "HF_HUB_OFFLINE": "1",
        }
    )
    if hash_seed != "random":
        env["PYTHONHASHSEED"] = hash_seed
    return env


def _normalise(text: str, home: Path, root: Path) -> str:
    # Longest first: HOME lives under the system temp dir, never under ROOT, but be safe.
    for path, token in sorted(
        ((str(home), "<HOME>"), (str(root), "<ROOT>")), key=lambda pair: -len(pair[0])
    ):
        text = text.replace(path, token)
    return text


def _run(py: str, root: Path, argv: Sequence[str], hash_seed: str) -> dict[str, object]:
    home = Path(tempfile.mkdtemp(prefix="rigspark-parity-home-")).resolve()
    try:
        try:
            proc = subprocess.run(
                [py, "-m", "rigspark_gui.cli", *argv],
                cwd=root,
                env=_env(root, home, hash_seed),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=CASE_TIMEOUT_S,
            )
            rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            rc, stdout, stderr = -1, "", f"json_parity: timed out after {CASE_TIMEOUT_S} s\n"
        return {
            "argv": list(argv),
            "rc": rc,
            "stdout": _normalise(stdout, home, root),
            "stderr": _normalise(stderr, home, root),
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _check_import_root(py: str, root: Path, hash_seed: str) -> None:
    """Fail unless `import rigspark_gui` under the case environment resolves inside ROOT."""
    home = Path(tempfile.mkdtemp(prefix="rigspark-parity-home-")).resolve()
    try:
        proc = subprocess.run(
            [py, "-c", "import rigspark_gui; print(rigspark_gui.__file__)"],
            cwd=root,
            env=_env(root, home, hash_seed),
            capture_output=True,
            text=True,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    where = Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else None
    if where is None or not where.is_relative_to(root):
        sys.exit(
            f"json_parity: rigspark_gui does not import from {root}: "
            f"{proc.stdout.strip() or proc.stderr.strip()}"
        )


def capture(outdir: Path, py: str, root: Path, jobs: int, hash_seed: str) -> int:
    root = root.resolve()
    missing = [rig for rig in RIGS if not (root / rig).is_file()]
    if missing:
        sys.exit(f"json_parity: missing rig files under {root}: {', '.join(missing)}")
    _check_import_root(py, root, hash_seed)
    outdir.mkdir(parents=True, exist_ok=True)
    for stale in outdir.iterdir():
        if CASE_FILE.match(stale.name):
            stale.unlink()
    matrix = cases()
    started = time.monotonic()

    def one(case: Case) -> int:
        result = _run(py, root, case.argv, hash_seed)
        text = json.dumps(result, indent=1, ensure_ascii=False) + "\n"
        (outdir / f"{case.slug}.json").write_text(text, encoding="utf-8")
        rc = result["rc"]
        assert isinstance(rc, int)
        return rc

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, MAX_WORKERS))) as pool:
        rcs = list(pool.map(one, matrix))
    elapsed = time.monotonic() - started
    counts: dict[int, int] = {}
    for rc in rcs:
        counts[rc] = counts.get(rc, 0) + 1
    summary = ", ".join(f"rc={rc}: {n}" for rc, n in sorted(counts.items()))
    print(f"captured {len(matrix)} cases from {root} into {outdir} in {elapsed:.1f} s ({summary})")
    return 0


def _first_diff(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else "<end>"
        y = lb[i] if i < len(lb) else "<end>"
        if x != y:
            return f"line {i + 1}: {_short(x)!r} -> {_short(y)!r}"
    return "same lines, different line endings or trailing newline"


def _short(text: str, limit: int = 120) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _load(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_text(encoding="utf-8"))
    return data


def compare(dir_a: Path, dir_b: Path) -> int:
    names_a = {p.name for p in dir_a.iterdir() if CASE_FILE.match(p.name)}
    names_b = {p.name for p in dir_b.iterdir() if CASE_FILE.match(p.name)}
    names = sorted(names_a | names_b)
    same = 0
    for name in names:
        if name not in names_a or name not in names_b:
            print(f"{name}: only in {dir_a if name in names_a else dir_b}")
            continue
        a, b = _load(dir_a / name), _load(dir_b / name)
        problems: list[str] = []
        if a.get("argv") != b.get("argv"):
            problems.append(f"argv {a.get('argv')} -> {b.get('argv')}")
        if a.get("rc") != b.get("rc"):
            problems.append(f"rc {a.get('rc')} -> {b.get('rc')}")
        for stream in ("stdout", "stderr"):
            sa, sb = str(a.get(stream, "")), str(b.get(stream, ""))
            if sa != sb:
                problems.append(f"{stream} {_first_diff(sa, sb)}")
        if problems:
            print(f"{name}:")
            for problem in problems:
                print(f"  {problem}")
        else:
            same += 1
    print(f"{same} of {len(names)} identical")
    return 0 if names and same == len(names) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="run the case matrix and write OUTDIR/<nnn>-<slug>.json")
    cap.add_argument("outdir", type=Path)
    cap.add_argument("--python", default=sys.executable, help="interpreter (default: this one)")
    cap.add_argument(
        "--root",
        type=Path,
        default=REPO_ROOT,
        help="tree whose code runs (default: this repository)",
    )
    cap.add_argument("--jobs", type=int, default=MAX_WORKERS, help="workers, at most 2")
    cap.add_argument("--hash-seed", default="0", help="PYTHONHASHSEED, or 'random'")
    cmp = sub.add_parser("compare", help="diff two capture folders; exit 1 on any difference")
    cmp.add_argument("dir_a", type=Path)
    cmp.add_argument("dir_b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "capture":
        return capture(args.outdir, args.python, args.root, args.jobs, args.hash_seed)
    return compare(args.dir_a, args.dir_b)


if __name__ == "__main__":
    sys.exit(main())
