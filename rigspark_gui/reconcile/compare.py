"""Predicted against actual: plan the settings a llama.cpp log shows and compare, buffer
by buffer and device by device, what RigSpark predicts with what llama.cpp allocated.

The plan copies the log: its context, K/V types, flash attention, sequences, n_ubatch,
SWA sizing, the -ngl it offloaded and the layers each GPU got (read from llama.cpp's
per-layer assignment when printed, else from the sizes of the GPU model buffers), and
whether a CPU_REPACK buffer was made. What is left is the engine's own error, and every
figure that differs beyond llama.cpp's two-decimal rounding gets a sentence saying why
it may differ.

This module holds the entry points; the parts live beside it: `reconciliation` (the
result and its rows), `log_plan` (the log's settings and placement), `buffers` (predicted
and actual buffers paired), `explanations`, `bench_speeds` (llama-bench) and `text`.
"""

from __future__ import annotations

from dataclasses import replace

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
from rigspark_gui.reconcile.log_records import BufferKind, LlamaLog
from rigspark_gui.reconcile.reconciliation import Reconciliation


def reconcile_log(
    log: LlamaLog,
    spec: ModelSpec,
    rig: Rig,
    perf: SpeedModel,
    *,
    settings: PlanSettings | None = None,
) -> Reconciliation:
    """Plan what `log` shows and compare; `settings`, the plan a user made, only adds
    sentences where the log's settings differ from it."""
    notes: list[str] = []
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
        )
    s, unified = log_settings(log, g, notes)
    s_mem = replace(s, parallel=1) if unified else s
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
    )


def reconcile(
    log_text: str,
    spec: ModelSpec,
    rig: Rig,
    perf: SpeedModel,
    *,
    settings: PlanSettings | None = None,
) -> Reconciliation:
    """Parse a llama.cpp log or llama-bench output and compare it with RigSpark's plan
    for the same model, rig and settings."""
    return reconcile_log(parse_llama_log(log_text), spec, rig, perf, settings=settings)
