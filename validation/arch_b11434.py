"""Gemma 4, Gemma 3n and DeepSeek sparse attention against llama.cpp b11434's own loader.

Writes the synthetic GGUFs of synth_gemma_dsa.py (from RigSpark's synthesized tensor
list), checks that the GGUF importer reads each file back into the geometry it was
written from, and loads each with `llama-server` of build b11434 under gdb: breakpoints
on ggml_backend_buft_alloc_buffer and ggml_backend_dev_buffer_from_host_ptr print every
buffer's exact byte size (the binaries are static, so the LD_PRELOAD shim of
run_validation.py cannot), matched to llama.cpp's own MiB lines. The server is stopped
once it listens. Each row records the measured bytes; the prediction is the catalog
path's (weights synthesized from the geometry at F16, not read from the header).

    python validation/arch_b11434.py                 # measure, write the JSON
    python validation/arch_b11434.py --report-only   # re-predict the recorded rows
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rigspark_gui.catalog.gguf_import import import_gguf  # noqa: E402
from rigspark_gui.core.memory import (  # noqa: E402
    device_compute_bytes,
    kv_total_bytes,
    output_buffer_bytes,
    weights_layout,
)
from rigspark_gui.core.model.ggml_types import KvCacheType  # noqa: E402
from rigspark_gui.core.model.model_spec import Geometry, ModelSpec  # noqa: E402
from rigspark_gui.core.settings import PlanSettings  # noqa: E402
from rigspark_gui.formats.jsonable import jsonable  # noqa: E402
from rigspark_gui.formats.model_spec import Geometry as GeometryBoundary  # noqa: E402
from validation.run_validation import parse_log  # noqa: E402
from validation.synth_gemma_dsa import MODELS, write_gguf  # noqa: E402

OUT = Path(__file__).with_name("arch_b11434.json")
WORK = ROOT / "validation" / ".work" / "arch"
BIN = Path(os.environ.get("LLAMA_BIN", Path.home() / ".cache/rigspark/llama-src/build/bin"))
PORT = 18990
# (context, flash attention, K/V cache type)
SETTINGS: tuple[tuple[int, bool, str], ...] = (
    (4096, False, "f16"),
    (4096, True, "f16"),
    (16384, True, "q8_0"),
    (1000, False, "f16"),
)
_GDB = """set pagination off
set print thread-events off
set breakpoint pending on
break ggml_backend_buft_alloc_buffer
commands
silent
printf "RSBUF alloc %s %lu\\n", (const char*)ggml_backend_buft_name($rdi), $rsi
continue
end
break ggml_backend_dev_buffer_from_host_ptr
commands
silent
printf "RSBUF mapped host %lu\\n", $rdx
continue
end
run
"""


def settings(ctx: int, fa: bool, kv: str) -> PlanSettings:
    t = KvCacheType(kv)
    return PlanSettings(context=ctx, flash_attn=fa, kv_k=t, kv_v=t, parallel=1)


def run_server(
    path: Path, ctx: int, fa: bool, kv: str, load_mode: str = "auto", timeout: float = 240
) -> str:
    """llama-server's log (with the RSBUF lines) up to 'listening'."""
    script = WORK / "bufs.gdb"
    script.write_text(_GDB)
    cmd = ["gdb", "-q", "-batch", "-x", str(script), "--args", str(BIN / "llama-server")]
    cmd += ["-m", str(path), "-c", str(ctx), "-np", "1", "-fa", "on" if fa else "off"]
    cmd += ["-ctk", kv, "-ctv", kv, "-ub", "512", "--port", str(PORT), "-lv", "4"]
    cmd += ["-lm", load_mode]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    start = time.monotonic()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.split(" I ", 1)[-1] if " I " in line else line)
            if "listening on" in line or time.monotonic() - start > timeout:
                break
    finally:
        # the server runs as gdb's child: end it by its id, then gdb
        kids = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        for pid in kids.stdout.split():
            subprocess.run(["kill", pid], check=False)
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    return "".join(lines)


def predict(g: Geometry, ctx: int, fa: bool, kv: str) -> dict[str, int]:
    """The catalog path: tensors synthesized from the geometry at F16."""
    spec = ModelSpec(id=g.architecture, name=g.architecture, geometry=g, quants=("F16",))
    s = settings(ctx, fa, kv)
    return {
        "weights": weights_layout(spec, "F16").total_bytes,
        "kv": kv_total_bytes(g, s),
        "compute": device_compute_bytes(g, s, list(range(g.n_layer)), True, cpu=True),
        "output": output_buffer_bytes(g, s),
    }


