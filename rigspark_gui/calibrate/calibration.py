"""Calibrate the speed model on this machine: time llama.cpp itself on a small synthetic
model in a few quantizations, on the CPU and on each GPU, and keep measured / predicted
per device and quantization family. Plans then scale the published prior by it."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.placement import CPU, gpu_device, uniform_placement
from rigspark_gui.core.rig import Rig, Vendor
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import (
    Band,
    SpeedModel,
    cpu_label,
    estimate_decode,
    estimate_prefill,
    quant_family,
)
from rigspark_gui.user_dirs import cache_dir

if TYPE_CHECKING:
    import threading

    from rigspark_gui.calibrate.runners import GpuTarget, Runner
    from rigspark_gui.calibrate.synth import Shape

CALIBRATION_NAME = "speed-calibration.json"
CALIBRATION_SCHEMA_VERSION = 1
DEFAULT_QUANTS = ("Q4_K_M", "Q8_0", "Q4_0")
VISIBLE_ENV = {
    Vendor.NVIDIA: "CUDA_VISIBLE_DEVICES",
    Vendor.AMD: "HIP_VISIBLE_DEVICES",
    Vendor.INTEL: "ONEAPI_DEVICE_SELECTOR",
}

Progress = Callable[[int, int, str], None]  # step, steps, what


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceRun:
    """One timing of llama.cpp on one device (the file form: `calibration_file`)."""

    device: str  # cpu | gpu:N
    device_name: str
    quant: str
    measured_tok_s: float
    predicted_tok_s: float | None
    measured_prefill_tok_s: float
    predicted_prefill_tok_s: float | None

    @property
    def decode_ratio(self) -> float | None:
        return self.measured_tok_s / self.predicted_tok_s if self.predicted_tok_s else None

    @property
    def prefill_ratio(self) -> float | None:
        p = self.predicted_prefill_tok_s
        return self.measured_prefill_tok_s / p if p else None


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalCalibration:
    """What one calibration run measured, with its provenance."""

    schema_version: int = CALIBRATION_SCHEMA_VERSION
    created_at: str
    llama_cpp: str
    runner: str
    runs: tuple[DeviceRun, ...]

    def scales(self, prefill: bool = False) -> dict[str, dict[str, float]]:
        """measured / predicted by device name ("cpu:NAME", "gpu:NAME") and quantization
        family, with "*" the geometric mean over the families measured."""
        out: dict[str, dict[str, list[float]]] = {}
        for r in self.runs:
            ratio = r.prefill_ratio if prefill else r.decode_ratio
            if ratio is None:
                continue
            key = f"{'cpu' if r.device == CPU else 'gpu'}:{r.device_name}"
            out.setdefault(key, {}).setdefault(quant_family(r.quant).value, []).append(ratio)
        scales: dict[str, dict[str, float]] = {}
        for key, fams in out.items():
            per = {f: _geomean(v) for f, v in fams.items()}
            per["*"] = _geomean(list(per.values()))
            scales[key] = per
        return scales

    def basis(self) -> str:
        devices = sorted({r.device_name for r in self.runs})
        return (
            f"calibrated on this machine with {self.llama_cpp} ({self.created_at}): "
            + ", ".join(devices)
        )


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


# The band of a calibrated estimate: a calibrated plan against separate llama.cpp runs
# of a model of another shape on the same machine was off by -11.6 % to +9.0 % (six
# comparisons, docs/validation-speed.md), run-to-run noise of a shared VM included.
LOCAL_BAND = Band(low=0.88, high=1.12, rows=6)


def apply(model: SpeedModel, cal: LocalCalibration | None) -> SpeedModel:
    """The prior with this machine's measured scales on top."""
    if cal is None or not cal.runs:
        return model
    return replace(
        model,
        local_decode_scale=cal.scales(),
        local_prefill_scale=cal.scales(prefill=True),
        local_basis=cal.basis(),
        local_band=LOCAL_BAND,
    )


def _targets(rig: Rig) -> list[tuple[str, str, GpuTarget | None]]:
    from rigspark_gui.calibrate.runners import GpuTarget

    """The CPU, then each GPU with the variable that shows llama.cpp only it (by the
    vendor's own device index, as detection read it)."""
    out: list[tuple[str, str, GpuTarget | None]] = [(CPU, cpu_label(rig.cpu), None)]
    for i, g in enumerate(rig.gpus):
        env = VISIBLE_ENV.get(g.vendor)
        if g.vendor is Vendor.APPLE:
            out.append((gpu_device(i), g.name, GpuTarget("RIGSPARK_UNUSED", "0")))
        elif g.vendor is Vendor.INTEL:
            out.append(
                (
                    gpu_device(i),
                    g.name,
                    GpuTarget("ONEAPI_DEVICE_SELECTOR", f"level_zero:{g.index}"),
                )
            )
        elif env is not None:
            out.append((gpu_device(i), g.name, GpuTarget(env, str(g.index))))
    return out


