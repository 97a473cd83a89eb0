"""MTP drafting (`--spec-type draft-mtp`) against llama.cpp b11434, in exact bytes.

Synthetic GGUFs that carry an MTP / NextN block after their trunk: Qwen3.5 and
Nemotron-H MoE (synth_hybrid.py), DeepSeek V3.2 and GLM-5 (synth_gemma_dsa.py, the MTP
block written last so that the mapped range grows by exactly its bytes). The Qwen3.5 one
is quantized with b11434 (F32, Q8_0, Q4_K_M); every file is loaded on the CPU by
validation/mtp_probe.c, which drives b11434's C API as common/speculative.cpp does
(load_mtp, the target with n_rs_seq = 3, then the LLAMA_CONTEXT_TYPE_MTP context) and
logs every ggml buffer's exact size; each case is also loaded without MTP, so the MTP
weights (the mapped file range grows by them) and the target's extra recurrent rows are
the differences. llama-server itself, where built, is run once with `--spec-type
draft-mtp` and its buffer lines are kept as it prints them (MiB).

    .venv/bin/python validation/mtp_b11434.py            # measure, write the json
    .venv/bin/python validation/mtp_b11434.py --report   # the recorded rows, predicted

tests/validation/test_mtp_b11434.py re-predicts the recorded rows.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))

from rigspark_gui.core.model.ggml_types import KvCacheType  # noqa: E402
from rigspark_gui.core.model.model_spec import ModelSpec  # noqa: E402
from rigspark_gui.core.plan.mtp import (  # noqa: E402
    mtp_compute_bytes,
    mtp_kv_bytes,
    mtp_weight_bytes,
    rollback_state_bytes,
)
from rigspark_gui.core.settings import PlanSettings  # noqa: E402
from validation.hybrid_b11434 import build_probe as hybrid_build_probe  # noqa: E402
from validation.server_log import server_log  # noqa: E402

SRC = Path.home() / ".cache/rigspark/llama-src"
SERVER = SRC / "build/bin/llama-server"
WORK = ROOT / "validation" / ".work" / "mtp"
PROBE = WORK / "mtp_probe"
QUANTIZER = ROOT / "validation" / ".work" / "hybrid" / "b11434_probe"  # hybrid_b11434.py
OUT = ROOT / "validation" / "mtp_b11434.json"
MODEL = "qwen35-gdn"
FTYPES = {"F32": 0, "Q8_0": 7, "Q4_K_M": 15}
# the other architectures, as written (F32 / F16), on GRID_MORE
MORE = ("nemotron-h-moe-mtp", "deepseek32-mtp-like", "glm-dsa-mtp-like")
# (n_ctx, n_seq, flash attention, unified)
GRID = (
    (4096, 1, True, False),
    (4096, 1, False, False),
    (16384, 4, True, False),
    (1000, 1, True, False),
    (8192, 4, True, True),
    (2048, 2, False, False),
    (256, 1, True, False),
)
GRID_MORE = (GRID[0], GRID[1], GRID[2], GRID[4], GRID[5], GRID[6])
_BUF = re.compile(r"^RSBUF (?P<op>alloc|mapped) (?P<name>\S+) (?P<size>\d+)$")
_LINE = re.compile(r"(?P<kind>model|output|KV|RS|compute) buffer size =\s+(?P<mib>[\d.]+) MiB")


def build_probe() -> None:
    """The probe (validation/mtp_probe.c) linked as validation/hybrid_b11434.py links it."""
    hybrid_build_probe(PROBE, "mtp_probe.c")


def parse(log: str) -> dict[str, dict[str, int]]:
    """Exact bytes per buffer kind, for the target ("target") and the MTP context
    ("mtp"): each logged allocation paired with the buffer line that follows it."""
    out: dict[str, dict[str, int]] = {"target": {}, "mtp": {}}
    part = "target"
    pending: int | None = None
    for line in log.splitlines():
        if line.startswith("RSMARK mtp"):
            part = "mtp"
        elif m := _BUF.match(line):
            if m["op"] == "mapped":
                out[part]["mapped"] = out[part].get("mapped", 0) + int(m["size"])
            if int(m["size"]):
                pending = int(m["size"])
        elif (m := _LINE.search(line)) and not line.startswith("~") and pending is not None:
            out[part][m["kind"]] = out[part].get(m["kind"], 0) + pending
            pending = None
    return out


def probe(path: Path, case: tuple[int, int, bool, bool], mtp: bool) -> dict[str, dict[str, int]]:
    ctx, seq, fa, unified = case
    args = [str(PROBE), "measure", str(path), str(ctx), str(seq), "f16", "f16"]
    args += [str(int(fa)), str(int(mtp)), str(int(unified))]
    r = subprocess.run(args, capture_output=True, text=True, check=True)
    return parse(r.stderr)


def settings_of(row: dict[str, Any]) -> PlanSettings:
    return PlanSettings(
        context=row["n_ctx"],
        parallel=row["n_seq"],
        flash_attn=row["flash_attn"],
        kv_unified=row["kv_unified"],
    )


def predict(spec: ModelSpec, row: dict[str, Any]) -> dict[str, int]:
    """RigSpark's MTP figures for the case, everything on the CPU."""
    s = settings_of(row)
    g = spec.geometry
    f16 = KvCacheType.F16
    compute = mtp_compute_bytes(g, s, "cpu", "cpu", f16)["cpu"]
    output = 4 * g.n_vocab * s.parallel
    return {
        "weights": sum(t for t, _ in mtp_weight_bytes(spec, None).values()),
        "kv": mtp_kv_bytes(g, s, f16, f16) * g.n_layer_nextn,
        "state": sum(rollback_state_bytes(g, s, il) for il in g.recurrent_layers),
        "output": output,
        "compute": compute - output,
    }