def measure() -> dict[str, Any]:
    WORK.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    models: dict[str, Any] = {}
    for name, g in MODELS.items():
        path = WORK / f"{name}.gguf"
        skipped = write_gguf(g, path)
        imported = import_gguf(path).geometry
        models[name] = {
            "geometry": jsonable(g),
            "import_round_trip": imported == g,
            "skipped_bytes": skipped,
        }
        # an MTP model also without mmap: the CPU buffer then holds what is loaded, while
        # the mapped range spans the skipped block lying between loaded tensors
        extra = [(4096, True, "f16", "none")] if g.n_layer_nextn else []
        for ctx, fa, kv, mode in [(*st, "auto") for st in SETTINGS] + extra:
            log = run_server(path, ctx, fa, kv, mode)
            m = parse_log(log)
            if not m["buffers"]:
                raise SystemExit(f"{name}: no buffer lines\n{log[-3000:]}")
            rows.append({"model": name, "context": ctx, "flash_attn": fa, "kv_type": kv,
                         "load_mode": mode,
                         "measured": {k: m[k] for k in ("weights", "kv", "compute", "output")},
                         "exact": m["exact"], "buffers": m["buffers"]})  # fmt: skip
            print(name, ctx, fa, kv, {k: m[k] for k in ("weights", "kv", "compute", "output")})
    return {"llama_cpp": "b11434 (llama-server under gdb)", "models": models, "rows": rows}


def geometry_of(raw: dict[str, Any]) -> Geometry:
    record: Geometry = GeometryBoundary.model_validate(raw).to_record()
    return record


