"""What RigSpark predicts for one recorded llama.cpp case, and how far off it is.

Shared by run_validation.py (which writes docs/validation.md) and the normal test suite
(tests/validation/test_llama_cpp_agreement.py), which re-predicts every case recorded in
validation/cases.json from the recorded model spec and settings alone.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rigspark_gui.core.memory import (
    cpu_repack_bytes,
    device_compute_bytes,
    output_buffer_bytes,
    weights_layout,
)
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.model.model_spec import ModelSpec
from rigspark_gui.core.placement import CPU, device_loads, uniform_placement
from rigspark_gui.core.rig import Cpu, Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel, estimate_decode
from rigspark_gui.formats.model_spec import read_model_spec

MIB = 1 << 20
CASES_PATH = Path(__file__).with_name("cases.json")
# Targets of issue 8.
COMPUTE_TOL_FRACTION = 0.02
COMPUTE_TOL_BYTES = 32 * MIB
# CPU decode from the published prior (data/speed_model.json) on this machine, before
# `rigspark-plan calibrate` measures it: the prior's CPU class is the least certain
# (docs/validation-speed.md); the calibrated figure is checked in docs/validation-speed.md.
DECODE_MEDIAN_TOL = 0.25
# The decode timing runs a 64-token prompt then 32 tokens: mean depth ~80 cells.
BENCH_DEPTH = 80


@dataclass(frozen=True)
class Prediction:
    weights: int  # CPU_Mapped + CPU_REPACK
    repack: int
    kv: int
    compute: int
    output: int
    total: int
    decode_tok_s: float | None


def settings_of(case: dict[str, Any]) -> PlanSettings:
    return PlanSettings(
        context=case["n_ctx"],
        kv_k=KvCacheType(case["type_k"]),
        kv_v=KvCacheType(case["type_v"]),
        flash_attn=case["flash_attn"],
        parallel=case["n_seq"],
        swa_full=case.get("swa_full", False),
        prompt_tokens=BENCH_DEPTH,
    )


def cpu_rig(machine: dict[str, Any]) -> Rig:
    return Rig(
        ram_total_bytes=machine["ram_total_bytes"],
        cpu=Cpu(
            name=machine["cpu_name"],
            threads=machine["threads"],
            memory_bandwidth_gbps=machine["bandwidth_gbps"],
            features=tuple(machine.get("cpu_features", ())),
        ),
    )


def predict(
    spec: ModelSpec, case: dict[str, Any], machine: dict[str, Any], perf: SpeedModel
) -> Prediction:
    s = settings_of(case)
    rig = cpu_rig(machine)
    g = spec.geometry
    layout = weights_layout(spec, spec.available_quants[0])
    repack = cpu_repack_bytes(spec, spec.available_quants[0], machine["cpu_features"])
    placement = uniform_placement(g, rig, s, CPU)
    (load,) = device_loads(placement, g, layout, rig, s, cpu_repack=repack)
    compute = device_compute_bytes(g, s, list(range(g.n_layer)), True, cpu=True)
    tp = estimate_decode(placement, g, layout, rig, s, perf)
    return Prediction(
        weights=load.weights_bytes,
        repack=repack.total if repack is not None else 0,
        kv=load.kv_bytes,
        compute=compute,
        output=output_buffer_bytes(g, s),
        total=load.required_bytes,
        decode_tok_s=tp.tok_s,
    )


def measured_total(m: dict[str, Any]) -> int:
    return int(m["weights"] + m["kv"] + m["compute"] + m["output"])


def compute_tolerance(actual: int) -> float:
    return max(COMPUTE_TOL_FRACTION * actual, COMPUTE_TOL_BYTES)


def load_cases(path: Path = CASES_PATH) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def spec_of(data: dict[str, Any], key: str) -> ModelSpec:
    return read_model_spec(data["models"][key]["spec"])


@dataclass(frozen=True)
class Row:
    case: dict[str, Any]
    pred: Prediction
    errors: dict[str, int]  # predicted - actual, bytes
    decode_error: float | None  # predicted / measured - 1


def evaluate(data: dict[str, Any], perf: SpeedModel) -> list[Row]:
    rows: list[Row] = []
    specs: dict[str, ModelSpec] = {}
    for case in data["cases"]:
        key = case["model"]
        if key not in specs:
            specs[key] = spec_of(data, key)
        p = predict(specs[key], case, data["machine"], perf)
        m = case["measured"]
        errors = {
            "weights": p.weights - m["weights"],
            "kv": p.kv - m["kv"],
            "compute": p.compute - m["compute"],
            "output": p.output - m["output"],
            "total": p.total - measured_total(m),
        }
        dec = None
        # Only the model larger than the caches is memory-bound; the small ones measure
        # llama.cpp's fixed per-token overhead, which a bandwidth model does not describe.
        speed = data["models"][key].get("role") == "speed"
        if speed and m.get("gen_tok_s") and p.decode_tok_s:
            dec = p.decode_tok_s / m["gen_tok_s"] - 1.0
        rows.append(Row(case, p, errors, dec))
    return rows


def summary(rows: list[Row]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for kind in ("weights", "kv", "compute", "output", "total"):
        errs = [abs(r.errors[kind]) for r in rows]
        out[kind] = {"max_bytes": max(errs), "median_bytes": statistics.median(errs)}
    dec = [abs(r.decode_error) for r in rows if r.decode_error is not None]
    if dec:
        out["decode"] = {"max_fraction": max(dec), "median_fraction": statistics.median(dec)}
    return out