def _predict(
    path: Path, rig: Rig, device: str, prior: SpeedModel
) -> tuple[float | None, float | None]:
    from rigspark_gui.calibrate.runners import N_GEN, N_PROMPT
    from rigspark_gui.catalog.gguf_import import import_gguf

    spec = import_gguf(path)
    g = spec.geometry
    layout = weights_layout(spec, spec.available_quants[0])
    s = PlanSettings(context=1024, prompt_tokens=N_PROMPT + N_GEN // 2)
    placement = uniform_placement(g, rig, s, device)
    decode = estimate_decode(placement, g, layout, rig, s, prior)
    s_pp = replace(s, prompt_tokens=N_PROMPT)
    prefill = estimate_prefill(placement, g, layout, rig, s_pp, prior)
    pp = N_PROMPT / prefill.seconds if prefill.seconds else None
    return decode.tok_s, pp


def run_calibration(
    rig: Rig,
    runner: Runner,
    prior: SpeedModel,
    *,
    quants: Sequence[str] | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    workdir: Path | None = None,
    shape: Shape | None = None,
) -> LocalCalibration:
    """Write the synthetic model, quantize it, time it on every device, compare."""
    import tempfile
    import threading
    from datetime import UTC, datetime

    from rigspark_gui.calibrate import synth  # numpy and gguf: only when calibrating
    from rigspark_gui.calibrate.runners import CalibrationCancelled, CalibrationError

    cancel = cancel or threading.Event()
    quants = quants or DEFAULT_QUANTS
    targets = _targets(rig)
    steps = 2 + len(quants) * (1 + len(targets))
    step = 0

    def tick(what: str) -> None:
        nonlocal step
        if cancel.is_set():
            raise CalibrationCancelled()
        step += 1
        if progress is not None:
            progress(step, steps, what)

    prior = replace(prior, local_decode_scale={}, local_prefill_scale={}, local_basis="")
    with tempfile.TemporaryDirectory(prefix="rigspark-calibrate-", dir=workdir) as tmp:
        tick("checking llama.cpp")
        version = runner.version(cancel)
        tick("writing the calibration model")
        f16 = synth.write_model(Path(tmp) / "calibration-F16.gguf", shape)
        runs: list[DeviceRun] = []
        build = version
        for q in quants:
            tick(f"quantizing to {q}")
            path = Path(tmp) / f"calibration-{q}.gguf"
            runner.quantize(f16, path, q, cancel)
            for device, name, gpu in targets:
                tick(f"timing {q} on {name}")
                try:
                    result = runner.bench(path, gpu, cancel)
                except CalibrationCancelled:
                    raise
                except CalibrationError:
                    if gpu is None:
                        raise
                    result = None  # one GPU llama.cpp cannot run on: the rest still count
                if result is None:
                    continue
                build = result.build or build
                tg, pp = _predict(path, rig, device, prior)
                runs.append(
                    DeviceRun(
                        device=device,
                        device_name=name,
                        quant=q,
                        measured_tok_s=result.tg_tok_s,
                        predicted_tok_s=tg,
                        measured_prefill_tok_s=result.pp_tok_s,
                        predicted_prefill_tok_s=pp,
                    )
                )
    if not runs:
        raise CalibrationError("llama.cpp ran on no device")
    return LocalCalibration(
        created_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        llama_cpp=build,
        runner=runner.name,
        runs=tuple(runs),
    )


def calibration_path() -> Path:
    return cache_dir() / CALIBRATION_NAME


def save_calibration(cal: LocalCalibration) -> Path:
    import tempfile

    from rigspark_gui.calibrate.calibration_file import calibration_json

    path = calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cal-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(calibration_json(cal))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_calibration() -> LocalCalibration | None:
    """This machine's calibration, or None (absent, unreadable or from another schema:
    the published prior is used)."""
    from rigspark_gui.catalog.validated import layout_of, read_validated

    path = calibration_path()
    try:
        if path.stat().st_size > 1 << 20:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return read_validated(
            data,
            kind="calibration",
            layout=layout_of(LocalCalibration, DeviceRun),
            validate=_read_calibration,
        )
    except (ValueError, RecursionError):  # not JSON, or not a calibration: the prior stays
        return None


def _read_calibration(data: bytes) -> LocalCalibration:
    from rigspark_gui.calibrate.calibration_file import read_calibration

    return read_calibration(json.loads(data.decode("utf-8")))


def with_local_calibration(model: SpeedModel) -> SpeedModel:
    return apply(model, load_calibration())
