"""llama-bench's timings against RigSpark's estimates: each test planned at its own
settings and -ngl, its decode or prefill rate set beside the measured one."""

from __future__ import annotations

from dataclasses import replace

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.memory import WeightsLayout
from rigspark_gui.core.model import Geometry, KvCacheType
from rigspark_gui.core.placement import auto_place
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import make_settings
from rigspark_gui.core.speed import SpeedModel, estimate_decode, estimate_prefill
from rigspark_gui.reconcile.log_records import BenchRow, FlashAttn, LlamaLog
from rigspark_gui.reconcile.reconciliation import SpeedRow


def bench_rows(log: LlamaLog, layout: WeightsLayout, notes: list[str]) -> list[BenchRow]:
    models = list(dict.fromkeys(r.model for r in log.bench))
    if len(models) <= 1:
        return list(log.bench)

    def distance(model: str) -> float:
        params = next((r.params for r in log.bench if r.model == model and r.params), None)
        return abs(params - layout.n_params) if params else float("inf")

    best = min(models, key=distance)
    notes.append(
        f"llama-bench timed {len(models)} models; only {best}, the nearest in parameters, "
        "is compared."
    )
    return [r for r in log.bench if r.model == best]


def bench_speed(
    row: BenchRow,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    perf: SpeedModel,
    notes: list[str],
) -> SpeedRow:
    out = SpeedRow(
        model=row.model,
        test=row.test,
        backend=row.backend,
        ngl=row.ngl,
        measured_tok_s=row.tok_s,
        measured_sd=row.tok_s_sd,
    )
    if row.n_prompt and row.n_gen:
        return out  # a pp+tg average mixes two phases: no single estimate
    n_slots = g.n_layer + 1
    ngl = row.ngl if row.ngl is not None else (0 if row.backend.upper() == "CPU" else n_slots)
    ngl = n_slots if ngl < 0 or ngl > n_slots else ngl
    if not rig.gpus:
        ngl = 0
    try:
        s = make_settings(
            context=max(row.n_prompt + row.n_gen + row.n_depth, 1),
            kv_k=KvCacheType(row.type_k or "f16"),
            kv_v=KvCacheType(row.type_v or "f16"),
            flash_attn=row.flash_attn is not FlashAttn.OFF and row.flash_attn is not None,
            n_ubatch=row.n_ubatch or 512,
            # decode is estimated at the mean depth of the timed tokens
            prompt_tokens=max(row.n_depth + row.n_gen // 2, 1) if row.n_gen else row.n_prompt,
        )
    except (InvalidSettingsError, ValueError):
        notes.append(f"llama-bench test {row.test}: its settings cannot be planned; not estimated.")
        return out
    split = (
        list(row.tensor_split)
        if row.tensor_split and len(row.tensor_split) == len(rig.gpus)
        else None
    )
    placement = auto_place(g, rig, s, ngl=ngl, tensor_split=split)
    if row.n_gen:
        tp = estimate_decode(placement, g, layout, rig, s, perf)
        return replace(
            out,
            predicted_tok_s=tp.tok_s,
            predicted_low=tp.low_tok_s,
            predicted_high=tp.high_tok_s,
            basis=tp.basis,
        )
    pf = estimate_prefill(placement, g, layout, rig, s, perf)

    def rate(seconds: float | None) -> float | None:
        return row.n_prompt / seconds if seconds else None

    return replace(
        out,
        predicted_tok_s=rate(pf.seconds),
        predicted_low=rate(pf.high_seconds),
        predicted_high=rate(pf.low_seconds),
        basis=pf.basis,
    )
