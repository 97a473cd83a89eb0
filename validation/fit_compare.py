"""RigSpark's `fit` against llama.cpp's own `llama-fit-params` (b11434) on every case
validation/fit_suite.py recorded in validation/fit_cases.json, and the table for
docs/validation-fit.md. No llama.cpp is needed: the cases hold what it printed, and the
sparse synthetic GGUFs are written again from their recorded geometry.

    python validation/fit_compare.py            # prints the table, exit 1 on a mismatch
    python validation/fit_compare.py --write    # also writes docs/validation-fit.md
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from validation.fit_suite import FitModel, ensure_gguf  # noqa: E402
from validation.synth import Synth  # noqa: E402

CASES = ROOT / "validation" / "fit_cases.json"
DOC = ROOT / "docs" / "validation-fit.md"


@dataclass
class Result:
    name: str
    expected: str
    got: str
    expected_rc: int
    got_rc: int
    llama_s: float
    ours_s: float

    @property
    def agrees(self) -> bool:
        return self.expected == self.got and (self.expected_rc == 0) == (self.got_rc == 0)


def _rig(machine: dict[str, Any], endpoints: list[str], features: list[str]) -> dict[str, Any]:
    total = int(machine["cpu_total_bytes"])
    return {
        "name": "fit validation host",
        "ram_total_bytes": total,
        "cpu": {"name": machine.get("cpu_model", "CPU"), "features": features},
        "hosts": [
            {"name": f"rpc{i}", "address": a, "ram_total_bytes": total}
            for i, a in enumerate(endpoints)
        ],
    }


def _endpoints(argv: list[str]) -> list[str]:
    if "--rpc" in argv:
        return argv[argv.index("--rpc") + 1].split(",")
    return []


def run_case(case: dict[str, Any], model: Path, rig: Path) -> tuple[str, int, float]:
    from rigspark_gui.cli import main

    argv = [str(model) if a == "{model}" else a for a in case["argv"]]
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["fit", "--rig", str(rig), "--", "llama-fit-params", *argv])
    return out.getvalue().strip(), rc, time.perf_counter() - t0


def compare(features: list[str]) -> list[Result]:
    data = json.loads(CASES.read_text())
    machine = data["machine"]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        models: dict[str, Path] = {}
        for name, m in data["models"].items():
            fm = FitModel(Synth(**m["synth"]), m["wtype"])
            models[name], _ = ensure_gguf(fm)
        for case in data["cases"]:
            endpoints = _endpoints(case["argv"])
            rig = Path(tmp) / "rig.json"
            rig.write_text(json.dumps(_rig(machine, endpoints, features)))
            got, rc, secs = run_case(case, models[case["model"]], rig)
            for i, a in enumerate(endpoints):
                got = got.replace(f"RPC0[{a}]", f"RPC0[{{rpc{i}}}]")
            expected = case["stdout"].strip()
            llama_s = float(case.get("wall_s", 0.0))
            results.append(Result(case["name"], expected, got, case["rc"], rc, llama_s, secs))
    return results


def table(results: list[Result]) -> str:
    lines = [
        "| case | llama-fit-params b11434 | RigSpark | agrees | llama.cpp s | RigSpark s |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        exp = r.expected or f"(exit {r.expected_rc}: gives up)"
        got = r.got or f"(exit {r.got_rc}: gives up)"
        short = lambda s: s if len(s) < 90 else s[:87] + "…"  # noqa: E731
        lines.append(
            f"| {r.name} | `{short(exp)}` | "
            + ("same" if r.agrees else f"`{short(got)}`")
            + f" | {'yes' if r.agrees else '**no**'} | {r.llama_s:.2f} | {r.ours_s:.3f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--features", default="avx2,avx512", help="the CPU's repack features")
    args = ap.parse_args()
    results = compare(args.features.split(","))
    agree = sum(r.agrees for r in results)
    print(table(results))
    print(f"\n{agree}/{len(results)} cases agree")
    if args.write:
        body = DOC.read_text() if DOC.exists() else ""
        marker = "<!-- fit-table -->"
        block = f"{marker}\n{table(results)}\n\n{agree} of {len(results)} cases agree.\n{marker}"
        if marker in body:
            head, _, rest = body.partition(marker)
            _, _, tail = rest.partition(marker)
            body = head + block + tail
        else:
            body += "\n" + block + "\n"
        DOC.write_text(body)
    return 0 if agree == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
