"""The plan a llama.cpp log shows: its settings (context, K/V types, flash attention,
sequences, n_ubatch, SWA sizing), the quantization to plan the model at, and its placement
(the -ngl it offloaded and the layers each GPU got, from llama.cpp's per-layer assignment
when printed, else from the sizes of its GPU buffers)."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.errors import InvalidRigError, InvalidSettingsError
from rigspark_gui.core.memory import WeightsLayout, kv_bytes_per_layer
from rigspark_gui.core.model import Geometry, KvCacheType, ModelSpec
from rigspark_gui.core.placement import Placement, auto_place
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings, make_settings
from rigspark_gui.reconcile.log_records import (
    BufferKind,
    FlashAttn,
    LlamaLog,
    LogReadError,
    buffer_device,
)
from rigspark_gui.reconcile.reconciliation import gpu_index

# ------------------------------------------------------------------ the log's settings


def _kv_type(name: str | None, which: str, notes: list[str]) -> KvCacheType:
    if name is None:
        return KvCacheType.F16
    try:
        kv = KvCacheType(name)
    except ValueError:
        notes.append(f"The log's {which} cache type {name} is not one RigSpark plans; used f16.")
        return KvCacheType.F16
    return kv


def weights_only(log: LlamaLog) -> bool:
    """The log stops before llama.cpp made its context (an out-of-memory load, a cut log):
    it has weights and nothing to size a KV cache or compute buffer from."""
    return log.n_ctx is None and not log.kv_cells


def log_settings(log: LlamaLog, g: Geometry, notes: list[str]) -> tuple[PlanSettings, bool]:
    """The log's settings as PlanSettings, and whether llama.cpp kept one unified KV
    stream for several sequences."""
    n_seq = log.n_seq_max or 1
    context = log.n_ctx
    if context is None and log.kv_cells:
        context = log.kv_cells[0] * (log.kv_streams or 1)
        notes.append(f"The log prints no n_ctx; its KV cache holds {context} cells, used as such.")
    if context is None:
        context = min(g.context_length, 4096)  # sizes nothing compared: weights only
        notes.append(
            "The log ends before llama.cpp made its context (no n_ctx, KV or compute "
            "lines): only the weights are compared."
        )
    k = _kv_type(log.type_k, "K", notes)
    v = _kv_type(log.type_v, "V", notes)
    fa = log.flash_attn
    if weights_only(log):
        fa = fa or FlashAttn.OFF
    elif fa is FlashAttn.AUTO:
        notes.append(
            "Flash attention was 'auto' and the log does not say what llama.cpp chose; "
            "planned with it on (what auto picks on CPUs and current GPUs)."
        )
    elif fa is None:
        fa = FlashAttn.ON if v.quantized else FlashAttn.OFF
        notes.append(f"The log does not say whether flash attention was on; planned {fa.value}.")
    unified = bool(log.kv_unified) if log.kv_unified is not None else log.kv_streams == 1
    swa_full = bool(log.swa_full)
    if log.swa_full is None and log.swa_cells is not None and log.kv_cells:
        swa_full = log.swa_cells >= max(log.kv_cells)
    try:
        s = make_settings(
            context=context,
            kv_k=k,
            kv_v=v,
            flash_attn=fa is not FlashAttn.OFF,
            parallel=n_seq,
            n_ubatch=log.n_ubatch or 512,
            swa_full=swa_full,
        )
    except InvalidSettingsError as err:
        raise LogReadError(f"the log's settings cannot be planned: {err}") from None
    return s, unified and n_seq > 1


def log_quant(log: LlamaLog, spec: ModelSpec, notes: list[str]) -> str:
    """The quantization to plan `spec` at: the log's file type where the model has it."""
    avail = spec.available_quants
    named = log.quant or next((r.quant for r in log.bench if r.quant), None)
    if spec.tensors is not None:
        if named and spec.file_quant and named != spec.file_quant:
            notes.append(
                f"The log's file is {named} but the model compared is a {spec.file_quant} file: "
                "the figures describe different files."
            )
        return avail[0]
    if named is not None and named in avail:
        return named
    fallback = "Q4_K_M" if "Q4_K_M" in avail else avail[0]
    what = f"a {named} file" if named else "a file of unknown type"
    notes.append(f"The log loaded {what}; {spec.name} is planned at {fallback}.")
    return fallback


