"""One `PlanReport`: everything a shared plan shows, built by the engine alone.

The report is plain data (records), so every writer (HTML, PDF, Markdown, JSON) shows
the same figures, and a JSON report loads back into the window unchanged. It holds the
chart specs rather than pictures: each writer renders them, and a loaded report can be
drawn again. The caller passes `created_at`, so building a report reads no clock.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from rigspark_gui.core.chart_spec import (
    FitChart,
    KvChart,
    fit_chart,
    kv_chart_types,
    kv_memory_chart,
)
from rigspark_gui.core.errors import RigSparkError, validation_message
from rigspark_gui.core.fit import FitOutcome
from rigspark_gui.core.launch import ClusterLaunch, LaunchCommand, launch_commands, placement_gpus
from rigspark_gui.core.memory import file_bytes_estimate, repack_for, weights_layout
from rigspark_gui.core.model import Geometry, ModelSpec
from rigspark_gui.core.placement import HEADROOM, DeviceLoad, Placement
from rigspark_gui.core.plan import (
    KvComparisonRow,
    PathName,
    PathPlan,
    Resolved,
    Suggestion,
    loads_with_beside,
    plan,
)
from rigspark_gui.core.rig import (
    DEFAULT_GPU_RESERVE_BYTES,
    VM_FEATURE,
    Basis,
    DeviceSpec,
    Provenance,
    Rig,
)
from rigspark_gui.core.serving import ServingPlan
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.core.units import MIB
from rigspark_gui.identity import APP_NAME, APP_VERSION
from rigspark_gui.report.rig_words import report_notes, rig_title

REPORT_SCHEMA_VERSION = 1
# the curves of the KV chart: the same four the KV tab draws


class ReportError(RigSparkError):
    """A report file could not be read back; the message says which and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One hardware figure with the basis it rests on (measured, spec, user, unknown)."""

    label: str
    # formatted for display; bytes stay exact in `rig`
    value: str
    basis: str
    source: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportDevice:
    # cpu or gpu:N, as in the placement
    device: str
    name: str
    figures: tuple[Figure, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportModel:
    id: str
    name: str
    family: str
    source: str
    imported: bool
    geometry: Geometry
    # the recommended (or nearest) path's quantization
    quant: str
    file_bytes: int
    # published (with source) or estimated
    file_bytes_basis: str
    n_params: int
    n_active_params: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Assumption:
    topic: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanReport:
    schema_version: int = REPORT_SCHEMA_VERSION
    title: str
    # ISO 8601, given by the caller
    created_at: str
    app_name: str = APP_NAME
    app_version: str = APP_VERSION
    rig: Rig
    rig_edited: bool
    devices: tuple[ReportDevice, ...]
    model: ReportModel
    settings: PlanSettings
    paths: tuple[PathPlan, ...]
    recommended: PathName | None
    # whose placement is shown (nearest if none fit)
    placement_path: PathName
    # the placement was edited by hand in the Layers tab
    placement_edited: bool = False
    placement: Placement | None
    device_loads: tuple[DeviceLoad, ...]
    # common or all
    kv_pairs: str
    kv_comparison: tuple[KvComparisonRow, ...]
    launch_commands: tuple[LaunchCommand, ...]
    fit_chart: FitChart
    kv_chart: KvChart
    notes: tuple[str, ...] = ()
    assumptions: tuple[Assumption, ...] = ()
    # the smallest changes that buy a better quantization or path
    suggestions: tuple[Suggestion, ...] = ()
    # vLLM/SGLang: the engine's own start-up figures
    serving: ServingPlan | None = None
    # a script per host, in start order (serving, multi-host)
    launch: ClusterLaunch | None = None
    # what the settings left to the engine became, and llama.cpp's fit as it runs it
    resolved: Resolved | None = None
    fit: FitOutcome | None = None
    fit_summary: str = ""


def _bytes_text(n: int | None) -> str:
    if n is None:
        return "unknown"
    return f"{n / (1 << 30):.2f} GiB"


def _basis(owner: DeviceSpec | Rig, field: str) -> Provenance:
    if isinstance(owner, DeviceSpec):
        return owner.basis_of(field)
    # the rig's own figures (RAM, disk) follow the same rule as a device's
    if field in owner.provenance:
        return owner.provenance[field]
    if getattr(owner, field, None) is None:
        return Provenance(basis=Basis.UNKNOWN, source="not reported")
    return Provenance(basis=Basis.USER)


def _figure(owner: DeviceSpec | Rig, label: str, field: str, value: str) -> Figure:
    prov = _basis(owner, field)
    return Figure(label=label, value=value, basis=prov.basis.value, source=prov.source)


def rig_devices(rig: Rig) -> tuple[ReportDevice, ...]:
    """Every device with memory, bandwidth and compute, each with its basis."""
    cpu = rig.cpu
    bw = cpu.memory_bandwidth_gbps
    vm = VM_FEATURE in cpu.features
    compute = (
        (_figure(cpu, "cores' worth of compute", "compute_cores", f"{cpu.compute_cores:g}"),)
        if cpu.compute_cores is not None
        else ()
    )
    host = ReportDevice(
        device="cpu",
        name=cpu.name,
        figures=(
            _figure(
                cpu, "vCPUs" if vm else "cores", "cores", str(cpu.cores) if cpu.cores else "unknown"
            ),
            *compute,
            _figure(rig, "RAM total", "ram_total_bytes", _bytes_text(rig.ram_total_bytes)),
            _figure(
                rig, "RAM available", "ram_available_bytes", _bytes_text(rig.ram_available_bytes)
            ),
            _figure(
                cpu,
                "RAM bandwidth",
                "memory_bandwidth_gbps",
                f"{bw:.1f} GB/s" if bw else "unknown",
            ),
            _figure(rig, "free disk", "disk_free_bytes", _bytes_text(rig.disk_free_bytes)),
        ),
    )
    out = [host]
    for position, g in enumerate(rig.gpus):
        tf = g.fp16_tflops
        out.append(
            ReportDevice(
                device=f"gpu:{position}",
                name=f"{g.name} on {g.host}" if g.host else g.name,
                figures=(
                    _figure(
                        g, "memory total", "memory_total_bytes", _bytes_text(g.memory_total_bytes)
                    ),
                    _figure(
                        g, "memory free", "memory_free_bytes", _bytes_text(g.memory_free_bytes)
                    ),
                    _figure(
                        g,
                        "bandwidth",
                        "bandwidth_gbps",
                        f"{g.bandwidth_gbps:.1f} GB/s" if g.bandwidth_gbps else "unknown",
                    ),
                    _figure(g, "FP16", "fp16_tflops", f"{tf:g} TFLOPS" if tf else "unknown"),
                    _figure(g, "reserve", "reserve_bytes", _bytes_text(g.reserve_bytes)),
                ),
            )
        )
    link = rig.link
    for h in rig.hosts:
        out.append(
            ReportDevice(
                device=f"host:{h.name}",
                name=h.address or h.name,
                figures=(
                    Figure(label="RAM total", value=_bytes_text(h.ram_total_bytes), basis="user"),
                    Figure(
                        label="network",
                        value=f"{link.label}: {link.gbit_s:g} Gbit/s, "
                        f"{link.round_trip_s * 1e6:g} µs round trip",
                        basis="user" if rig.network is not None else "spec",
                        source="" if rig.network is not None else "the 10 GbE preset",
                    ),
                ),
            )
        )
    return tuple(out)


def _assumptions(
    paths: tuple[PathPlan, ...], perf: SpeedModel, model: ReportModel, s: PlanSettings
) -> tuple[Assumption, ...]:
    out = [
        Assumption(
            topic="Memory",
            text="Weights, KV cache and placement follow llama.cpp's allocator: tensor bytes "
            "from ggml block sizes, the KV cache padded to 256 cells, layers assigned by "
            "-ngl / --tensor-split as llama.cpp does.",
        ),
        Assumption(
            topic="Compute buffer",
            text="The compute (scratch) buffer per device is an estimate of ggml-alloc's peak "
            "for min(context, n_ubatch) tokens, calibrated against llama.cpp's CUDA buffers; "
            "it is not read from a running engine.",
        ),
        Assumption(
            topic="Headroom and reserve",
            text=f"A path fits when each device's need stays within {1 - HEADROOM:.0%} of its "
            f"usable memory; each GPU keeps a reserve (default "
            f"{DEFAULT_GPU_RESERVE_BYTES // MIB} MiB) for the driver context.",
        ),
        Assumption(
            topic="Model file",
            text=f"{model.quant}: {model.file_bytes:,} bytes, {model.file_bytes_basis}.",
        ),
    ]
    bases: list[str] = []
    for p in paths:
        for b in (p.throughput.basis, p.prefill.basis):
            if b not in bases:
                bases.append(b)
    out += [Assumption(topic="Speed basis", text=b) for b in bases]
    if perf.decode is not None:
        d = perf.decode
        text = (
            f"{perf.basis}. Decode: bytes read per token / (bandwidth x efficiency) plus a "
            f"fixed cost per layer; band = 10th-90th percentile of held-out measured/predicted "
            f"({d.band.low:.2f}-{d.band.high:.2f} on GPUs, {d.cpu_band.low:.2f}-"
            f"{d.cpu_band.high:.2f} on CPUs)."
        )
        if s.min_tok_s > 0:
            text += (
                f" Auto chose the best quality reaching {s.min_tok_s:g} tok/s, else the "
                "fastest no worse than moderate loss (speeds within 25 % a tie kept at the "
                "better quality)."
            )
        else:
            text += " Auto chose the best quality that fits (no minimum speed)."
        out.append(Assumption(topic=f"Calibration ({perf.source or 'speed model'})", text=text))
    else:
        out.append(Assumption(topic="Calibration", text="no speed calibration: speeds unknown"))
    if perf.local_basis:
        out.append(Assumption(topic="Calibration on this machine", text=perf.local_basis))
    return tuple(out)


def build_report(
    spec: ModelSpec,
    rig: Rig,
    settings: PlanSettings,
    perf: SpeedModel,
    *,
    created_at: str,
    kv_pairs: str = "common",
    title: str | None = None,
    placement: Placement | None = None,
) -> PlanReport:
    """The report of one plan, computed by the engine only (no clock). `placement`: one
    the user edited by hand, reported (with its loads and commands) instead of the
    plan's. The suggestions use the measured quality table (data/quant_quality.json)."""
    from rigspark_gui.catalog.quality import load_quality
    from rigspark_gui.core.plan import suggest

    if kv_pairs not in ("common", "all"):
        raise ReportError(f"kv_pairs must be 'common' or 'all', not {kv_pairs!r}")
    result = plan(spec, rig, settings, perf, kv_pairs=kv_pairs, ladders=False)
    shown = next((p for p in result.paths if p.path is result.recommended), result.paths[0])
    quant = shown.quant or spec.available_quants[-1]
    serving = result.serving is not None
    # a serving engine loads a checkpoint format, not a GGUF quantization: its sizes come
    # from the serving model, the layout (for the parameter counts) from the 16-bit form
    layout = weights_layout(spec, spec.available_quants[0] if serving else quant)
    published = None if serving else spec.published.get(quant)
    if serving:
        file_bytes = shown.file_bytes
        basis = (
            "the checkpoint's safetensors"
            if spec.checkpoint is not None and spec.checkpoint.total_bytes
            else "a Hugging Face checkpoint in this format, from the geometry"
        )
    elif published is not None:
        file_bytes, basis = published.file_bytes, f"published: {published.source}"
    elif spec.tensors is not None:
        file_bytes, basis = file_bytes_estimate(layout, spec.geometry), "from the file's tensors"
    else:
        file_bytes = file_bytes_estimate(layout, spec.geometry)
        basis = "estimated from the geometry and the quantization recipe"
    model = ReportModel(
        id=spec.id,
        name=spec.name,
        family=spec.family,
        source=spec.source,
        imported=spec.imported,
        geometry=spec.geometry,
        quant=quant,
        file_bytes=file_bytes,
        file_bytes_basis=basis,
        n_params=layout.n_params,
        n_active_params=layout.n_active_params,
    )
    if serving:
        placement = None  # a serving engine places layers itself: no hand edit applies
    edited = placement is not None
    placement = placement if placement is not None else result.placement
    loads: tuple[DeviceLoad, ...] = ()
    commands: tuple[LaunchCommand, ...] = ()
    if serving:
        loads = result.device_loads
    elif placement is not None:
        gpus = placement_gpus(placement, rig)
        repack = repack_for(spec, layout.quant, rig.cpu.features, result.settings, gpus)
        # the projector and a draft model on their devices, as the plan counts them
        loads = loads_with_beside(placement, spec, layout, rig, result.settings, None, repack)
        commands = launch_commands(placement, spec, quant, result.settings, rig)
    return PlanReport(
        title=title or f"{spec.name} on {rig_title(rig)}",
        created_at=created_at,
        rig=rig,
        rig_edited=rig.edited,
        devices=rig_devices(rig),
        model=model,
        settings=result.settings,
        paths=result.paths,
        recommended=result.recommended,
        placement_path=shown.path,
        placement=placement,
        placement_edited=edited,
        device_loads=loads,
        kv_pairs=kv_pairs,
        kv_comparison=result.kv_comparison,
        launch_commands=commands,
        suggestions=suggest(spec, rig, result.settings, perf, load_quality()),
        fit_chart=fit_chart(result),
        kv_chart=kv_memory_chart(spec, result, kv_chart_types(result.settings)),
        notes=report_notes(rig, result.notes),
        assumptions=_assumptions(result.paths, perf, model, result.settings),
        serving=result.serving,
        launch=result.launch if not edited else None,
        resolved=result.resolved,
        fit=result.fit,
        fit_summary=result.fit_summary,
    )


