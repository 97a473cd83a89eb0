"""Does a calibrated plan predict llama.cpp on this machine? After `rigspark-plan
calibrate`, time llama.cpp on a model of a *different* shape than the calibration model
(12 layers x 2560, 0.87 B parameters) and compare with the plan's CPU-path estimate.

    .venv/bin/python validation/check_calibration.py --llama-python PATH [--quants Q4_K_M,Q8_0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rigspark_gui.calibrate import synth  # noqa: E402
from rigspark_gui.calibrate.runners import PythonRunner  # noqa: E402

CHECK_SHAPE = synth.Shape(12, 2560, 20, 4, 6912, 8192, 128)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-python", type=Path, required=True)
    ap.add_argument("--quants", default="Q4_K_M,Q8_0")
    args = ap.parse_args()
    runner = PythonRunner(args.llama_python)
    cancel = threading.Event()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        f16 = synth.write_model(Path(tmp) / "check-F16.gguf", CHECK_SHAPE, seed=7)
        for q in args.quants.split(","):
            path = Path(tmp) / f"check-{q}.gguf"
            runner.quantize(f16, path, q, cancel)
            measured = runner.bench(path, None, cancel)
            assert measured is not None
            out = subprocess.run(
                [str(ROOT / ".venv" / "bin" / "rigspark-plan"), "plan", "--model-file", str(path),
                 "--context", "1024", "--prompt-tokens", "80", "--min-speed", "0",
                 "--kv-compare", "none", "--json"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            plan = json.loads(out.stdout)
            cpu = next(p for p in plan["paths"] if p["path"] == "cpu")
            predicted = cpu["throughput"]["tok_s"]
            err = predicted / measured.tg_tok_s - 1
            rows.append((q, measured.tg_tok_s, predicted, err, cpu["throughput"]["basis"]))
    for q, m, p, e, _basis in rows:
        print(f"{q:<7} measured {m:6.1f} tok/s  plan {p:6.1f} tok/s  error {e:+.1%}")
    print(f"basis: {rows[0][4]}")
    return 0 if all(abs(e) <= 0.10 for *_, e, _b in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
