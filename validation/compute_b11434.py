"""CPU compute buffers against llama.cpp build b11434's own dry run (llama-fit-params).

Writes synthetic GGUFs (synth.py) over a grid of shapes, runs
`llama-fit-params -m FILE -fitp on -c N -ub U -fa on|off [-np P] -v` for each setting
and reads `sched_reserve: CPU compute buffer size = X MiB` from its log (two decimals; the
log is asynchronous, so a run whose line is missing is retried). Each row records the
measured MiB beside RigSpark's `device_compute_bytes(..., cpu=True)`; the rows of the
held-out model, context and ubatch (HELD_OUT) were not looked at while fitting the
formula. `--rpc` also measures an RPC device (ggml-rpc-server backed by the CPU backend):
its compute buffer and the host's.

    python validation/compute_b11434.py                 # measure, write the JSON
    python validation/compute_b11434.py --report-only   # re-predict the recorded rows
    python validation/compute_b11434.py --rpc           # add the RPC device rows

llama-fit-params takes -np but not --kv-unified (server-only in b11434, and its
LLAMA_ARG_KV_UNIFIED is not read either), so parallel rows are non-unified only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rigspark_gui.catalog.gguf_import import import_gguf  # noqa: E402
from rigspark_gui.core.memory import device_compute_bytes, host_compute_bytes  # noqa: E402
from rigspark_gui.core.model.model_spec import Geometry  # noqa: E402
from rigspark_gui.core.settings import PlanSettings  # noqa: E402
from rigspark_gui.formats.jsonable import jsonable  # noqa: E402
from rigspark_gui.formats.model_spec import Geometry as GeometryBoundary  # noqa: E402
from validation.synth import MODELS, Synth, write_gguf  # noqa: E402

MIB = 1 << 20
OUT = Path(__file__).with_name("compute_b11434.json")
BIN = Path(os.environ.get("LLAMA_BIN", Path.home() / ".cache/rigspark/llama-src/build/bin"))
TOL_MIB = 0.01  # the log's resolution
RPC_PORT = 50052

_BASE = MODELS[0]  # llama3-gqa: n_layer 6, n_embd 512, 8 heads, 2 KV heads of 64, n_ff 1536
_BY_NAME = {m.name: m for m in MODELS}


def _v(name: str, base: Synth = _BASE, **kw: Any) -> Synth:
    return dataclasses.replace(base, name=name, **kw)


VARIANTS: tuple[Synth, ...] = (
    _BASE,
    _v("ff4096", n_ff=4096),
    _v("embd1024", n_embd=1024, n_ff=3072, n_head=16, n_head_kv=4),
    _v("vocab8192", n_vocab=8192),
    _v("vocab32000", n_vocab=32000),
    _v("vocab1024-ff512", n_vocab=1024, n_ff=512),
    _v("kv4", n_head_kv=4),  # n_embd_k_gqa 256
    _v("mha", n_head_kv=8),  # no GQA: n_embd_k_gqa 512
    _v("hd128", n_head=4, n_head_kv=1, head_dim=128),
    _v("hd32-h16", n_head=16, n_head_kv=4, head_dim=32),
    _v("q-wide", n_head=16, n_head_kv=2, head_dim=64),  # n_head * head_dim 1024 > n_embd
    _BY_NAME["qwen2-tied"],
    _BY_NAME["gemma2-swa"],
    _BY_NAME["olmoe-moe"],
    _BY_NAME["phi3-fused"],
    _BY_NAME["deepseek2-mla"],
    # held out: a shape never looked at while fitting
    _v("wide-held", n_embd=768, n_ff=2560, n_vocab=12000, n_head=12, n_head_kv=4, head_dim=64),
)
CONTEXTS = (512, 4096, 16384, 32768, 8192)
UBATCHES = (128, 256, 512, 1024, 384)
PARALLEL = (1, 4)
# Rows held out of the fit: this model, this context, this ubatch (any row with one).
HELD_OUT = {"model": "wide-held", "context": 8192, "n_ubatch": 384}


def held_out(row: dict[str, Any]) -> bool:
    return (
        row["model"] == HELD_OUT["model"]
        or row["context"] == HELD_OUT["context"]
        or row["n_ubatch"] == HELD_OUT["n_ubatch"]
    )


def grid(models: tuple[Synth, ...] = VARIANTS) -> Iterator[tuple[Synth, int, int, bool, int]]:
    for m in models:
        for ctx in CONTEXTS:
            if ctx > m.context_length:
                continue
            for ub in UBATCHES:
                for fa in (False, True):
                    for np_ in PARALLEL:
                        if np_ > 1 and (ub not in (256, 512) or ctx < 4096):
                            continue  # parallel: a slice of the grid
                        yield m, ctx, ub, fa, np_


_LINE = re.compile(
    r"sched_reserve:\s+(?P<name>\S+(?: \S+)?) compute buffer size =\s+(?P<mib>[\d.]+) MiB"
)


def run_fit_params(
    path: Path, ctx: int, ub: int, fa: bool, np_: int, rpc: str | None = None, tries: int = 6
) -> dict[str, float]:
    """Compute buffer MiB per buffer type from one dry run (retried: the log is async)."""
    cmd = [str(BIN / "llama-fit-params"), "-m", str(path), "-fitp", "on", "-c", str(ctx)]
    cmd += ["-ub", str(ub), "-b", str(max(ub, 2048)), "-fa", "on" if fa else "off"]
    cmd += ["-np", str(np_), "-v"]
    if rpc:
        cmd += ["--rpc", rpc]
    want = 2 if rpc else 1
    for _ in range(tries):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        found = {m["name"]: float(m["mib"]) for m in _LINE.finditer(p.stderr)}
        if len(found) >= want:
            return found
    raise RuntimeError(f"no compute buffer line after {tries} runs: {' '.join(cmd)}")


def predict(g: Geometry, ctx: int, ub: int, fa: bool, np_: int) -> float:
    s = PlanSettings(context=ctx, n_ubatch=ub, flash_attn=fa, parallel=np_)
    return device_compute_bytes(g, s, list(range(g.n_layer)), True, cpu=True) / MIB


def predict_rpc(g: Geometry, ctx: int, ub: int, fa: bool, np_: int) -> tuple[float, float]:
    """(the RPC device, the host CPU) for every layer and the head on the RPC device."""
    s = PlanSettings(context=ctx, n_ubatch=ub, flash_attn=fa, parallel=np_)
    dev = device_compute_bytes(g, s, list(range(g.n_layer)), True, rpc_cpu=True)
    return dev / MIB, host_compute_bytes(g, s) / MIB


def _geometries(models: tuple[Synth, ...], tmp: Path) -> dict[str, tuple[Path, Geometry]]:
    out = {}
    for m in models:
        path = tmp / f"{m.name}.gguf"
        write_gguf(m, path)
        out[m.name] = (path, import_gguf(path).geometry)
    return out


def measure(rpc: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        files = _geometries(VARIANTS, Path(d))
        rows = []
        for m, ctx, ub, fa, np_ in grid():
            path, _ = files[m.name]
            mib = run_fit_params(path, ctx, ub, fa, np_)["CPU"]
            rows.append(
                {"model": m.name, "context": ctx, "n_ubatch": ub, "flash_attn": fa,
                 "parallel": np_, "measured_mib": mib}
            )  # fmt: skip
        rpc_rows = _measure_rpc(files) if rpc else []
    models = {name: jsonable(g) for name, (_, g) in files.items()}
    return {"llama_cpp": _build(), "models": models, "rows": rows, "rpc_rows": rpc_rows}


def _measure_rpc(files: dict[str, tuple[Path, Geometry]]) -> list[dict[str, Any]]:
    server = subprocess.Popen(
        [str(BIN / "ggml-rpc-server"), "-p", str(RPC_PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        rows = []
        for name in ("llama3-gqa", "ff4096", "vocab8192", "kv4", "gemma2-swa", "qwen2-tied"):
            path, _ = files[name]
            for ctx in (512, 4096, 16384):
                for ub in (256, 512):
                    for fa in (False, True):
                        got = run_fit_params(path, ctx, ub, fa, 1, rpc=f"127.0.0.1:{RPC_PORT}")
                        dev = next(v for k, v in got.items() if k.startswith("RPC"))
                        rows.append(
                            {"model": name, "context": ctx, "n_ubatch": ub, "flash_attn": fa,
                             "parallel": 1, "rpc_mib": dev, "host_mib": got.get("CPU", 0.0)}
                        )  # fmt: skip
        return rows
    finally:
        server.terminate()
        server.wait(timeout=10)


def _build() -> str:
    p = subprocess.run(
        [str(BIN / "llama-fit-params"), "--version"], capture_output=True, text=True, timeout=60
    )
    # the source tree at ~/.cache/rigspark/llama-src is b11434; its binaries carry no number
    m = re.search(r"version: (.+)", p.stdout + p.stderr)
    return f"b11434 ({m[1].strip()})" if m else "b11434"


def geometry_of(raw: dict[str, Any]) -> Geometry:
    record: Geometry = GeometryBoundary.model_validate(raw).to_record()
    return record


def evaluate(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each recorded row with `ours_mib`, `error_mib` (ours - measured) and `held_out`."""
    geos = {k: geometry_of(v) for k, v in data["models"].items()}
    out = []
    for r in data["rows"]:
        ours = predict(
            geos[r["model"]], r["context"], r["n_ubatch"], r["flash_attn"], r["parallel"]
        )
        err = round(ours - r["measured_mib"], 4)
        out.append({**r, "ours_mib": round(ours, 4), "error_mib": err, "held_out": held_out(r)})
    return out


