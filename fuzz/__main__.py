"""`python -m fuzz [--inputs N] [--jobs J] [--seed S] [--target T ...]`: the full campaign.

Inputs are split by target (`harness.WEIGHTS`) and into chunks run by J worker processes;
every chunk is reproducible from (target, seed + chunk number). Failures are written to
`--out` (default `fuzz/failures/`) as `<target>-<digest>.bin` plus a `.txt` with the
traceback; the exit status is 1 when any input failed.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from fuzz.harness import TARGETS, WEIGHTS, Report, digest, fuzz, scratch_dir

_CHUNK = 2500


def _chunk(args: tuple[str, int, int]) -> Report:
    target, n, seed = args
    with tempfile.TemporaryDirectory(prefix="rigspark-fuzz-", dir=scratch_dir()) as work:
        # records of validated files are kept per chunk, never in the user's own cache
        os.environ["RIGSPARK_CACHE_DIR"] = str(Path(work) / "cache")
        return fuzz(target, n, seed, Path(work))


def _plan(total: int, targets: list[str], seed: int) -> list[tuple[str, int, int]]:
    weight = sum(WEIGHTS[t] for t in targets)
    jobs = []
    for target in targets:
        share = round(total * WEIGHTS[target] / weight)
        chunk_no = 0
        while share > 0:
            n = min(_CHUNK, share)
            jobs.append((target, n, seed * 1000 + chunk_no))
            share -= n
            chunk_no += 1
    return jobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("--inputs", type=int, default=120_000, help="total inputs")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--target", action="append", choices=TARGETS)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "failures")
    args = parser.parse_args(argv)

    targets = args.target or list(TARGETS)
    jobs = _plan(args.inputs, targets, args.seed)
    report = Report()
    start = time.monotonic()
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        for part in pool.map(_chunk, jobs):
            report.merge(part)
    wall = time.monotonic() - start

    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    print(f"seed {args.seed}, {args.jobs} jobs, wall {wall:.1f} s")
    header = f"{'target':<14}{'inputs':>9}{'accepted':>10}{'typed err':>11}{'failed':>8}"
    print(header + f"{'cpu s':>9}{'slowest s':>11}{'peak MiB':>10}")
    total = 0
    for name in targets:
        s = report.stats[name]
        total += s.inputs
        print(
            f"{name:<14}{s.inputs:>9}{s.accepted:>10}{s.typed_errors:>11}{s.failures:>8}"
            f"{s.seconds:>9.1f}{s.slowest_s:>11.3f}{s.peak_bytes / (1 << 20):>10.1f}"
        )
    print(f"{'total':<14}{total:>9}")
    if report.failures:
        args.out.mkdir(parents=True, exist_ok=True)
        print(f"\n{len(report.failures)} distinct failures (inputs in {args.out}):")
        for sig, f in sorted(report.failures.items()):
            stem = f"{f.target}-{digest(f.data)}"
            (args.out / f"{stem}.bin").write_bytes(f.data)
            (args.out / f"{stem}.txt").write_text(f"{sig}\n{f.kind}\n\n{f.detail}\n")
            print(f"  {sig} [{f.kind}] -> {stem}.bin")
        return 1
    print("\nno failures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
