"""Time llama.cpp's CPU backend on this machine, one synthetic model per ggml type, and
compare with the plan's uncalibrated CPU estimate.

Each model is a Llama-style decoder whose matrices are written directly in the target
type (zero blocks: kernel speed does not depend on the values, and the file needs no
quantizer; see `_raw`). llama-server (b11434, built in ~/.cache/rigspark/llama-src) loads it on the
CPU; one request per repeat sends a 128-token prompt and asks for 64 tokens, and the
server's own `timings` give prompt and generation speed. The best of the repeats is
kept (the machine's cores are shared: a slower repeat is someone else's load).

    .venv/bin/python validation/speed_local.py measure [--types Q4_K,Q8_0] [--repeats 3]
    .venv/bin/python validation/speed_local.py summary      # the best figure of each type
    .venv/bin/python validation/speed_local.py bench --device NAME   # llama-bench samples

Measurements go to validation/speed_local.json (committed: the doc's table reads it).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter

from rigspark_gui.calibrate.synth import add_sentencepiece_vocab

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "validation" / ".work" / "speed"
OUT = ROOT / "validation" / "speed_local.json"
SERVER = Path.home() / ".cache" / "rigspark" / "llama-src" / "build" / "bin" / "llama-server"
PROMPT = 128
GEN = 64
CTX = 1024
GIB = 1 << 30


@dataclass(frozen=True)
class Geometry:
    name: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int = 32000
    head_dim: int = 128


# Both far larger than the 48 MiB last-level cache here, so decode streams from RAM.
GEOMETRIES = {
    "s8x2048": Geometry("s8x2048", 8, 2048, 16, 4, 5632),  # 0.47 B parameters
    "s16x3072": Geometry("s16x3072", 16, 3072, 24, 8, 8192),  # 1.81 B parameters
}
# The type of output.weight llama-quantize gives each file type (Q6_K for the K, IQ and
# legacy 4/5-bit mixes; the base type otherwise).
TYPES: dict[str, str] = {
    "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q6_K": "Q6_K", "Q5_K": "Q6_K",
    "Q4_K": "Q6_K", "Q4_0": "Q6_K", "IQ4_NL": "Q6_K", "IQ4_XS": "Q6_K", "Q3_K": "Q6_K",
    "Q2_K": "Q6_K", "IQ3_S": "Q6_K", "IQ2_XXS": "Q6_K", "MXFP4": "Q8_0",
}  # fmt: skip
DEFAULT_RUNS = {
    "s8x2048": list(TYPES),
    "s16x3072": ["Q8_0", "Q6_K", "Q4_K", "Q4_0", "IQ4_XS", "Q2_K"],
}


def _tensors(g: Geometry) -> list[tuple[str, tuple[int, ...]]]:
    """(name, ggml shape ne0 first) of a Llama decoder."""
    e, q, kv = g.n_embd, g.n_head * g.head_dim, g.n_head_kv * g.head_dim
    out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (e, g.n_vocab))]
    for i in range(g.n_layer):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", (e,)),
            (p + "attn_q.weight", (e, q)),
            (p + "attn_k.weight", (e, kv)),
            (p + "attn_v.weight", (e, kv)),
            (p + "attn_output.weight", (q, e)),
            (p + "ffn_norm.weight", (e,)),
            (p + "ffn_gate.weight", (e, g.n_ff)),
            (p + "ffn_up.weight", (e, g.n_ff)),
            (p + "ffn_down.weight", (g.n_ff, e)),
        ]
    out += [("output_norm.weight", (e,)), ("output.weight", (e, g.n_vocab))]
    return out


# Zero blocks, not random bytes: random bytes make the F16 scales of quantized blocks
# tiny or non-finite, and the float work on them ran Q8_0 decode 2x slower (llama-bench
# b11434, AMD EPYC 2 vCPU, 2026-12), which no real model does; an F16 model of random
# finite values decoded as fast as the zero one (51-52 tok/s both).
def _raw(shape: tuple[int, ...], type_name: str) -> tuple[np.ndarray, GGMLQuantizationType]:
    qt = GGMLQuantizationType[type_name]
    block, nbytes = GGML_QUANT_SIZES[qt]
    row = shape[0] // block * nbytes
    return np.zeros((*reversed(shape[1:]), row), dtype=np.uint8), qt


def write_model(g: Geometry, type_name: str, path: Path) -> Path:
    w = GGUFWriter(str(path), "llama")
    w.add_name("synthetic")
    w.add_context_length(4096)
    w.add_embedding_length(g.n_embd)
    w.add_block_count(g.n_layer)
    w.add_feed_forward_length(g.n_ff)
    w.add_head_count(g.n_head)
    w.add_head_count_kv(g.n_head_kv)
    w.add_rope_dimension_count(g.head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    add_sentencepiece_vocab(w, g.n_vocab)
    for name, shape in _tensors(g):
        if len(shape) == 1:
            w.add_tensor(name, np.ones(shape, dtype=np.float32))
            continue
        t = TYPES[type_name] if name == "output.weight" else type_name
        data, qt = _raw(shape, t)
        w.add_tensor(name, data, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(port: int, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/completion",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def time_model(path: Path, threads: int, repeats: int, nice: int = 0) -> dict[str, Any]:
    port = _free_port()
    # a shared machine: a raised priority keeps other jobs from preempting llama.cpp's
    # spinning threads mid-token (which costs far more than the CPU time taken)
    prefix = ["nice", "-n", str(nice)] if nice else []
    cmd = [*prefix,
        str(SERVER), "-m", str(path), "-t", str(threads), "-c", str(CTX), "-np", "1",
        "--port", str(port), "--host", "127.0.0.1", "-ngl", "0", "--no-warmup",
    ]  # fmt: skip
    log = path.with_suffix(".log").open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError(f"llama-server did not come up for {path.name}")
        prompt = [1] + [300 + (i * 37) % 20000 for i in range(PROMPT - 1)]
        body = {
            "prompt": prompt, "n_predict": GEN, "ignore_eos": True, "cache_prompt": False,
            "temperature": 0.0, "samplers": ["top_k"], "top_k": 1,
        }  # fmt: skip
        _post(port, {**body, "n_predict": 4})  # warm the pages and the threads
        pp, tg = [], []
        for _ in range(repeats):
            t = _post(port, body)["timings"]
            pp.append(float(t["prompt_per_second"]))
            tg.append(float(t["predicted_per_second"]))
        return {"pp": pp, "tg": tg}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


BENCH = SERVER.with_name("llama-bench")


def bench_model(path: Path, threads: int, repeats: int) -> dict[str, Any]:
    """llama-bench's own samples: pp128 from an empty context, tg64 after 128 tokens (the
    depth the llama-server runs decode at)."""
    out: dict[str, Any] = {}
    for kind, args in (("pp", ["-p", str(PROMPT), "-n", "0"]),
                       ("tg", ["-p", "0", "-n", str(GEN), "-d", str(PROMPT)])):  # fmt: skip
        cmd = [str(BENCH), "-m", str(path), "-t", str(threads), "-r", str(repeats),
               "-o", "json", *args]  # fmt: skip
        res = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        out[kind] = [float(v) for v in res[0]["samples_ts"]]
        out["cpu_info"] = res[0].get("cpu_info", "")
    return out


def bench(args: argparse.Namespace) -> int:
    """Time every type with llama-bench; runs go under "bench_runs" with this machine's
    name, bandwidth (the app's probe) and CPU model."""
    from rigspark_gui.hardware.bandwidth_probe import clear_cache, measure_ram_bandwidth
    from rigspark_gui.hardware.core_probe import measure_core_scaling

    WORK.mkdir(parents=True, exist_ok=True)
    data = json.loads(OUT.read_text()) if OUT.exists() else {"runs": []}
    wanted = args.types.split(",") if args.types else list(TYPES)
    for t in wanted:
        path = WORK / f"s8x2048-{t}.gguf"
        if not path.exists():
            write_model(GEOMETRIES["s8x2048"], t, path)
        # the probe right before each type: a shared VM's bandwidth moves with its
        # neighbours over minutes, and a row pairs a speed with the bandwidth of its moment
        clear_cache()
        bw = measure_ram_bandwidth(threads=args.threads)
        scaling = measure_core_scaling(args.threads)  # the guest's vCPUs timed together
        load = _load_avg()
        r = bench_model(path, args.threads, args.repeats)
        data.setdefault("bench_runs", []).append({
            "device": args.device, "geometry": "s8x2048", "type": t, "threads": args.threads,
            "file_bytes": path.stat().st_size, "pp": r["pp"], "tg": r["tg"],
            "cpu_info": r["cpu_info"], "bandwidth_gbps": bw.bandwidth_gbps, "weights": "zero",
            "bandwidth_note": bw.provenance.source, "bandwidth_busy": bw.busy,
            "compute_cores": scaling.compute_cores, "compute_cores_busy": scaling.busy,
            "load_before": round(load, 2),
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        })  # fmt: skip
        OUT.write_text(json.dumps(data, indent=1) + "\n")
        print(f"{t:<8} tg {max(r['tg']):6.1f}  pp {max(r['pp']):7.1f}  load {load:.2f}", flush=True)
    return 0


def _load_avg() -> float:
    return os.getloadavg()[0]


def measure(args: argparse.Namespace) -> int:
    WORK.mkdir(parents=True, exist_ok=True)
    data = json.loads(OUT.read_text()) if OUT.exists() else {"runs": []}
    wanted = args.types.split(",") if args.types else None
    for gname, types in DEFAULT_RUNS.items():
        if args.geometry and gname != args.geometry:
            continue
        for t in types:
            if wanted and t not in wanted:
                continue
            path = WORK / f"{gname}-{t}.gguf"
            if not path.exists():
                write_model(GEOMETRIES[gname], t, path)
            load = _load_avg()
            r = time_model(path, args.threads, args.repeats, args.nice)
            run = {
                "geometry": gname, "type": t, "threads": args.threads, "file_bytes":
                path.stat().st_size, "prompt": PROMPT, "generated": GEN, "pp": r["pp"],
                "tg": r["tg"], "load_before": round(load, 2),
                "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            }  # fmt: skip
            data["runs"].append(run)
            OUT.write_text(json.dumps(data, indent=1) + "\n")
            print(
                f"{gname} {t:<8} tg {max(r['tg']):6.1f} "
                f"(runs {', '.join(f'{v:.1f}' for v in r['tg'])})"
                f"  pp {max(r['pp']):7.1f}  load {load:.2f}",
                flush=True,
            )
            if not args.keep:
                path.unlink()
    return 0


# A figure counts when its two best requests agree within this share: a request another
# job preempted is slower by 2-40x, so two close best requests were both undisturbed.
STABLE = 0.10


def best_runs() -> dict[tuple[str, str], dict[str, float]]:
    """The best tg and pp of every (geometry, type) over all recorded runs, and whether
    each is stable (its two best requests within STABLE of each other)."""
    data = json.loads(OUT.read_text())
    seen: dict[tuple[str, str], dict[str, list[float]]] = {}
    size: dict[tuple[str, str], int] = {}
    for run in data["runs"]:
        key = (run["geometry"], run["type"])
        got = seen.setdefault(key, {"tg": [], "pp": []})
        got["tg"] += run["tg"]
        got["pp"] += run["pp"]
        size[key] = run["file_bytes"]
    out: dict[tuple[str, str], dict[str, float]] = {}
    for key, got in seen.items():
        best: dict[str, float] = {"n": len(got["tg"]), "file_bytes": size[key]}
        for kind in ("tg", "pp"):
            v = sorted(got[kind], reverse=True)
            best[kind] = v[0]
            best[f"{kind}_stable"] = float(len(v) >= 2 and v[1] >= (1 - STABLE) * v[0])
        out[key] = best
    return out


DEVICE = "Intel Xeon (Ice Lake) 2 vCPU VM, this project's validation machine"
BANDWIDTH_GBPS = 20.0  # the app's own probe on this VM (read stream, 2 threads, median of 7)
QUANT_LABEL = {"Q4_K": "Q4_K_S", "Q5_K": "Q5_K_S", "Q3_K": "Q3_K_S", "Q2_K": "Q2_K_S"}


def _arch(g: Geometry) -> dict[str, Any]:
    """The `arch` of a synthetic model's perf.json rows (what a token reads)."""
    params = sum(int(np.prod(shape)) for _n, shape in _tensors(g))
    return {
        "n_layer": g.n_layer, "n_vocab": g.n_vocab, "n_embd": g.n_embd,
        "kv_values_per_token": g.n_layer * 2 * g.n_head_kv * g.head_dim,
        "params_b": round(params / 1e9, 4),
    }  # fmt: skip


def perf_rows() -> list[dict[str, Any]]:
    """data/perf.json rows of the best runs (device held out as one in the fit)."""
    rows = []
    for (gname, t), best in sorted(best_runs().items()):
        g = GEOMETRIES[gname]
        arch = _arch(g)
        for kind, tokens, depth in (("pp", PROMPT, 0), ("tg", GEN, PROMPT)):
            if not best[f"{kind}_stable"]:
                continue  # never timed undisturbed: its best is someone else's load
            rows.append({
                "device": DEVICE, "backend": "cpu", "n_devices": 1,
                "model": f"synthetic llama {gname} {t}",
                "size_gib": round(best["file_bytes"] / GIB, 4),
                "params_b": arch["params_b"], "quant": QUANT_LABEL.get(t, t), "moe": False,
                "active_params_b": None, "test": f"{kind}{tokens}", "depth": depth,
                "tok_s": round(best[kind], 2), "threads": 2, "cpu_cores": 2, "flash_attn": None,
                "isa": "avx512-vnni", "bandwidth_gbps": BANDWIDTH_GBPS,
                "bandwidth_basis": "measured",
                "vcpu": True, "arch": arch,
                "source": "validation/speed_local.py (llama-server b11434, timings of /completion)",
                "date": "2026-12", "build": "b11434",
                "note": f"best of {int(best['n'])} timed requests on a shared 2-core VM (Xeon "
                "Ice Lake, avx512_vnni, no AMX); every matrix in the one type, output.weight "
                "as llama-quantize types it; bandwidth: the app's read-stream probe",
            })  # fmt: skip
    return rows


BENCH_SOURCE = "validation/speed_local.py bench (llama-bench b11434, samples_ts)"


def _best(values: list[float]) -> tuple[float, bool]:
    v = sorted(values, reverse=True)
    return v[0], len(v) >= 2 and v[1] >= (1 - STABLE) * v[0]


def _calm_median(runs: list[dict[str, Any]], field: str, busy: str) -> dict[str, float]:
    """Per device, the median of a probe's figure over the runs where it was not busy."""
    seen: dict[str, list[float]] = {}
    for run in runs:
        if run.get(field) is not None and not run.get(busy):
            seen.setdefault(run["device"], []).append(float(run[field]))
    return {d: round(statistics.median(v), 2) for d, v in seen.items()}


def bench_rows() -> list[dict[str, Any]]:
    """data/perf.json rows of the llama-bench runs: per device and type, the best sample
    when the two best agree within STABLE (else the figure is someone else's load)."""
    data = json.loads(OUT.read_text())
    runs = data.get("bench_runs", [])
    got: dict[tuple[str, str], dict[str, Any]] = {}
    for run in runs:
        key = (run["device"], run["type"])
        g = got.setdefault(key, {"pp": [], "tg": [], "run": run})
        # each sample with the bandwidth probed right before its run (a busy probe's
        # figure is no figure: the device's calm median stands in)
        bw = None if run.get("bandwidth_busy") else run["bandwidth_gbps"]
        g["pp"] += [(v, bw) for v in run["pp"]]
        g["tg"] += [(v, bw) for v in run["tg"]]
    calm_bw = _calm_median(runs, "bandwidth_gbps", "bandwidth_busy")
    # how the vCPUs share cores is the machine's, not the moment's: its calm median
    cores_of = _calm_median(runs, "compute_cores", "compute_cores_busy")
    rows = []
    for (device, t), g in sorted(got.items()):
        geo = GEOMETRIES[g["run"]["geometry"]]
        arch = _arch(geo)
        for kind, tokens, depth in (("pp", PROMPT, 0), ("tg", GEN, PROMPT)):
            best, stable = _best([v for v, _bw in g[kind]])
            if not stable:
                continue
            _v, bw = max(g[kind], key=lambda s: s[0])  # the best sample's moment
            bw = bw if bw is not None else calm_bw.get(device)
            cores = cores_of.get(device)
            rows.append({
                "device": device, "backend": "cpu", "n_devices": 1,
                "model": f"synthetic llama {geo.name} {t}",
                "size_gib": round(g["run"]["file_bytes"] / GIB, 4), "params_b": arch["params_b"],
                "quant": QUANT_LABEL.get(t, t), "moe": False, "active_params_b": None,
                "test": f"{kind}{tokens}", "depth": depth, "tok_s": round(best, 2),
                "threads": g["run"]["threads"], "cpu_cores": g["run"]["threads"],
                "flash_attn": None, "isa": "avx512-vnni",
                "bandwidth_gbps": bw, "bandwidth_basis": "measured", "vcpu": True,
                "compute_cores": cores,
                "arch": arch, "source": BENCH_SOURCE, "date": g["run"]["when"][:7],
                "build": "b11434",
                "note": f"best of {len(g[kind])} llama-bench samples on a shared 2-vCPU KVM "
                f"guest ({g['run']['cpu_info']}, Zen 4, avx512_vnni/bf16, no AMX; the guest "
                "sees 1 thread per core); every matrix in the one type, output.weight as "
                "llama-quantize types it; bandwidth: the app's read-stream probe, run right "
                "before the best sample's run",
            })  # fmt: skip
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--types", default="")
    m.add_argument("--geometry", default="")
    m.add_argument("--threads", type=int, default=2)
    m.add_argument("--repeats", type=int, default=3)
    m.add_argument("--keep", action="store_true")
    m.add_argument("--nice", type=int, default=0, help="niceness of llama-server (-10: ahead)")
    b = sub.add_parser("bench", help="time every type with llama-bench (b11434)")
    b.add_argument("--device", required=True, help="the name this machine's rows get")
    b.add_argument("--types", default="")
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--repeats", type=int, default=10)
    sub.add_parser("summary")
    sub.add_parser("rows", help="print data/perf.json rows of the best runs")
    args = ap.parse_args()
    if args.cmd == "measure":
        return measure(args)
    if args.cmd == "bench":
        return bench(args)
    if args.cmd == "rows":
        print(json.dumps(perf_rows() + bench_rows(), indent=1))
        return 0
    for (g, t), b in sorted(best_runs().items()):
        flags = "".join(" unstable-" + k for k in ("tg", "pp") if not b[f"{k}_stable"])
        print(f"{g} {t:<8} tg {b['tg']:6.1f}  pp {b['pp']:7.1f}  ({int(b['n'])} runs){flags}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
