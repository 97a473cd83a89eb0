"""Predicted against actual: plan the settings a llama.cpp log shows and compare, buffer
by buffer and device by device, what RigSpark predicts with what llama.cpp allocated.

The plan copies the log: its context, K/V types, flash attention, sequences, n_ubatch,
SWA sizing, the -ngl it offloaded and the layers each GPU got (read from llama.cpp's
per-layer assignment when printed, else from the sizes of the GPU model buffers), and
whether a CPU_REPACK buffer was made. What is left is the engine's own error, and every
figure that differs beyond llama.cpp's two-decimal rounding gets a sentence saying why
it may differ.

`compare_fit` sets what llama.cpp's `--fit` printed (context, layers per device, verdict,
projected MiB) against RigSpark's FitOutcome for the same load.

This module holds the entry points; the parts live beside it: `reconciliation` (the
result and its rows), `fit_log` (fit's lines), `log_plan` (the log's settings and
placement), `buffers` (predicted and actual buffers paired), `explanations`,
`bench_speeds` (llama-bench) and `text`.
"""

from __future__ import annotations

from dataclasses import replace

from rigspark_gui.core.fit import FitDevice, FitOutcome, FitStatus, UserFlags, llama_fit
from rigspark_gui.core.memory import output_buffer_bytes, weights_layout
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import CPU, device_loads
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.reconcile.bench_speeds import bench_rows, bench_speed
from rigspark_gui.reconcile.buffers import buffer_rows, log_repack, predicted_buffers
from rigspark_gui.reconcile.explanations import (
    explain_context,
    explain_model,
    explain_offload,
    explain_row,
    explain_settings,
    explain_unmodelled,
)
from rigspark_gui.reconcile.llama_log import parse_llama_log
from rigspark_gui.reconcile.log_plan import log_placement, log_quant, log_settings, weights_only
from rigspark_gui.reconcile.log_records import MIB, BufferKind, FitLog, FitLogDevice, LlamaLog
from rigspark_gui.reconcile.reconciliation import FitRow, Reconciliation

# llama.cpp floors each MiB figure it prints; RigSpark's, floored the same way, agrees
# within one MiB
FIT_MIB_TOLERANCE = 1


def _paired(log: FitLog, outcome: FitOutcome) -> list[tuple[str, FitLogDevice, FitDevice | None]]:
    """Each device of the log with the outcome's device: by RigSpark's id (CUDA1 ->
    gpu:1), else in llama.cpp's device order when both list as many."""
    devices = [d for d in outcome.devices if d.device != "cpu"] or list(outcome.devices)
    by_id = {d.device: d for d in devices}
    found = [by_id.get(d.device) if d.device else None for d in log.devices]
    ids = [id(x) for x in found if x is not None]
    if len(log.devices) == len(devices) and (len(ids) < len(found) or len(set(ids)) < len(ids)):
        found = list(devices)
    return [
        (o.device if o is not None else d.name, d, o)
        for d, o in zip(log.devices, found, strict=True)
    ]


def _mib_row(what: str, logged: int, predicted_bytes: int) -> FitRow:
    predicted = predicted_bytes // MIB
    diff = predicted - logged
    return FitRow(
        what=what,
        logged=f"{logged:,}",
        predicted=f"{predicted:,}",
        agrees=abs(diff) <= FIT_MIB_TOLERANCE,
        difference_mib=diff,
    )


def _layers_text(layers: int, overflowing: int) -> str:
    return f"{layers} ({overflowing} overflowing)" if overflowing else str(layers)


def compare_fit(log: FitLog, outcome: FitOutcome) -> tuple[FitRow, ...]:
    """llama.cpp's fit as its log shows it against RigSpark's FitOutcome: a row for the
    verdict, the context it started from and left, the layers it gave each device and
    the MiB it projects there (agreeing within 1 MiB: llama.cpp floors to MiB). A figure
    the log does not show gets no row."""
    rows: list[FitRow] = []

    def same(what: str, logged: object, predicted: object) -> None:
        rows.append(
            FitRow(
                what=what, logged=str(logged), predicted=str(predicted), agrees=logged == predicted
            )
        )

    if log.status is not None:
        same("status", log.status.value, outcome.status.value)
    if log.initial_context is not None and outcome.initial_context > 0:
        same("initial context", log.initial_context, outcome.initial_context)
    if log.context is not None:
        same("context", log.context, outcome.context)
    unchanged = log.status is not FitStatus.FITTED
    pairs = _paired(log, outcome)
    for name, d, o in pairs:
        if o is None or d.layers is None:
            continue
        over = d.overflowing or 0
        rows.append(
            FitRow(
                what=f"layers on {name}",
                logged=_layers_text(d.layers, over),
                predicted=_layers_text(o.layers, o.overflowing),
                agrees=d.layers == o.layers and over == o.overflowing,
            )
        )
    for name, d, o in pairs:
        logged = d.used_mib if d.used_mib is not None else d.projected_mib if unchanged else None
        if o is not None and logged is not None:
            rows.append(_mib_row(f"projected MiB on {name}", logged, o.projected_bytes))
    if (
        not log.devices
        and unchanged
        and log.projected_mib is not None
        and len(outcome.devices) == 1
    ):
        o = outcome.devices[0]
        rows.append(_mib_row(f"projected MiB on {o.device}", log.projected_mib, o.projected_bytes))
    return tuple(rows)


