"""Hybrid architectures (Gated DeltaNet, Mamba-2, short convolutions) against llama.cpp
b11434's own allocator, in exact bytes.

Writes the synthetic GGUFs of synth_hybrid.py, quantizes them with b11434's
llama_model_quantize, loads each on the CPU with b11434 (validation/b11434_probe.c, linked
against the static libraries of ~/.cache/rigspark/llama-src/build and wrapping ggml's
buffer allocation, so every buffer's exact size is logged) over a matrix of context,
sequences, K/V types, flash attention and rollback snapshots (n_rs_seq), and records
every buffer beside RigSpark's prediction for the imported GGUF header:

    python validation/hybrid_b11434.py               # build the probe, measure, write JSON
    python validation/hybrid_b11434.py --report-only  # re-predict the recorded cases

The recorded cases (validation/hybrid_b11434.json) are re-predicted by
tests/validation/test_hybrid_b11434.py on every test run.
"""

from __future__ import annotations

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
    recurrent_state_bytes,
    weights_layout,
)
from rigspark_gui.core.model.ggml_types import KvCacheType  # noqa: E402
from rigspark_gui.core.model.model_spec import ModelSpec  # noqa: E402
from rigspark_gui.core.placement import CPU, device_loads, uniform_placement  # noqa: E402
from rigspark_gui.core.settings import PlanSettings  # noqa: E402
from rigspark_gui.formats.jsonable import jsonable  # noqa: E402
from rigspark_gui.formats.model_spec import Geometry as GeometryFile  # noqa: E402
from rigspark_gui.formats.model_spec import ModelSpec as ModelSpecFile  # noqa: E402
from rigspark_gui.formats.model_spec import read_model_spec  # noqa: E402
from validation.agreement import compute_tolerance, cpu_rig  # noqa: E402
from validation.arch_b11434 import run_cli  # noqa: E402

MIB = 1 << 20
OUT = Path(__file__).with_name("hybrid_b11434.json")
WORK = ROOT / "validation" / ".work" / "hybrid"
PROBE = WORK / "b11434_probe"
SRC = Path.home() / ".cache/rigspark/llama-src"
# llama_ftype numbers (include/llama.h)
FTYPES = {"F16": 1, "Q8_0": 7, "Q4_0": 2, "Q4_K_M": 15}
# this machine, as validation/cases.json records it (repack rules read its features)
MACHINE = {
    "cpu_name": "AMD EPYC", "threads": 2, "cpu_features": ["avx2", "avx512"],
    "bandwidth_gbps": 26.7, "ram_total_bytes": 25276059648,
}  # fmt: skip


def build_probe(probe: Path = PROBE, source: str = "b11434_probe.c") -> None:
    """Link a probe (validation/`source`) against b11434's static libraries into `probe`
    (llama.cpp itself is not rebuilt)."""
    probe.parent.mkdir(parents=True, exist_ok=True)
    b = SRC / "build"
    wraps = [
        "ggml_backend_buft_alloc_buffer",
        "ggml_backend_buft_alloc_buffer_n",
        "ggml_backend_dev_buffer_from_host_ptr",
    ]
    cmd = ["gcc", "-O1", "-o", str(probe), str(ROOT / "validation" / source)]
    cmd += [f"-I{SRC / 'include'}", f"-I{SRC / 'ggml' / 'include'}"]
    cmd += [f"-Wl,--wrap={w}" for w in wraps]
    cmd += [str(b / "src/libllama.a"), str(b / "ggml/src/libggml.a")]
    cmd += [str(b / "ggml/src/ggml-rpc/libggml-rpc.a"), str(b / "ggml/src/libggml-cpu.a")]
    cmd += [str(b / "ggml/src/libggml-base.a"), "-lgomp", "-lpthread", "-lm", "-lstdc++", "-ldl"]
    subprocess.run(cmd, check=True)


_SHIM = re.compile(r"^RSBUF (?P<op>alloc|mapped) (?P<name>\S+) (?P<size>\d+)$")
_MIB = re.compile(
    r"(?P<name>\S+)\s+(?P<kind>model|output|KV|RS|compute) buffer size =\s+(?P<mib>[\d.]+) MiB"
)
_KIND = {"model": "weights", "KV": "kv", "RS": "state", "output": "output", "compute": "compute"}


def parse_log(log: str) -> dict[str, Any]:
    """Exact bytes of each buffer llama.cpp reports: the logged allocation of that buffer
    type whose size rounds to the MiB figure it prints."""
    pending: list[tuple[str, str, int]] = []
    out: dict[str, Any] = {k: 0 for k in _KIND.values()}
    out["buffers"] = []
    exact = True
    for line in log.splitlines():
        line = line.strip()
        if sm := _SHIM.match(line):
            if int(sm["size"]):
                pending.append((sm["op"], sm["name"], int(sm["size"])))
            continue
        mm = _MIB.search(line)
        if not mm or line.startswith("~"):
            continue
        name, mib = mm["name"], float(mm["mib"])
        want = "mapped" if name.endswith("_Mapped") else "alloc"
        size = None
        for i, (op, bname, n) in enumerate(pending):
            if op == want and (op == "mapped" or bname == name) and abs(n / MIB - mib) <= 0.0051:
                size = n
                del pending[i]
                break
        if size is None:
            exact = False
            size = round(mib * MIB)
        kind = _KIND[mm["kind"]]
        out[kind] += size
        out["buffers"].append({"kind": kind, "name": name, "bytes": size})
    out["exact"] = exact
    return out


def spec_json(spec: ModelSpec) -> dict[str, Any]:
    """The spec as the catalog's file format knows it (fields it does not know left out)."""
    raw: dict[str, Any] = jsonable(spec)
    out = {k: v for k, v in raw.items() if k in ModelSpecFile.model_fields}
    out["geometry"] = {k: v for k, v in raw["geometry"].items() if k in GeometryFile.model_fields}
    return out


