"""The speed model against published llama.cpp runs it was not fitted to, recomputed
from data/perf.json on every run: a change to the data or the formula that makes the
held-out errors worse than the targets, or leaves data/speed_model.json stale, fails."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import pytest

from rigspark_gui.formats.jsonable import jsonable
from rigspark_gui.formats.speed import SpeedModelFile

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.core.memory import WeightsLayout
from rigspark_gui.core.rig import Basis, Cpu, Gpu, Provenance, Rig, Vendor
from rigspark_gui.core.settings import GpuBackend, PlanSettings
from rigspark_gui.core.speed import DecodeShape, estimate_decode_shape
from validation import speed_fit, speed_rows
from validation.speed_report import (
    TARGET_INSIDE,
    TARGET_MEDIAN,
    TARGET_P90,
    TARGET_WIDTH,
    Calibration,
    calibrate,
    stats_where,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cal() -> Calibration:
    return calibrate()


def test_the_dataset_is_large_and_cited(cal: Calibration) -> None:
    data = json.loads(speed_rows.PERF_PATH.read_text())
    assert len(cal.rows) >= 300
    assert len({r.device_key for r in cal.rows}) >= 40
    assert {r.backend for r in cal.rows} >= {"cuda", "rocm", "vulkan", "metal", "sycl", "cpu"}
    assert any(r.moe for r in cal.rows) and any(r.n_devices > 1 for r in cal.rows)
    for row in data["rows"]:
        assert str(row["source"]).startswith(("http", "validation/")), row
        assert row.get("exclude") is None or len(row["exclude"]) > 10


def test_held_out_decode_meets_the_targets_on_gpus_and_socs(cal: Calibration) -> None:
    st = stats_where(cal, "tg", lambda r: not r.is_cpu)
    assert st is not None and st.n >= 300
    assert st.median_abs <= TARGET_MEDIAN
    assert st.p90_abs <= TARGET_P90
    assert st.inside >= TARGET_INSIDE
    assert st.widest <= TARGET_WIDTH


def test_the_shipped_parameters_are_the_fit_of_the_data(cal: Calibration) -> None:
    shipped = SpeedModelFile.model_validate_json(speed_fit.MODEL_PATH.read_text()).to_record()
    fitted = cal.model
    assert shipped.basis == fitted.basis
    a, b = jsonable(shipped), jsonable(fitted)

    def close(x: object, y: object) -> bool:
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(close(x[k], y[k]) for k in x)
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-3, abs_tol=1e-12)
        return x == y

    assert close(a, b), "data/speed_model.json is stale: run scripts/calibrate_speed.py"


def test_the_document_shows_the_recomputed_figures(cal: Calibration) -> None:
    doc = (ROOT / "docs" / "validation-speed.md").read_text()
    st = stats_where(cal, "tg", lambda r: not r.is_cpu)
    assert st is not None
    found = re.search(r"\(median ([\d.]+)%, p90 ([\d.]+)%, inside (\d+)%", doc)
    assert found, "docs/validation-speed.md lost its generated summary"
    assert abs(float(found.group(1)) - 100 * st.median_abs) < 0.15
    assert abs(float(found.group(2)) - 100 * st.p90_abs) < 0.15
    assert f"**{len(cal.rows)} rows**" in doc


def _engine_rig(row: speed_rows.Row) -> tuple[Rig, list[str]]:
    if row.is_cpu:
        features = {
            "amx": ("avx2", "avx512", "avx512_vnni", "amx"),
            "avx512-vnni": ("avx2", "avx512", "avx512_vnni"),
            "avx512": ("avx2", "avx512"), "avx2": ("avx2",), "sve": ("sve",),
        }.get(row.isa.value, ()) + (("hypervisor",) if row.vcpu else ())  # fmt: skip
        name = {"apple": "Apple M2", "neon": "Arm Cortex-A76"}.get(row.isa.value, "CPU")
        bw = Provenance(basis=Basis.MEASURED if row.measured_bw else Basis.SPEC, source="row")
        cpu = Cpu(name=name, cores=row.cores, memory_bandwidth_gbps=row.bandwidth_gbps,
                  features=features, provenance={"memory_bandwidth_gbps": bw},
                  compute_cores=row.raw.get("compute_cores"))  # fmt: skip
        return Rig(ram_total_bytes=64 << 30, cpu=cpu), ["cpu"]
    vendor = {"apple": Vendor.APPLE, "amd": Vendor.AMD, "amd-hbm": Vendor.AMD,
              "intel": Vendor.INTEL}.get(row.cls.value, Vendor.NVIDIA)  # fmt: skip
    gpus = tuple(
        Gpu(
            name=row.raw["device"],
            vendor=vendor,
            index=i,
            memory_total_bytes=80 << 30,
            bandwidth_gbps=row.bandwidth_gbps,
        )
        for i in range(row.n_devices)
    )
    return Rig(ram_total_bytes=64 << 30, gpus=gpus), [f"gpu:{i}" for i in range(row.n_devices)]


def test_the_engine_evaluates_the_formula_that_was_judged(cal: Calibration) -> None:
    """For every decode row, the planner's own estimator (as a plan calls it) gives what
    the fitting code predicted for that row."""
    model = cal.model
    params = speed_fit.fit_decode(cal.rows)
    checked = 0
    for row in cal.rows:
        if row.kind != "tg":
            continue
        rig, devices = _engine_rig(row)
        type_name = {"float": "F16", "q8": "Q8_0", "legacy": "Q4_0", "kquant": "Q4_K",
                     "iq": "IQ4_XS", "mxfp4": "MXFP4"}[row.family.value]  # fmt: skip
        read = row.weight_read_bytes + row.kv_read_bytes
        total = read * row.active_params / row.elements  # so that elements/byte matches
        layout = WeightsLayout(
            quant=type_name, input_bytes=0, output_bytes=0, tied_head_bytes=0,
            block_bytes=(int(total),), block_expert_bytes=(0,), expert_fraction_active=1.0,
            n_params=int(row.active_params), n_active_params=int(row.active_params),
            tensor_types={type_name: int(total)},
        )  # fmt: skip
        n = len(devices)
        shape = DecodeShape(
            {d: read / n for d in devices},
            {
                d: row.n_layer // n + (1 if i < row.n_layer % n else 0)
                for i, d in enumerate(devices)
            },
            n - 1,
            0,
        )
        s = PlanSettings(gpu_backend=None if row.is_cpu else GpuBackend(row.backend))
        got = estimate_decode_shape(shape, layout, rig, s, model)
        # the engine plans for current builds: an old row's era factor is the fit's alone
        want = speed_fit.predict_decode(params, dataclasses.replace(row, old_build=False))
        assert got.tok_s == pytest.approx(want, rel=2e-3), (row.raw["device"], row.raw["model"])
        checked += 1
    assert checked >= 300