def evaluate(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each recorded row with `predicted` and `error` (predicted - measured) per buffer."""
    geos = {k: geometry_of(v["geometry"]) for k, v in data["models"].items()}
    out = []
    for r in data["rows"]:
        p = predict(geos[r["model"]], r["context"], r["flash_attn"], r["kv_type"])
        err = {k: p[k] - r["measured"][k] for k in p}
        out.append({**r, "predicted": p, "error": err})
    return out


def report(data: dict[str, Any]) -> str:
    lines = []
    for r in evaluate(data):
        e = r["error"]
        lines.append(
            f"{r['model']} c{r['context']} fa{int(r['flash_attn'])} {r['kv_type']} "
            f"{r.get('load_mode', 'auto')}: "
            f"weights {e['weights']:+d} B, KV {e['kv']:+d} B, output {e['output']:+d} B, "
            f"compute {e['compute'] / (1 << 20):+.2f} MiB of "
            f"{r['measured']['compute'] / (1 << 20):.2f}"
        )
    return "\n".join(lines)


DOC_HEADER = "## Gemma 4, Gemma 3n and DeepSeek sparse attention against llama.cpp b11434"

DOC_INTRO = """
`validation/arch_b11434.py` writes a small synthetic GGUF of each architecture from
RigSpark's own synthesized tensor list (`validation/synth_gemma_dsa.py`: every matrix
llama-quantize would quantize at F16), reads it back through the GGUF importer (each file
returns the geometry it was written from) and loads it with `llama-server` of build b11434
(CPU, `-np 1`, `-ub 512`) under gdb, whose breakpoints on `ggml_backend_buft_alloc_buffer`
and `ggml_backend_dev_buffer_from_host_ptr` log every buffer's exact bytes (the binaries
are static: the LD_PRELOAD shim above cannot reach them). llama.cpp refuses a file with a
missing required tensor, a wrong shape or a tensor it does not create, so each load also
proves the tensor list. The prediction is the catalog path's (weights synthesized from the
geometry, not read from the header). `tests/validation/test_arch_b11434.py` re-predicts
every row, and pins the non-SWA cache a user posted for Gemma 4 E4B (ggml-org/llama.cpp
issue #21730: 2048.00 MiB for 131072 cells and 4 layers).

The models: `gemma4-e2b-like` (4 sliding + 1 full, head dims 64 / 128, the last five
layers reusing the caches of layers 3 and 4, double-wide MLP there, per-layer
embeddings); `gemma4-ple-like` (the same with E2B's per-layer width of 256);
`gemma4-moe-like` (31B / 26B-A4B: 2 KV heads on sliding layers, 1 on full layers that use
K as V, a dense FFN beside 8 experts with fused gate/up); `gemma3n-like` (25 layers, the
first 20 owning a cache, AltUp and LAuReL); `deepseek32-like`, `glm-dsa-like` (MLA latent
256 + 32 and a lightning indexer of 4 x 64, a dense lead layer, 8 experts and a shared
one); `deepseek32-mtp-like` (the same plus one MTP block, also loaded with `-lm none`).

What it changed in the engine: each layer's own head dims and KV heads; layers that reuse
another layer's cache hold none; without flash attention every layer's V row is as wide as
the widest layer's (llama.cpp: "padding V cache to 128"); the DSA indexer keeps a K-only
cache of `indexer_head_size` values per token and layer, of the K cache type, and adds
its mask and f32 scores to the compute buffer; the per-layer token table is an input
tensor (host memory) and the projected per-layer inputs stay in the compute buffer
through every layer; matrices llama-quantize leaves alone that the converter does not
force to F32 (`per_layer_model_proj`, AltUp, LAuReL) stay 16-bit; an MTP block is a layer
slot without KV whose tensors llama.cpp skips at load (but for its router bias) unless
drafting with it. Memory-mapped, the CPU buffer is the file range from the first loaded
tensor to the last, so a skipped block lying between them still counts there (the mmap
rows of `deepseek32-mtp-like` are over by exactly its bytes); without mmap, and on a GPU,
only what is loaded. The same holds, read from the source and not measured here, for the
MTP blocks of `deepseek2` and `glm4moe` (GLM-4.5 / 4.6 / 4.7), whose loaders skip every
tensor of the block; with `--spec-type draft-mtp` llama.cpp loads them and gives the
draft context a KV cache of those layers alone, which RigSpark does not plan yet.
"""


def doc_section(data: dict[str, Any]) -> str:
    lines = [DOC_HEADER, DOC_INTRO]
    lines.append("| model | ctx | FA | K/V | load | weights B (err) | KV B (err) | "
                 "output B (err) | compute MiB pred / act |")  # fmt: skip
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for r in evaluate(data):
        m, e, p = r["measured"], r["error"], r["predicted"]
        lines.append(
            f"| {r['model']} | {r['context']} | {'on' if r['flash_attn'] else 'off'} | "
            f"{r['kv_type']} | {r.get('load_mode', 'auto')} | {m['weights']} "
            f"({e['weights']:+d}) | {m['kv']} ({e['kv']:+d}) | {m['output']} "
            f"({e['output']:+d}) | {p['compute'] / MIB:.2f} / {m['compute'] / MIB:.2f} |"
        )
    rows = evaluate(data)
    exact = sum(
        r["error"]["kv"] == 0
        and r["error"]["output"] == 0
        and r["error"]["weights"]
        == (-data["models"][r["model"]]["skipped_bytes"] if r.get("load_mode") == "auto" else 0)
        for r in rows
    )
    lines.append("")
    lines.append(
        f"Weights, KV and output as predicted in {exact} of {len(rows)} rows (0 bytes off; "
        "the mmap rows of the MTP model over by exactly the skipped block, as explained)."
    )
    for arch in sorted({data["models"][r["model"]]["geometry"]["architecture"] for r in rows}):
        sel = [r for r in rows if data["models"][r["model"]]["geometry"]["architecture"] == arch]
        worst = max(sel, key=lambda r: abs(r["error"]["compute"]))
        tol = max(0.02 * worst["measured"]["compute"], 32 * MIB)
        verdict = "within" if abs(worst["error"]["compute"]) <= tol else "outside"
        lines.append(
            f"- {arch}: compute max |error| {abs(worst['error']['compute']) / MIB:.2f} MiB "
            f"({worst['model']} c{worst['context']}), {verdict} the tolerance max(2 %, 32 MiB)"
        )
    lines.append(
        "\nGemma 3n's compute peaks, on these small-vocabulary models, at the per-layer "
        "inputs' projection before the first layer (`core/memory/compute_gemma3n.py`, read "
        "off gemma3n.cpp and checked on ggml-alloc's placements): the selected per-layer "
        "rows, the projection and its norm, each f32 n_embd_per_layer x n_layer per token, "
        "above the hole the freed lookup leaves, over the CPU inputs. On the published "
        "models the logits phase (262,144 entries per token) is larger."
    )
    lines.append("")
    return "\n".join(lines)


MIB = 1 << 20


def run_cli(
    description: str,
    out: Path,
    measure_all: Callable[..., Any],
    report_of: Callable[[Any], str],
    doc_of: Callable[[Any], str] | None = None,
    *,
    only: bool = False,
) -> None:
    """The command line of a b11434 suite: measure (or re-read `out` with
    --report-only), keep the rows, print the report or the docs section (--doc, where
    the suite writes one). `only`: the suite measures some synthetic models by name
    (--only NAME ...), given to `measure_all` as a set (None: all)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--report-only", action="store_true")
    if doc_of is not None:
        ap.add_argument("--doc", action="store_true", help="print the docs/validation.md section")
    if only:
        ap.add_argument("--only", nargs="*", help="synthetic model names")
    args = ap.parse_args()
    if args.report_only:
        data = json.loads(out.read_text())
    else:
        data = measure_all(set(args.only) if args.only else None) if only else measure_all()
        out.write_text(json.dumps(data, indent=1) + "\n")
    print(doc_of(data) if doc_of is not None and args.doc else report_of(data))


def main() -> None:
    run_cli(__doc__.splitlines()[0], OUT, measure, report, doc_section)


if __name__ == "__main__":
    main()