# ------------------------------------------------------------------ the log's placement


def _slot_bytes(layout: WeightsLayout) -> list[int]:
    """Weights of each -ngl slot (blocks, then the head) when it sits on a GPU."""
    return [*layout.block_bytes, layout.output_bytes + layout.tied_head_bytes]


def _counts_from_sizes(
    sizes: Sequence[int], start: int, targets: Sequence[int], n_slots: int
) -> list[int]:
    """Slots per GPU, in GPU order from `start`, whose sizes add up closest to each
    GPU's figure in the log (llama.cpp gives each GPU one contiguous run)."""
    counts = [0] * len(targets)
    pos = start
    for k, target in enumerate(targets[:-1]):
        total = 0
        while pos < n_slots and abs(total + sizes[pos] - target) <= abs(total - target):
            total += sizes[pos]
            pos += 1
            counts[k] += 1
    counts[-1] = n_slots - pos
    return counts


def _layer_counts(
    log: LlamaLog,
    g: Geometry,
    layout: WeightsLayout,
    s: PlanSettings,
    ngl: int,
    n_gpus: int,
) -> list[int]:
    n_slots = g.n_layer + 1
    if len(log.layer_devices) == n_slots:
        counts = [0] * n_gpus
        for name in log.layer_devices:
            idx = gpu_index(buffer_device(name))
            if idx is not None and idx < n_gpus:
                counts[idx] += 1
        if sum(counts) == min(ngl, n_slots):
            return counts
    start = n_slots - min(ngl, n_slots)
    per_gpu_weights = [0] * n_gpus
    per_gpu_kv = [0] * n_gpus
    for b in log.buffers:
        idx = gpu_index(b.device)
        if idx is None or idx >= n_gpus:
            continue
        if b.kind is BufferKind.MODEL:
            per_gpu_weights[idx] += b.bytes
        elif b.kind is BufferKind.KV:
            per_gpu_kv[idx] += b.bytes
    if any(per_gpu_weights):
        return _counts_from_sizes(_slot_bytes(layout), start, per_gpu_weights, n_slots)
    if any(per_gpu_kv):
        kv = [*kv_bytes_per_layer(g, s), 0]
        return _counts_from_sizes(kv, start, per_gpu_kv, n_slots)
    return [1] * n_gpus


def log_placement(
    log: LlamaLog,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
) -> tuple[Placement, int, tuple[int, ...] | None]:
    """The log's placement, the layers it offloaded and the count each GPU got."""
    n_slots = g.n_layer + 1
    gpus = log.gpu_indices
    if not gpus:
        return auto_place(g, rig, s, ngl=0), 0, None
    if max(gpus) >= len(rig.gpus):
        names = ", ".join(
            b for b in dict.fromkeys(x.name for x in log.buffers if gpu_index(x.device) is not None)
        )
        raise InvalidRigError(
            f"the log used {max(gpus) + 1} GPUs ({names}) but the rig has {len(rig.gpus)}: "
            "compare it with a rig of the machine that wrote the log"
        )
    ngl = min(log.offloaded_layers if log.offloaded_layers is not None else n_slots, n_slots)
    n_gpus = max(gpus) + 1
    counts = _layer_counts(log, g, layout, s, ngl, n_gpus)
    if sum(counts) == 0:
        return auto_place(g, rig, s, ngl=0), 0, tuple(counts)
    placement = auto_place(
        g,
        rig,
        s,
        ngl=sum(counts),
        tensor_split=[float(c) for c in counts],
        gpu_ids=list(range(n_gpus)),
    )
    return placement, sum(counts), tuple(counts)
