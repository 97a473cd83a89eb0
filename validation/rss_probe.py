"""Resident memory of llama-server on the CPU with and without repacking and mmap.

Writes synthetic Llama-shaped GGUFs whose matrices are stored directly in one quantized
type (random blocks, finite scales: the figures depend only on shapes and types), starts
llama-server on each with the CPU backend only, waits until it serves, answers one short
completion, and reads /proc/PID/status (VmRSS, RssAnon, RssFile) and the buffer lines it
printed. Results go to validation/rss_b11434.json; tests/validation/test_rss.py pins the
engine against them.

    .venv/bin/python validation/rss_probe.py [--bin DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from synth import Synth, _metadata, _tensors  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work" / "rss"
OUT = HERE / "rss_b11434.json"
BIN = Path.home() / ".cache/rigspark/llama-src/build/bin"
# Big enough that the repacked copy stands out of the process's own ~100 MiB.
MODEL = Synth("llama-rss", "llama", 16, 2048, 16, 4, 5632, 8192, head_dim=128)
# (block elements, block bytes, f16 scale offsets in the block)
BLOCKS = {
    "Q4_0": (32, 18, (0,)),
    "Q4_K": (256, 144, (0, 2)),
    "Q5_K": (256, 176, (0, 2)),
}
# the launches compared: llama.cpp's default, then each flag on its own
MODES: dict[str, list[str]] = {
    "default": [],
    "load-mode none": ["--load-mode", "none"],
    "no-repack": ["--no-repack"],
}


def write_model(quant: str, path: Path) -> None:
    qtype = GGMLQuantizationType[quant]
    el, nb, scales = BLOCKS[quant]
    rng = np.random.default_rng(0)
    w = GGUFWriter(str(path), MODEL.arch)
    _metadata(w, MODEL)
    scale = np.frombuffer(np.float16(0.001).tobytes(), dtype=np.uint8)
    for name, shape in _tensors(MODEL):
        if len(shape) == 1:
            w.add_tensor(name, np.ones(shape[::-1], dtype=np.float32))
            continue
        rows, row_blocks = int(np.prod(shape[1:])), shape[0] // el
        raw = rng.integers(0, 256, size=(rows, row_blocks, nb), dtype=np.uint8)
        for off in scales:
            raw[:, :, off : off + 2] = scale
        w.add_tensor(name, raw.reshape(*shape[1:][::-1], row_blocks * nb), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key + "_kib"] = int(value.split()[0])
    return out


def _wait_ready(port: int, proc: subprocess.Popen[str], limit_s: float = 300) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("llama-server did not become ready")


def _complete(port: int) -> None:
    body = json.dumps({"prompt": "t1 t2 t3", "n_predict": 4}).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=300) as r:
        r.read()


def measure(model: Path, flags: list[str], port: int, bin_dir: Path) -> dict[str, Any]:
    log = WORK / f"{model.stem}-{port}.log"
    cmd = [str(bin_dir / "llama-server"), "-m", str(model), "--port", str(port), "-c", "512"]
    cmd += ["-np", "1", "-t", "2", "-ngl", "0", "-lv", "4", *flags]
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, text=True)
        try:
            _wait_ready(port, proc)
            loaded = _status(proc.pid)
            _complete(port)
            served = _status(proc.pid)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text(errors="replace")
    buffers = {
        m.group(1): round(float(m.group(2)) * 1024 * 1024)
        for m in re.finditer(r"(\S+) model buffer size =\s+([\d.]+) MiB", text)
    }
    return {
        "command": " ".join(["llama-server", "-m", model.name, *cmd[3:]]),
        "after_load": loaded,
        "after_completion": served,
        "model_buffers_bytes": buffers,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", type=Path, default=BIN)
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    runs = []
    port = 18600
    for quant in BLOCKS:
        path = WORK / f"{MODEL.name}-{quant}.gguf"
        if not path.exists():
            write_model(quant, path)
        for mode, flags in MODES.items():
            port += 1
            row = measure(path, flags, port, args.bin)
            row |= {"quant": quant, "mode": mode, "file_bytes": path.stat().st_size}
            runs.append(row)
            r = row["after_completion"]
            print(quant, mode, r, row["model_buffers_bytes"], flush=True)
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    info = {
        "llama_cpp": "b11434",
        "machine": f"{cpu}, {platform.system()} {platform.release()}",
        "model": MODEL.__dict__,
        "runs": runs,
    }
    OUT.write_text(json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