def evaluate_rpc(data: dict[str, Any]) -> list[dict[str, Any]]:
    geos = {k: geometry_of(v) for k, v in data["models"].items()}
    out = []
    for r in data.get("rpc_rows", []):
        dev, host = predict_rpc(geos[r["model"]], r["context"], r["n_ubatch"], r["flash_attn"], 1)
        out.append({**r, "ours_rpc_mib": round(dev, 4), "ours_host_mib": round(host, 4),
                    "rpc_error_mib": round(dev - r["rpc_mib"], 4),
                    "host_error_mib": round(host - r["host_mib"], 4)})  # fmt: skip
    return out


def report(data: dict[str, Any]) -> str:
    rows = evaluate(data)
    lines = [f"llama.cpp {data['llama_cpp']}: {len(rows)} CPU rows"]
    for part, pick in (("fitted", False), ("held out", True)):
        sel = [r for r in rows if r["held_out"] is pick]
        worst = max(sel, key=lambda r: abs(r["error_mib"]), default=None)
        if worst:
            bad = sum(1 for r in sel if abs(r["error_mib"]) > TOL_MIB + 1e-9)
            lines.append(
                f"{part}: {len(sel)} rows, max |error| {abs(worst['error_mib']):.3f} MiB "
                f"({worst['model']} c{worst['context']} ub{worst['n_ubatch']} "
                f"fa{int(worst['flash_attn'])} np{worst['parallel']}), {bad} over {TOL_MIB} MiB"
            )
    rpc = evaluate_rpc(data)
    if rpc:
        dev = max(abs(r["rpc_error_mib"]) for r in rpc)
        host = max(abs(r["host_error_mib"]) for r in rpc)
        lines.append(f"RPC: {len(rpc)} rows, max |error| device {dev:.3f} MiB, host {host:.3f} MiB")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report-only", action="store_true", help="re-predict the recorded rows")
    ap.add_argument("--rpc", action="store_true", help="also measure an RPC (CPU) device")
    args = ap.parse_args()
    if args.report_only:
        data = json.loads(OUT.read_text())
    else:
        data = measure(args.rpc)
        if not args.rpc and OUT.exists():
            data["rpc_rows"] = json.loads(OUT.read_text()).get("rpc_rows", [])
        OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(report(data))


if __name__ == "__main__":
    main()