def reconcile_log(
    log: LlamaLog,
    spec: ModelSpec,
    rig: Rig,
    perf: SpeedModel,
    *,
    settings: PlanSettings | None = None,
    fit_outcome: FitOutcome | None = None,
) -> Reconciliation:
    """Plan what `log` shows and compare; `settings`, the plan a user made, only adds
    sentences where the log's settings differ from it; `fit_outcome`, RigSpark's fit for
    the load, is set against llama.cpp's when the log shows one (`fit_rows`)."""
    notes: list[str] = []
    fit_rows = compare_fit(log.fit, fit_outcome) if log.fit and fit_outcome else ()
    g = spec.geometry
    quant = log_quant(log, spec, notes)
    layout = weights_layout(spec, quant)
    explain_model(log, g, spec, notes)
    speeds = [bench_speed(r, g, layout, rig, perf, notes) for r in bench_rows(log, layout, notes)]
    if not log.buffers:
        return Reconciliation(
            model=spec.name,
            quant=quant,
            settings=None,
            speeds=tuple(speeds),
            explanations=tuple(notes),
            log=log,
            fit_rows=fit_rows,
        )
    s, unified = log_settings(log, g, notes)
    s_mem = replace(s, parallel=1) if unified else s
    if log.fit is not None and fit_outcome is None:
        # RigSpark's fit for the load the log shows: -c counts as given when fit said so
        user = UserFlags(context=s.context if log.fit.context_set_by_user else None)
        fit_outcome = llama_fit(spec, quant, rig, replace(s, kv_unified=unified), user=user)
        fit_rows = compare_fit(log.fit, fit_outcome)
    placement, ngl, counts = log_placement(log, g, layout, rig, s_mem)
    any_cpu = any(u.device == CPU for u in placement.units if u.index >= 0)
    repack = log_repack(log, spec, quant, rig, notes, any_cpu)
    loads = device_loads(placement, g, layout, rig, s_mem, cpu_repack=repack)
    pred = predicted_buffers(
        loads, placement, repack, output_buffer_bytes(g, s_mem), output_buffer_bytes(g, s)
    )
    if weights_only(log):
        pred = {k: v for k, v in pred.items() if k[1] in (BufferKind.MODEL, BufferKind.REPACK)}
    rows, unmodelled = buffer_rows(log, pred)
    explain_context(log, g, s, unified, notes)
    explain_settings(log, g, s, s_mem, settings, notes)
    explain_offload(log, g, layout, rig, s_mem, ngl, loads, notes)
    for r in rows:
        if r.predicted_bytes is not None:
            line = explain_row(r, g, spec, s_mem, log, placement)
            if line is not None:
                notes.append(line)
    notes.extend(explain_unmodelled(b) for b in unmodelled)
    return Reconciliation(
        model=spec.name,
        quant=quant,
        settings=s,
        ngl=ngl,
        layers_per_gpu=counts,
        rows=tuple(rows),
        speeds=tuple(speeds),
        explanations=tuple(dict.fromkeys(notes)),
        log=log,
        fit_rows=fit_rows,
    )


def reconcile(
    log_text: str,
    spec: ModelSpec,
    rig: Rig,
    perf: SpeedModel,
    *,
    settings: PlanSettings | None = None,
    fit_outcome: FitOutcome | None = None,
) -> Reconciliation:
    """Parse a llama.cpp log or llama-bench output and compare it with RigSpark's plan
    for the same model, rig and settings (and its fit, when `fit_outcome` is given)."""
    log = parse_llama_log(log_text)
    return reconcile_log(log, spec, rig, perf, settings=settings, fit_outcome=fit_outcome)