def report_json(report: PlanReport) -> str:
    from rigspark_gui.report.report_file import report_file_json

    return report_file_json(report)


def load_report(path: Path) -> PlanReport:
    """A JSON report written by `write_json`, validated; errors are one line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ReportError(f"cannot read {path}: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path.name} is not a text file") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ReportError(f"{path.name} is not valid JSON: {err}") from None
    rig_keys = {"gpus", "ram_total_bytes", "hosts"}
    if isinstance(raw, dict) and "paths" not in raw and raw.keys() & rig_keys:
        raise ReportError(
            f"{path.name} is a rig file, not a plan report: open it with File ▸ Open rig…"
        )
    not_report = ReportError(
        f"{path.name} is not a RigSpark plan report (File ▸ Export plan report… writes them "
        "as JSON)"
    )
    if not isinstance(raw, dict) or "schema_version" not in raw:
        raise not_report
    if raw["schema_version"] != REPORT_SCHEMA_VERSION:
        raise ReportError(
            f"{path.name}: unsupported report schema_version {raw['schema_version']!r}"
        )
    if "paths" not in raw:
        raise not_report
    from rigspark_gui.report.report_file import read_report

    try:
        return read_report(raw)
    except ValueError as err:  # pydantic's ValidationError, or fields that disagree
        raise ReportError(f"{path.name}: {validation_message(err)}") from None


def write_json(report: PlanReport, path: Path) -> None:
    from rigspark_gui.catalog.durable import write_text_atomic

    write_text_atomic(Path(path), report_json(report) + "\n")
