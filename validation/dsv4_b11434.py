"""DeepSeek V4 (`deepseek4`) against llama.cpp b11434's own allocator, in exact bytes.

Writes the synthetic GGUFs of synth_dsv4.py (from RigSpark's synthesized tensor list),
checks that the GGUF importer reads each back into the geometry it was written from,
quantizes them with b11434's llama_model_quantize, and loads each on the CPU with b11434
(validation/b11434_probe.c, linked against the static libraries of
~/.cache/rigspark/llama-src/build, wrapping ggml's buffer allocation so every buffer's
exact size is logged) over context, sequences, K/V types, flash attention, a unified
cache, rollback snapshots (n_rs_seq) and a full-size window cache. Each case records the
measured buffers beside the catalog path's prediction (weights synthesized from the
geometry at the quantization, placed on the CPU with its repack):

    python validation/dsv4_b11434.py                 # build the probe, measure, write JSON
    python validation/dsv4_b11434.py --report-only   # re-predict the recorded cases
    python validation/dsv4_b11434.py --report-only --doc   # the docs/validation.md section

tests/validation/test_dsv4_b11434.py re-predicts every recorded case on every test run.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rigspark_gui.core.memory import (  # noqa: E402
    cpu_repack_bytes,
    device_compute_bytes,
    output_buffer_bytes,
    weights_layout,
)
from rigspark_gui.core.memory.arch_dsv4 import dsv4_layer_state_bytes  # noqa: E402
from rigspark_gui.core.model.model_spec import Geometry, ModelSpec  # noqa: E402
from rigspark_gui.core.placement import CPU, device_loads, uniform_placement  # noqa: E402
from rigspark_gui.formats.jsonable import jsonable  # noqa: E402
from rigspark_gui.formats.model_spec import Geometry as GeometryFile  # noqa: E402
from validation.agreement import compute_tolerance, cpu_rig  # noqa: E402
from validation.arch_b11434 import run_cli  # noqa: E402
from validation.hybrid_b11434 import FTYPES, MACHINE, parse_log, settings_of  # noqa: E402
from validation.hybrid_b11434 import build_probe as hybrid_build_probe  # noqa: E402

MIB = 1 << 20
OUT = Path(__file__).with_name("dsv4_b11434.json")
WORK = ROOT / "validation" / ".work" / "dsv4"
PROBE = WORK / "b11434_probe"
QUANTS = ("F16", "Q8_0", "Q4_K_M")
# the compressor states log as "DSV4 <csa|hca|lid> state buffer size": read them as state
_STATE_LINE = re.compile(r"DSV4 \w+ state buffer size")


def build_probe() -> None:
    """The probe (validation/b11434_probe.c) linked as validation/hybrid_b11434.py links it."""
    hybrid_build_probe(PROBE, "b11434_probe.c")


def _grid(quant: str) -> list[dict[str, Any]]:
    base = {"n_ctx": 4096, "n_seq": 1, "type_k": "f16", "type_v": "f16", "flash_attn": True}
    if quant != "F16":
        return [base]
    return [
        base,
        {**base, "flash_attn": False},
        {**base, "n_ctx": 1000, "flash_attn": False},
        {**base, "n_ctx": 65536, "type_k": "q8_0", "type_v": "q8_0"},
        {**base, "n_ctx": 16384, "n_seq": 4, "type_k": "q4_0", "type_v": "q4_0"},
        {**base, "n_ctx": 8192, "n_seq": 2, "n_rs_seq": 2},
        {**base, "n_ctx": 8192, "n_seq": 4},
        {**base, "n_ctx": 8192, "n_seq": 4, "kv_unified": True},
        {**base, "n_ctx": 131072},
        {**base, "swa_full": True},
        # the compute buffer's growth with the context, beyond the cases above: the
        # attention's f32 scores without flash attention, 262,144 tokens, two sequences
        {**base, "n_ctx": 32768, "flash_attn": False},
        {**base, "n_ctx": 262144},
        {**base, "n_ctx": 131072, "n_seq": 2, "type_k": "q8_0", "type_v": "q8_0"},
    ]


def spec_of(g: Geometry, quant: str) -> ModelSpec:
    return ModelSpec(id=g.architecture, name=g.architecture, geometry=g, quants=(quant,))


def predict(g: Geometry, quant: str, case: dict[str, Any]) -> dict[str, int]:
    """The catalog path's bytes for the case: every block and the head on the CPU."""
    s = dataclasses.replace(settings_of(case), swa_full=bool(case.get("swa_full")))
    spec = spec_of(g, quant)
    layout = weights_layout(spec, quant)
    repack = cpu_repack_bytes(spec, quant, MACHINE["cpu_features"])
    rig = cpu_rig(MACHINE)
    (load,) = device_loads(uniform_placement(g, rig, s, CPU), g, layout, rig, s, cpu_repack=repack)
    n_rs = case.get("n_rs_seq", 0)
    # the load's KV holds the compressor states without rollback snapshots (planning
    # drafts nothing): the caches are the rest
    states = sum(dsv4_layer_state_bytes(g, il, s) for il in range(g.n_layer))
    return {
        "weights": load.weights_bytes,
        "kv": load.kv_bytes - states,
        "state": sum(dsv4_layer_state_bytes(g, il, s, n_rs) for il in range(g.n_layer)),
        "output": output_buffer_bytes(g, s),
        "compute": device_compute_bytes(g, s, list(range(g.n_layer)), True, cpu=True),
    }


