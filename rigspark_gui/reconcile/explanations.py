"""The sentences saying why a figure may differ: for each row beyond llama.cpp's
rounding, each buffer RigSpark does not plan, and where the log's model, context,
settings or offload differ from what was planned."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.memory import WeightsLayout, kv_cells, kv_total_bytes
from rigspark_gui.core.model import Geometry, ModelSpec
from rigspark_gui.core.placement import CPU, DeviceLoad, Placement, fit_by_ngl
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.reconcile.buffers import llama_origin
from rigspark_gui.reconcile.log_records import MIB, BufferKind, LlamaLog, LogBuffer, buffer_device
from rigspark_gui.reconcile.reconciliation import (
    KIND_LABELS,
    ROUNDING_BYTES,
    BufferRow,
    gpu_index,
    mib_text,
    signed_mib_text,
)


def explain_unmodelled(b: LogBuffer) -> str:
    if b.name.startswith("AMX"):
        return (
            f"llama.cpp copied {b.mib:.2f} MiB of weights into an AMX buffer (Intel AMX "
            "tiles); RigSpark does not model AMX buffers, and the mapped file shrinks by "
            "the tensors moved there."
        )
    if b.device is None:
        return f"{b.name} is a backend RigSpark does not plan ({b.mib:.2f} MiB {b.kind.value})."
    if not llama_origin(b.origin):
        return (
            f"{b.name} {b.kind.value} buffer printed by {b.origin} ({b.mib:.2f} MiB) belongs "
            "to something beside the model (a vision projector, a draft model): not planned."
        )
    return f"{b.name} {b.kind.value} buffer ({b.mib:.2f} MiB) is not one RigSpark models."


def explain_row(
    r: BufferRow,
    g: Geometry,
    spec: ModelSpec,
    s: PlanSettings,
    log: LlamaLog,
    placement: Placement,
) -> str | None:
    diff = r.difference_bytes
    where = "the CPU" if r.device == CPU else r.device
    label = KIND_LABELS[r.kind]
    if r.actual_bytes is None:
        return (
            f"The log shows no {label} buffer on {where} where RigSpark plans "
            f"{mib_text(r.predicted_bytes or 0)} MiB (is the log cut short?)."
        )
    if diff is None or r.within_rounding:
        return None
    if r.close and r.kind is BufferKind.COMPUTE:
        return None  # an estimate within half a MiB: nothing to explain
    if r.predicted_bytes == 0:
        extra = ""
        if r.kind is BufferKind.COMPUTE and r.device != CPU:
            extra = " (llama.cpp runs large batches on a GPU it can see even at -ngl 0)"
        return (
            f"llama.cpp made a {r.actual_mib:.2f} MiB {label} buffer on {where} "
            f"({', '.join(r.buffers)}) where RigSpark plans none{extra}."
        )
    size = f"{signed_mib_text(diff)} MiB"
    if r.kind is BufferKind.MODEL:
        if r.device == CPU and any(b.name.startswith("AMX") for b in log.buffers):
            return (
                f"Weights on the CPU differ by {size}: the mapped file leaves out the "
                "tensors llama.cpp moved into its AMX buffer."
            )
        if spec.tensors is None:
            return (
                f"Weights on {where} differ by {size}: a catalog model's tensors are "
                "synthesized from its geometry and llama-quantize's rules, not read from "
                "the file the log loaded."
            )
        return f"Weights on {where} differ by {size}: the log's file may not be this one."
    if r.kind is BufferKind.KV:
        if r.device == CPU and any(u.device != CPU for u in placement.blocks):
            return (
                f"KV on the CPU differs by {size}: llama.cpp kept the cache of offloaded "
                "layers in RAM (--no-kv-offload?), RigSpark keeps it with each layer."
            )
        layer = next((i for i in range(g.n_layer) if g.kv_heads(i) > 0 and not g.is_sliding(i)), 0)
        planned = kv_cells(g, layer, s) // max(s.parallel, 1)
        if log.kv_cells and log.kv_cells[0] != planned:
            return (
                f"KV on {where} differs by {size}: llama.cpp's cache holds "
                f"{log.kv_cells[0]} cells per stream, the plan {planned}."
            )
        return f"KV on {where} differs by {size}."
    if r.kind is BufferKind.OUTPUT:
        embd_rows = 4 * g.n_embd * (log.n_seq_max or s.parallel)
        if abs(-diff - embd_rows) <= ROUNDING_BYTES:
            return (
                f"The output buffer is {-diff / MIB:.2f} MiB larger than planned: older "
                "llama.cpp builds also reserved an embeddings row (n_embd floats) per "
                "sequence beside the logits."
            )
        return f"The output buffer differs by {size}."
    if r.kind is BufferKind.COMPUTE:
        how = "fitted on llama.cpp's own buffers" if r.device == CPU else "checked on CUDA logs"
        return (
            f"Compute on {where} differs by {size}: compute buffers are RigSpark's estimate "
            f"of ggml-alloc's peak ({how}; docs/validation.md, docs/validation-gpu.md)."
        )
    return f"{label} on {where} differs by {size}."


def explain_settings(
    log: LlamaLog,
    g: Geometry,
    s: PlanSettings,
    s_mem: PlanSettings,
    plan: PlanSettings | None,
    notes: list[str],
) -> None:
    if plan is None:
        return
    if plan.context != s.context:
        notes.append(
            f"The log ran with a {s.context}-token context; the plan compared uses "
            f"{plan.context}. The KV cache is {mib_text(kv_total_bytes(g, s_mem))} MiB at the "
            f"log's context and {mib_text(kv_total_bytes(g, plan))} MiB at the plan's; the table "
            "is for the log's."
        )
    if (plan.kv_k, plan.kv_v) != (s.kv_k, s.kv_v):
        notes.append(
            f"The log's K/V cache is {s.kv_k.value}/{s.kv_v.value}; the plan compared uses "
            f"{plan.kv_k.value}/{plan.kv_v.value}."
        )
    if plan.flash_attn != s.flash_attn:
        on = "on" if s.flash_attn else "off"
        notes.append(f"Flash attention was {on} in the log, not as in the plan compared.")
    if plan.parallel != s.parallel:
        notes.append(
            f"The log served {s.parallel} sequences at once; the plan compared {plan.parallel}."
        )
    if g.sliding_window and plan.swa_full != s.swa_full:
        notes.append(
            "The log sized the sliding-window layers "
            + ("for the whole context (--swa-full)" if s.swa_full else "for their window")
            + "; the plan compared does the other."
        )


def explain_context(
    log: LlamaLog, g: Geometry, s: PlanSettings, unified: bool, notes: list[str]
) -> None:
    if unified:
        notes.append(
            f"llama.cpp kept one unified KV cache for its {s.parallel} sequences; planned "
            f"as one stream of {s.context} cells (RigSpark otherwise plans one per sequence)."
        )
    if log.n_ctx_train and log.n_ctx_per_seq and log.n_ctx_per_seq > log.n_ctx_train:
        notes.append(
            f"Each sequence has {log.n_ctx_per_seq} tokens, past the model's trained "
            f"{log.n_ctx_train}."
        )
    if g.sliding_window:
        how = "for the whole context (swa_full)" if s.swa_full else "for their window"
        notes.append(
            f"This model slides a {g.sliding_window}-token window on some layers; the log "
            f"sized those layers {how}, and so does the plan."
        )


def explain_model(log: LlamaLog, g: Geometry, spec: ModelSpec, notes: list[str]) -> None:
    if log.n_layer is not None and log.n_layer != g.n_layer:
        notes.append(
            f"The log's model has {log.n_layer} layers and {spec.name} has {g.n_layer}: "
            "the figures describe different models."
        )
    elif log.architecture and log.architecture != g.architecture:
        notes.append(
            f"The log's model is a {log.architecture}, {spec.name} a {g.architecture}: "
            "the figures may describe different models."
        )
    if log.loads > 1:
        notes.append(f"The log holds {log.loads} model loads; the last one is compared.")
    for failure in log.failures:
        notes.append(f'llama.cpp failed to allocate memory: "{failure}".')


def explain_offload(
    log: LlamaLog,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    ngl: int,
    loads: Sequence[DeviceLoad],
    notes: list[str],
) -> None:
    n_slots = g.n_layer + 1
    if log.offloaded_layers is not None and log.offloaded_layers != ngl and log.gpu_indices:
        notes.append(
            f"llama.cpp says it offloaded {log.offloaded_layers} layers; its GPU buffers "
            f"fit {ngl}, which is what was planned."
        )
    if rig.gpus and ngl < n_slots:
        fit = fit_by_ngl(g, layout, rig, s).gpu_slots
        if fit != ngl:
            notes.append(
                f"llama.cpp offloaded {ngl} of {n_slots} layers; at these settings RigSpark's "
                f"fit for this rig is -ngl {fit}."
            )
    copies = max((x.input_copies for x in loads if x.device != CPU), default=1)
    if log.pipeline_copies is not None and log.pipeline_copies != copies:
        notes.append(
            f"llama.cpp ran pipeline parallelism with {log.pipeline_copies} copies of each "
            f"device's inputs; RigSpark expected {copies} for this rig (it turns them on "
            "for several NVIDIA or AMD GPUs holding every layer)."
        )
    for d in log.devices:
        idx = gpu_index(buffer_device(d.name))
        if idx is None or idx >= len(rig.gpus) or not d.description:
            continue
        mine = rig.gpus[idx].name
        if d.description.lower() not in mine.lower() and mine.lower() not in d.description.lower():
            notes.append(
                f"llama.cpp's {d.name} is a {d.description}; the rig's GPU {idx} is {mine}."
            )