def run_server(path: Path, port: int) -> str:
    cmd = [
        str(SERVER), "-m", str(path), "--spec-type", "draft-mtp", "-c", "4096", "-np", "1",
        "-fa", "on", "--port", str(port), "-t", "2", "-ngl", "0", "-lv", "4",
    ]  # fmt: skip
    return server_log(cmd, 180)


def server_lines(log: str) -> list[str]:
    """The buffer lines and the MTP context's creation, as llama-server prints them."""
    keep = ("buffer size =", "creating MTP draft context", "n_rs_seq", "n_outputs_max ")
    lines = [x.strip() for x in log.splitlines() if any(k in x for k in keep)]
    return [re.sub(r"^[\d.]+ \w ", "", x).replace(str(WORK) + "/", "") for x in lines]


def write_model(name: str, path: Path) -> None:
    """Write one of the synthetic models (MODEL or MORE) to `path`."""
    import synth_gemma_dsa
    import synth_hybrid

    if name == MODEL:
        synth_hybrid.write_gguf(next(x for x in synth_hybrid.MODELS if x.name == name), path)
    elif name == synth_hybrid.NEMOTRON_MTP.name:
        synth_hybrid.write_gguf(synth_hybrid.NEMOTRON_MTP, path)
    else:
        g = {**synth_gemma_dsa.MODELS, **synth_gemma_dsa.MTP_MODELS}[name]
        synth_gemma_dsa.write_gguf(g, path, mtp_last=True)


def measure() -> dict[str, Any]:
    from rigspark_gui.catalog.gguf_import import import_gguf

    if not PROBE.exists():
        build_probe()
    src = WORK / f"{MODEL}-F32.gguf"
    write_model(MODEL, src)
    files: list[tuple[str, str, Path, tuple[tuple[int, int, bool, bool], ...]]] = []
    for quant, ftype in FTYPES.items():
        path = WORK / f"{MODEL}-{quant}.gguf"
        if quant != "F32":
            subprocess.run(
                [str(QUANTIZER), "quantize", str(src), str(path), str(ftype)],
                check=True, capture_output=True,
            )  # fmt: skip
        files.append((MODEL, quant, path, GRID if quant == "F32" else GRID[:1]))
    for name in MORE:
        path = WORK / f"{name}.gguf"
        write_model(name, path)
        files.append((name, "F32" if name.startswith("nemotron") else "F16", path, GRID_MORE))
    rows = []
    for name, quant, path, grid in files:
        spec = import_gguf(path)
        for case in grid:
            plain, mtp = probe(path, case, False), probe(path, case, True)
            measured = {
                # the mapped file range grows by the MTP tensors (a quantized file's
                # repacked copies, CPU_REPACK, are apart: not planned for MTP yet)
                "weights": mtp["target"]["mapped"] - plain["target"]["mapped"],
                "kv": mtp["mtp"].get("KV", 0),
                "state": mtp["target"].get("RS", 0) - plain["target"].get("RS", 0),
                "output": mtp["mtp"]["output"],
                "compute": mtp["mtp"]["compute"],
            }
            ctx, seq, fa, unified = case
            row = {"model": name, "quant": quant, "n_ctx": ctx, "n_seq": seq, "flash_attn": fa,
                   "kv_unified": unified, "measured": measured}  # fmt: skip
            row["predicted"] = predict(spec, row)
            rows.append(row)
            print(name, quant, case, measured, row["predicted"], flush=True)
    server: list[str] = []
    if SERVER.exists():
        server = server_lines(run_server(src, 18990))
    return {"build": "b11434", "backend": "CPU", "rows": rows, "server": server}


def main() -> None:
    if "--report" in sys.argv:
        data = json.loads(OUT.read_text())
        for r in data["rows"]:
            print(r["model"], r["quant"], r["n_ctx"], r["n_seq"], r["flash_attn"], r["measured"])
        for line in data["server"]:
            print(line)
        return
    OUT.write_text(json.dumps(measure(), indent=1) + "\n")


if __name__ == "__main__":
    main()