def measure_case(path: Path, c: dict[str, Any]) -> dict[str, Any]:
    cmd = [str(PROBE), "measure", str(path), str(c["n_ctx"]), str(c["n_seq"])]
    cmd += [c["type_k"], c["type_v"], str(int(c["flash_attn"]))]
    cmd += [str(c.get("n_rs_seq", 0)), str(int(c.get("kv_unified", False)))]
    cmd += [str(int(c.get("swa_full", False)))]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or "RSDONE" not in p.stderr:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    measured: dict[str, Any] = parse_log(_STATE_LINE.sub("RS buffer size", p.stderr))
    return measured


def measure() -> dict[str, Any]:
    from rigspark_gui.catalog.gguf_import import import_gguf
    from validation.synth_dsv4 import MODELS, write_gguf

    build_probe()
    models: dict[str, Any] = {}
    cases: list[dict[str, Any]] = []
    for name, g in MODELS.items():
        src = WORK / f"{name}-F16.gguf"
        write_gguf(g, src)
        models[name] = {
            "geometry": jsonable(g),
            "import_round_trip": import_gguf(src).geometry == g,
        }
        for quant in QUANTS:
            path = src
            if quant != "F16":
                path = WORK / f"{name}-{quant}.gguf"
                cmd = [str(PROBE), "quantize", str(src), str(path), str(FTYPES[quant])]
                subprocess.run(cmd, check=True, capture_output=True)
            for c in _grid(quant):
                m = measure_case(path, c)
                cases.append({"model": name, "quant": quant, **c, "measured": m})
                print(name, quant, c, {k: m[k] for k in ("weights", "kv", "state", "compute")})
    return {
        "llama_cpp": "b11434 (static libraries, ~/.cache/rigspark/llama-src/build)",
        "machine": MACHINE,
        "models": models,
        "cases": cases,
    }


def geometry_of(raw: dict[str, Any]) -> Geometry:
    record: Geometry = GeometryFile.model_validate(raw).to_record()
    return record


