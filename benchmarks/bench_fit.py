"""`rigspark-plan fit` against llama.cpp's own `llama-fit-params`, side by side (not a test).

Run: .venv/bin/python benchmarks/bench_fit.py [--runs 5] [--bin DIR]

For a few cases of validation/fit_cases.json (the sparse synthetic GGUFs that
validation/fit_suite.py writes; llama.cpp b11434 built as its docstring says), each
command runs as a new process, alternating, and the medians and their ratios are printed
with the answers of both (which must agree). RigSpark runs three times per round:
- first: an empty user cache, as on the very first run: the rig file is validated
  (pydantic) and the GGUF header read, both kept;
- cold: a new model file on a known rig: the header is read and its spec kept;
- warm: the spec kept by a run before (another margin, context or K/V type asked
  about the same file).
The target: RigSpark in at most half the time llama-fit-params takes, without the
weights on disk (the files are sparse). Run it from a tree nobody is editing with
bytecode writing on (the user cache is keyed by the program's files too).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from validation.fit_suite import FitModel, default_bin, ensure_gguf  # noqa: E402
from validation.synth import Synth  # noqa: E402

CASES = (
    "fit-llama3-8b-Q4_0/cpu-reduce-50",
    "fit-llama3-8b-Q4_0/cpu-abort",
    "fit-qwen3-30b-a3b-Q4_0/cpu-reduce-50",
)


def timed(argv: list[str], cache: str | None = None) -> tuple[float, str]:
    env = dict(os.environ)
    if cache is not None:
        env["RIGSPARK_CACHE_DIR"] = cache
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    return time.perf_counter() - t0, out.stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bin", type=Path, default=default_bin())
    args = ap.parse_args()
    data = json.loads((ROOT / "validation" / "fit_cases.json").read_text())
    tool = args.bin / "llama-fit-params"
    if not tool.exists():
        print(f"no llama-fit-params in {args.bin}: build llama.cpp b11434 first", file=sys.stderr)
        return 2
    total = int(data["machine"]["cpu_total_bytes"])
    with tempfile.TemporaryDirectory() as tmp:
        rig = Path(tmp) / "rig.json"
        rig.write_text(json.dumps({"ram_total_bytes": total,
                                   "cpu": {"features": ["avx2", "avx512"]}}))  # fmt: skip
        print(f"machine: {platform.processor() or platform.machine()}, "
              f"{data['machine']['n_cpu']} CPUs; {args.runs} runs each, medians")  # fmt: skip
        for k, name in enumerate(CASES):
            case = next(c for c in data["cases"] if c["name"] == name)
            m = data["models"][case["model"]]
            model, _ = ensure_gguf(FitModel(Synth(**m["synth"]), m["wtype"]))
            flags = [str(model) if a == "{model}" else a for a in case["argv"]]
            ours_argv = [sys.executable, "-m", "rigspark_gui.cli", "fit", "--rig", str(rig),
                         "--", "llama-fit-params", *flags]  # fmt: skip
            theirs_argv = [str(tool), *flags]
            warm_cache = str(Path(tmp) / f"warm-{k}")
            timed(ours_argv, warm_cache)  # bytecode compiled, the spec kept for warm runs
            timed(theirs_argv)
            first, cold, warm, theirs = [], [], [], []
            for i in range(args.runs):
                t, a = timed(ours_argv, str(Path(tmp) / f"first-{k}-{i}"))
                first.append(t)
                known_rig = Path(tmp) / f"cold-{k}-{i}"
                shutil.copytree(warm_cache, known_rig)
                for kept in known_rig.rglob("gguf-header-*"):
                    kept.unlink()  # the file's header is new; the rig was seen before
                t, c = timed(ours_argv, str(known_rig))
                cold.append(t)
                t, w = timed(ours_argv, warm_cache)
                warm.append(t)
                t, b = timed(theirs_argv)
                theirs.append(t)
            mf, mc, mw, mt = (statistics.median(x) for x in (first, cold, warm, theirs))
            same = "same" if a == b == c == w else f"DIFFERENT: {a!r} / {w!r} vs {b!r}"
            print(f"{name:38} first {mf:4.2f} s ({mf / mt:4.2f})  cold {mc:4.2f} s "
                  f"({mc / mt:4.2f})  warm {mw:4.2f} s ({mw / mt:4.2f})  "
                  f"llama-fit-params {mt:4.2f} s  {same}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