def settings_of(case: dict[str, Any]) -> PlanSettings:
    return PlanSettings(
        context=case["n_ctx"],
        kv_k=KvCacheType(case["type_k"]),
        kv_v=KvCacheType(case["type_v"]),
        flash_attn=case["flash_attn"],
        parallel=case["n_seq"],
        kv_unified=case.get("kv_unified", False),
    )


def predict(spec: ModelSpec, case: dict[str, Any]) -> dict[str, int]:
    """RigSpark's bytes for the case: every block and the head on the CPU."""
    s = settings_of(case)
    g = spec.geometry
    quant = spec.available_quants[0]
    layout = weights_layout(spec, quant)
    repack = cpu_repack_bytes(spec, quant, MACHINE["cpu_features"])
    placement = uniform_placement(g, cpu_rig(MACHINE), s, CPU)
    (load,) = device_loads(placement, g, layout, cpu_rig(MACHINE), s, cpu_repack=repack)
    n_rs = case.get("n_rs_seq", 0)
    state = sum(recurrent_state_bytes(g, il, s, n_rs) for il in range(g.n_layer))
    return {
        "weights": load.weights_bytes,
        "kv": load.kv_bytes,
        "state": state,
        "state_in_load": load.state_bytes,
        "output": output_buffer_bytes(g, s),
        "compute": device_compute_bytes(g, s, list(range(g.n_layer)), True, cpu=True),
    }


def errors(spec: ModelSpec, case: dict[str, Any]) -> dict[str, int]:
    p, m = predict(spec, case), case["measured"]
    return {k: p[k] - m[k] for k in ("weights", "kv", "state", "output", "compute")}


def _grid(quant: str) -> list[dict[str, Any]]:
    base = {"n_ctx": 4096, "n_seq": 1, "type_k": "f16", "type_v": "f16", "flash_attn": True}
    cases = [base]
    if quant == "F16":
        cases += [
            {**base, "flash_attn": False},
            {**base, "n_ctx": 16384, "n_seq": 4},
            {**base, "n_ctx": 1000, "type_k": "q8_0", "type_v": "q8_0"},
            {**base, "n_seq": 2, "n_rs_seq": 3},
            {**base, "n_ctx": 8192, "n_seq": 4, "kv_unified": True},
        ]
    return cases


def measure(only: set[str] | None) -> dict[str, Any]:
    from rigspark_gui.catalog.gguf_import import import_gguf
    from validation.synth_hybrid import MODELS, write_gguf

    if not PROBE.exists():
        build_probe()
    models: dict[str, Any] = {}
    cases: list[dict[str, Any]] = []
    for m in MODELS:
        if only and m.name not in only:
            continue
        src = WORK / f"{m.name}-F32.gguf"
        write_gguf(m, src)
        for quant, ftype in FTYPES.items():
            path = WORK / f"{m.name}-{quant}.gguf"
            subprocess.run(
                [str(PROBE), "quantize", str(src), str(path), str(ftype)],
                check=True, capture_output=True,
            )  # fmt: skip
            key = f"{m.name}-{quant}"
            spec = import_gguf(path)
            models[key] = {"arch": m.geometry.architecture, "quant": quant, "spec": spec_json(spec)}
            for c in _grid(quant):
                cmd = [str(PROBE), "measure", str(path), str(c["n_ctx"]), str(c["n_seq"])]
                cmd += [c["type_k"], c["type_v"], str(int(c["flash_attn"]))]
                cmd += [str(c.get("n_rs_seq", 0)), str(int(c.get("kv_unified", False)))]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                if p.returncode != 0 or "RSDONE" not in p.stderr:
                    raise RuntimeError(f"{key}: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
                cases.append({"model": key, **c, "measured": parse_log(p.stderr)})
    return {
        "llama_cpp": "b11434 (static libraries, ~/.cache/rigspark/llama-src/build)",
        "machine": MACHINE,
        "models": models,
        "cases": cases,
    }


def report(data: dict[str, Any]) -> str:
    specs = {k: read_model_spec(v["spec"]) for k, v in data["models"].items()}
    lines = [
        "| model | ctx | K/V | FA | seq | rs_seq | weights MiB (err B) | KV MiB (err B) "
        "| state MiB (err B) | output MiB (err B) | compute MiB pred / act |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in data["cases"]:
        spec, m = specs[c["model"]], c["measured"]
        p, e = predict(spec, c), errors(spec, c)
        unified = " unified" if c.get("kv_unified") else ""
        lines.append(
            f"| {c['model']} | {c['n_ctx']} | {c['type_k']}/{c['type_v']} | "
            f"{'on' if c['flash_attn'] else 'off'} | {c['n_seq']}{unified} | "
            f"{c.get('n_rs_seq', 0)} | "
            f"{m['weights'] / MIB:.2f} ({e['weights']}) | {m['kv'] / MIB:.2f} ({e['kv']}) | "
            f"{m['state'] / MIB:.2f} ({e['state']}) | {m['output'] / MIB:.2f} ({e['output']}) | "
            f"{p['compute'] / MIB:.2f} / {m['compute'] / MIB:.2f} |"
        )
    worst = max(
        (abs(errors(specs[c["model"]], c)["compute"]) / compute_tolerance(c["measured"]["compute"])
         for c in data["cases"]), default=0.0,
    )  # fmt: skip
    lines.append("")
    lines.append(f"Worst compute error as a share of its tolerance: {worst:.0%}.")
    return "\n".join(lines)


def main() -> None:
    run_cli(__doc__.splitlines()[0], OUT, measure, report, only=True)


if __name__ == "__main__":
    main()