def evaluate(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each recorded case with `predicted` and `error` (predicted - measured) per buffer."""
    geos = {k: geometry_of(v["geometry"]) for k, v in data["models"].items()}
    out = []
    for c in data["cases"]:
        p = predict(geos[c["model"]], c["quant"], c)
        err = {k: p[k] - c["measured"][k] for k in p}
        out.append({**c, "predicted": p, "error": err})
    return out


def _label(c: dict[str, Any]) -> str:
    extra = [
        "unified" if c.get("kv_unified") else "",
        f"rs{c['n_rs_seq']}" if c.get("n_rs_seq") else "",
        "swa-full" if c.get("swa_full") else "",
    ]
    return " ".join(x for x in extra if x) or "-"


def report(data: dict[str, Any]) -> str:
    lines = [
        "| model | quant | ctx | K/V | FA | seq | other | weights B (err) | KV B (err) | "
        "states B (err) | output B (err) | compute MiB pred / act |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = evaluate(data)
    for r in rows:
        m, e, p = r["measured"], r["error"], r["predicted"]
        lines.append(
            f"| {r['model']} | {r['quant']} | {r['n_ctx']} | {r['type_k']} | "
            f"{'on' if r['flash_attn'] else 'off'} | {r['n_seq']} | {_label(r)} | "
            f"{m['weights']} ({e['weights']:+d}) | {m['kv']} ({e['kv']:+d}) | "
            f"{m['state']} ({e['state']:+d}) | {m['output']} ({e['output']:+d}) | "
            f"{p['compute'] / MIB:.2f} / {m['compute'] / MIB:.2f} |"
        )
    exact = sum(all(r["error"][k] == 0 for k in ("weights", "kv", "state", "output")) for r in rows)
    worst = max(rows, key=lambda r: abs(r["error"]["compute"]) / compute_tolerance(
        r["measured"]["compute"]))  # fmt: skip
    share = abs(worst["error"]["compute"]) / compute_tolerance(worst["measured"]["compute"])
    lines.append("")
    lines.append(
        f"Weights, KV, compressor states and output exact in {exact} of {len(rows)} cases. "
        f"Compute: worst error {worst['error']['compute'] / MIB:+.2f} MiB "
        f"({worst['model']} {worst['quant']} c{worst['n_ctx']}), {share:.0%} of the "
        "tolerance max(2 %, 32 MiB)."
    )
    return "\n".join(lines)


DOC_HEADER = "## DeepSeek V4 (compressed KV caches) against llama.cpp b11434"

DOC_INTRO = """
`validation/dsv4_b11434.py` writes two small synthetic `deepseek4` GGUFs from RigSpark's
own synthesized tensor list (`validation/synth_dsv4.py`), reads each back through the GGUF
importer (each returns the geometry it was written from), quantizes them with b11434's
`llama_model_quantize` and loads every file on the CPU with b11434 through
`validation/b11434_probe.c` (linked against the static libraries; ggml's buffer
allocation wrapped so each buffer's exact bytes are logged). llama.cpp refuses a file with
a missing required tensor, a wrong shape or a tensor it does not create, so each load
also proves the tensor list. The prediction is the catalog path's: weights synthesized
from the geometry at the quantization and placed on the CPU with its repack.
`tests/validation/test_dsv4_b11434.py` re-predicts every case.

The models: `deepseek4-like` (5 layers: two window-only, then CSA, HCA, CSA as in V4
Flash, two hash-routed layers, head_dim 128, indexer 4 x 64) and `deepseek4-wide` (V4
Flash's attention widths: head_dim 512, indexer of 128, window 128, 8 output groups; HCA
on layers 1 and 3, CSA on layer 4, three hash-routed layers). Both end on a CSA layer as
V4 Flash does: llama-quantize writes blocks in layer order and each block's tensors by
name, and the memory-mapped buffer ends where the last tensor's data ends, without its
alignment padding; a CSA block ends on `indexer_compressor_norm` (aligned), an HCA block
on the 3-float `hc_ffn_scale` (20 bytes of padding that RigSpark's layout counts and the
mapping does not).

What the quantized rows changed: the compressors' positional tables (`*_ape`, read by
GET_ROWS) and `attn_output_a` (2-D in the file, loaded reshaped to 3-D, one matrix per
output group) are never repacked for the CPU.

What llama.cpp allocates (src/llama-kv-cache-dsv4.cpp), and RigSpark now sizes per layer
and device: a K-only window cache on every layer (head_dim x n_head_kv per cell,
pad256(min(n_ctx_seq, window + n_ubatch)) cells per sequence, n_ctx_seq with
`--swa-full`); on ratio-4 (CSA) layers a K-only compressed cache of
pad256(ceil(n_ctx_seq / 4)) cells and the lightning indexer's of as many cells of
indexer_head_size values; on ratio-128 (HCA) layers one of pad256(ceil(n_ctx_seq / 128))
cells; all of the K cache type; and f32 compressor states (kv and score) of
2 x head_dim x 8 (CSA), 2 x indexer_head_size x 8 (indexer) and head_dim x 128 (HCA) rows
per sequence and rollback snapshot. Every one keeps a stream per sequence even with a
unified cache, whose streams are then each as long as the whole context: at 8192 tokens
over 4 sequences the unified cache holds four times the CSA and indexer rows of the split
one (HCA's stay at the 256-cell minimum either way).
"""


def doc_section(data: dict[str, Any]) -> str:
    return "\n".join([DOC_HEADER, DOC_INTRO, report(data), _COMPUTE_NOTE])


_COMPUTE_NOTE = """
The compute buffer follows DeepSeek V4's graph (`core/memory/compute_dsv4.py`, read off
deepseek4.cpp and checked on ggml-alloc's placements of these loads): it grows with the
compressed rows because of a CSA layer's sparse attention. Above the graph inputs (the
raw window's KQ mask and the indexer's, CSA's and HCA's, n_cells x n_tokens each) the
layer keeps three hyper-connection states of hc_mult rows, Q twice (its matmul output's
hole is not reused) and k_all (window and compressed rows in the K cache type); then the
indexer's f32 scores over the compressed rows, whose hole takes the filled and top-k
masks, the concatenated mask of the window and compressed cells, and the attention's
output (without flash attention the f32 scores of every head). In the last CSA layer the
indexer's and CSA's masks are freed as they are read, so only the scores sit above the
layer. The window-only and HCA layers are sized the same way over their own cells; the
FFN and head stay the generic phases. Six rows (32,768 tokens without flash
attention, 262,144 tokens, two sequences at 131,072) were added to check the model
beyond the cases it was read on. Every row is within 8 MiB: the one-sequence rows from
131,072 tokens on within 2 MiB, the 32,768-token row of `deepseek4-wide` without flash
attention 7 MiB under, the others over (small tensors find holes below the peak that the
estimate stacks).
"""


def main() -> None:
    run_cli(__doc__.splitlines()[0], OUT, measure, report, doc_section)


if __name__ == "__main__":
    main()
