"""Predicted against actual: plan the settings a llama.cpp log shows and compare, buffer
by buffer and device by device, what RigSpark predicts with what llama.cpp allocated.

The plan copies the log: its context, K/V types, flash attention, sequences, n_ubatch,
SWA sizing, the -ngl it offloaded and the layers each GPU got (read from llama.cpp's
per-layer assignment when printed, else from the sizes of the GPU model buffers), and
whether a CPU_REPACK buffer was made. What is left is the engine's own error, and every
figure that differs beyond llama.cpp's two-decimal rounding gets a sentence saying why
it may differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from rigspark_gui.core.errors import InvalidRigError, InvalidSettingsError
from rigspark_gui.core.memory import (
    RepackBytes,
    WeightsLayout,
    kv_bytes_per_layer,
    kv_cells,
    kv_total_bytes,
    output_buffer_bytes,
    repack_for,
    weights_layout,
)
from rigspark_gui.core.model import Geometry, KvCacheType, ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    OUTPUT,
    DeviceLoad,
    Placement,
    auto_place,
    device_loads,
    fit_by_ngl,
)
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings, make_settings
from rigspark_gui.core.speed import SpeedModel, estimate_decode, estimate_prefill
from rigspark_gui.reconcile.llama_log import (
    MIB,
    BenchRow,
    BufferKind,
    FlashAttn,
    LlamaLog,
    LogBuffer,
    LogReadError,
    buffer_device,
    parse_llama_log,
)

# llama.cpp prints MiB with two decimals: each printed buffer is within half of
# 0.01 MiB of its size.
ROUNDING_BYTES = (MIB + 199) // 200
# A figure within half a MiB of llama.cpp's is "close": the CPU compute buffer is a
# fitted estimate and lands there (docs/validation.md).
CLOSE_BYTES = MIB // 2
# Functions that print the buffers of llama.cpp's own model and context; a buffer
# printed by anything else (a vision projector's clip context, a draft model's
# helper) is one RigSpark does not plan.
_LLAMA_ORIGINS = {"", "load_tensors", "llm_load_tensors", "llama_context",
                  "llama_new_context_with_model", "llama_init_from_model", "sched_reserve",
                  "graph_reserve"}  # fmt: skip
_LLAMA_ORIGIN_PREFIXES = ("llama_kv_cache", "llama_memory")
_KIND_ORDER = (
    BufferKind.MODEL,
    BufferKind.REPACK,
    BufferKind.KV,
    BufferKind.COMPUTE,
    BufferKind.OUTPUT,
    BufferKind.OTHER,
)
KIND_LABELS = {
    BufferKind.MODEL: "weights",
    BufferKind.REPACK: "repack",
    BufferKind.KV: "KV",
    BufferKind.COMPUTE: "compute",
    BufferKind.OUTPUT: "output",
    BufferKind.OTHER: "other",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class BufferRow:
    """One device's buffers of one kind: what RigSpark predicts and what llama.cpp made."""

    # cpu, gpu:N, or the buffer's name for an unknown backend
    device: str
    kind: BufferKind
    # llama.cpp's names of the buffers summed
    buffers: tuple[str, ...]
    # None: RigSpark does not model it
    predicted_bytes: int | None
    # None: the log shows no such buffer
    actual_bytes: int | None
    actual_mib: float | None = None

    @property
    def difference_bytes(self) -> int | None:
        """Predicted minus actual."""
        if self.predicted_bytes is None or self.actual_bytes is None:
            return None
        return self.predicted_bytes - self.actual_bytes

    @property
    def within_rounding(self) -> bool:
        diff = self.difference_bytes
        return diff is not None and abs(diff) <= ROUNDING_BYTES * max(len(self.buffers), 1)

    @property
    def close(self) -> bool:
        """Within half a MiB (or llama.cpp's rounding, for many buffers)."""
        diff = self.difference_bytes
        return diff is not None and (self.within_rounding or abs(diff) <= CLOSE_BYTES)

    @property
    def status(self) -> str:
        if self.predicted_bytes is None:
            return "not modelled"
        if self.actual_bytes is None:
            return "not in log"
        return "match" if self.within_rounding else "close" if self.close else "differs"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedRow:
    """One llama-bench test: measured against RigSpark's estimate for the same run."""

    model: str
    test: str
    backend: str
    ngl: int | None
    measured_tok_s: float
    measured_sd: float | None = None
    predicted_tok_s: float | None = None
    predicted_low: float | None = None
    predicted_high: float | None = None
    basis: str = ""

    @property
    def ratio(self) -> float | None:
        """Predicted over measured."""
        if self.predicted_tok_s is None or self.measured_tok_s <= 0:
            return None
        return self.predicted_tok_s / self.measured_tok_s


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciliation:
    model: str
    quant: str
    # the log's settings, as planned
    settings: PlanSettings | None
    ngl: int | None = None
    # slots each GPU got: the --tensor-split that reproduces it
    layers_per_gpu: tuple[int, ...] | None = None
    rows: tuple[BufferRow, ...] = ()
    speeds: tuple[SpeedRow, ...] = ()
    explanations: tuple[str, ...] = ()
    log: LlamaLog

    @property
    def compared_rows(self) -> tuple[BufferRow, ...]:
        return tuple(r for r in self.rows if r.difference_bytes is not None)

    @property
    def predicted_total(self) -> int:
        return sum(r.predicted_bytes or 0 for r in self.compared_rows)

    @property
    def actual_total(self) -> int:
        return sum(r.actual_bytes or 0 for r in self.compared_rows)

    @property
    def all_within_rounding(self) -> bool:
        return all(r.within_rounding for r in self.rows)


def _mib(n: int | float) -> str:
    return f"{n / MIB:,.2f}"


def _signed_mib(n: int) -> str:
    return _signed(n / MIB)


def _signed(mib: float) -> str:
    return f"{0.0 if abs(mib) < 0.005 else mib:+,.2f}"


def _gpu_index(device: str | None) -> int | None:
    if device is None or not device.startswith("gpu:"):
        return None
    return int(device.split(":")[1])


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


def _weights_only(log: LlamaLog) -> bool:
    """The log stops before llama.cpp made its context (an out-of-memory load, a cut log):
    it has weights and nothing to size a KV cache or compute buffer from."""
    return log.n_ctx is None and not log.kv_cells


def _log_settings(log: LlamaLog, g: Geometry, notes: list[str]) -> tuple[PlanSettings, bool]:
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
    if _weights_only(log):
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


def _quant(log: LlamaLog, spec: ModelSpec, notes: list[str]) -> str:
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
            idx = _gpu_index(buffer_device(name))
            if idx is not None and idx < n_gpus:
                counts[idx] += 1
        if sum(counts) == min(ngl, n_slots):
            return counts
    start = n_slots - min(ngl, n_slots)
    per_gpu_weights = [0] * n_gpus
    per_gpu_kv = [0] * n_gpus
    for b in log.buffers:
        idx = _gpu_index(b.device)
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


def _placement(
    log: LlamaLog,
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
) -> tuple[Placement, int, tuple[int, ...] | None]:
    n_slots = g.n_layer + 1
    gpus = log.gpu_indices
    if not gpus:
        return auto_place(g, rig, s, ngl=0), 0, None
    if max(gpus) >= len(rig.gpus):
        names = ", ".join(
            b
            for b in dict.fromkeys(x.name for x in log.buffers if _gpu_index(x.device) is not None)
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


# ------------------------------------------------------------------ predicted and actual


def _repack(
    log: LlamaLog, spec: ModelSpec, quant: str, rig: Rig, notes: list[str], any_cpu_units: bool
) -> RepackBytes | None:
    """CPU_REPACK as the log shows it: planned when llama.cpp made one, left out when
    its model buffers show none (--no-repack, or a CPU or build without it)."""
    on_rig = repack_for(spec, quant, tuple(rig.cpu.features))
    made = [b for b in log.buffers if b.name.startswith(("CPU_REPACK", "CPU_AARCH64"))]
    if made:
        if on_rig is None:
            notes.append(
                "llama.cpp made a CPU_REPACK buffer though the rig lists no AVX2/AVX-512; "
                "planned it as on an AVX2 CPU."
            )
            return repack_for(spec, quant, ("avx2",))
        return on_rig
    if not log.buffers_of(BufferKind.MODEL):
        return on_rig
    amx = any(b.name.startswith("AMX") for b in log.buffers)
    if on_rig is not None and on_rig.total > 0 and any_cpu_units and not amx:
        notes.append(
            f"The log has no CPU_REPACK buffer (llama.cpp run with --no-repack, or a build "
            f"or CPU without it), so none is planned; on this rig RigSpark would count "
            f"{_mib(on_rig.total)} MiB of repacked weights beside the mapped file."
        )
    return None


def _repack_on_cpu(placement: Placement, repack: RepackBytes | None) -> int:
    """CPU_REPACK bytes of the units that run on the CPU (as device_loads counts them)."""
    if repack is None:
        return 0
    total = repack.output_bytes if placement.unit(OUTPUT).device == CPU else 0
    for u in placement.blocks:
        if CPU not in (u.device, u.experts_device):
            continue
        block = repack.block_bytes[u.index]
        experts = repack.block_expert_bytes[u.index]
        if u.experts_device in (None, u.device):
            total += block
        else:
            total += experts if u.experts_device == CPU else block - experts
    return total


def _predicted(
    loads: Sequence[DeviceLoad],
    placement: Placement,
    repack: RepackBytes | None,
    out_planned: int,
    out_real: int,
) -> dict[tuple[str, BufferKind], int]:
    pred: dict[tuple[str, BufferKind], int] = {}
    for load in loads:
        d = load.device
        repacked = _repack_on_cpu(placement, repack) if d == CPU else 0
        pred[(d, BufferKind.MODEL)] = load.weights_bytes - repacked
        if repacked:
            pred[(d, BufferKind.REPACK)] = repacked
        pred[(d, BufferKind.KV)] = load.kv_bytes
        pred[(d, BufferKind.COMPUTE)] = load.compute_bytes - (out_planned if d == CPU else 0)
        if d == CPU:
            pred[(d, BufferKind.OUTPUT)] = out_real
    return pred


def _modelled(b: LogBuffer) -> bool:
    return (
        b.device is not None
        and b.kind is not BufferKind.OTHER
        and not b.name.startswith("AMX")
        and _llama_origin(b.origin)
    )


def _llama_origin(origin: str) -> bool:
    return origin in _LLAMA_ORIGINS or origin.startswith(_LLAMA_ORIGIN_PREFIXES)


def _device_order(device: str) -> tuple[int, int, str]:
    if device == CPU:
        return (0, 0, device)
    idx = _gpu_index(device)
    return (1, idx, device) if idx is not None else (2, 0, device)


def _rows(
    log: LlamaLog, pred: dict[tuple[str, BufferKind], int]
) -> tuple[list[BufferRow], list[LogBuffer]]:
    actual: dict[tuple[str, BufferKind], list[LogBuffer]] = {}
    unmodelled: list[LogBuffer] = []
    for b in log.buffers:
        if _modelled(b):
            assert b.device is not None
            actual.setdefault((b.device, b.kind), []).append(b)
        else:
            unmodelled.append(b)
    rows: list[BufferRow] = []
    for key in sorted(
        set(pred) | set(actual), key=lambda k: (_device_order(k[0]), _KIND_ORDER.index(k[1]))
    ):
        bufs = actual.get(key, [])
        p = pred.get(key, 0)
        if not bufs and p == 0:
            continue
        rows.append(
            BufferRow(
                device=key[0],
                kind=key[1],
                buffers=tuple(dict.fromkeys(b.name for b in bufs)),
                predicted_bytes=p,
                actual_bytes=sum(b.bytes for b in bufs) if bufs else None,
                actual_mib=round(sum(b.mib for b in bufs), 2) if bufs else None,
            )
        )
    for b in unmodelled:
        rows.append(
            BufferRow(
                device=b.device or b.name,
                kind=b.kind,
                buffers=(b.name,),
                predicted_bytes=None,
                actual_bytes=b.bytes,
                actual_mib=b.mib,
            )
        )
    return rows, unmodelled


# ------------------------------------------------------------------ explanations


def _explain_unmodelled(b: LogBuffer) -> str:
    if b.name.startswith("AMX"):
        return (
            f"llama.cpp copied {b.mib:.2f} MiB of weights into an AMX buffer (Intel AMX "
            "tiles); RigSpark does not model AMX buffers, and the mapped file shrinks by "
            "the tensors moved there."
        )
    if b.device is None:
        return f"{b.name} is a backend RigSpark does not plan ({b.mib:.2f} MiB {b.kind.value})."
    if not _llama_origin(b.origin):
        return (
            f"{b.name} {b.kind.value} buffer printed by {b.origin} ({b.mib:.2f} MiB) belongs "
            "to something beside the model (a vision projector, a draft model): not planned."
        )
    return f"{b.name} {b.kind.value} buffer ({b.mib:.2f} MiB) is not one RigSpark models."


def _explain_row(
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
            f"{_mib(r.predicted_bytes or 0)} MiB (is the log cut short?)."
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
    size = f"{_signed_mib(diff)} MiB"
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


def _explain_settings(
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
            f"{plan.context}. The KV cache is {_mib(kv_total_bytes(g, s_mem))} MiB at the "
            f"log's context and {_mib(kv_total_bytes(g, plan))} MiB at the plan's; the table "
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


def _explain_context(
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


def _explain_model(log: LlamaLog, g: Geometry, spec: ModelSpec, notes: list[str]) -> None:
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


def _explain_offload(
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
        idx = _gpu_index(buffer_device(d.name))
        if idx is None or idx >= len(rig.gpus) or not d.description:
            continue
        mine = rig.gpus[idx].name
        if d.description.lower() not in mine.lower() and mine.lower() not in d.description.lower():
            notes.append(
                f"llama.cpp's {d.name} is a {d.description}; the rig's GPU {idx} is {mine}."
            )


# ------------------------------------------------------------------ llama-bench


def _bench_rows(log: LlamaLog, layout: WeightsLayout, notes: list[str]) -> list[BenchRow]:
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


def _speed(
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


# ------------------------------------------------------------------ entry points


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
    quant = _quant(log, spec, notes)
    layout = weights_layout(spec, quant)
    _explain_model(log, g, spec, notes)
    speeds = [_speed(r, g, layout, rig, perf, notes) for r in _bench_rows(log, layout, notes)]
    if not log.buffers:
        return Reconciliation(
            model=spec.name,
            quant=quant,
            settings=None,
            speeds=tuple(speeds),
            explanations=tuple(notes),
            log=log,
        )
    s, unified = _log_settings(log, g, notes)
    s_mem = replace(s, parallel=1) if unified else s
    placement, ngl, counts = _placement(log, g, layout, rig, s_mem)
    any_cpu = any(u.device == CPU for u in placement.units if u.index >= 0)
    repack = _repack(log, spec, quant, rig, notes, any_cpu)
    loads = device_loads(placement, g, layout, rig, s_mem, cpu_repack=repack)
    pred = _predicted(
        loads, placement, repack, output_buffer_bytes(g, s_mem), output_buffer_bytes(g, s)
    )
    if _weights_only(log):
        pred = {k: v for k, v in pred.items() if k[1] in (BufferKind.MODEL, BufferKind.REPACK)}
    rows, unmodelled = _rows(log, pred)
    _explain_context(log, g, s, unified, notes)
    _explain_settings(log, g, s, s_mem, settings, notes)
    _explain_offload(log, g, layout, rig, s_mem, ngl, loads, notes)
    for r in rows:
        if r.predicted_bytes is not None:
            line = _explain_row(r, g, spec, s_mem, log, placement)
            if line is not None:
                notes.append(line)
    notes.extend(_explain_unmodelled(b) for b in unmodelled)
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


# ------------------------------------------------------------------ text


def _settings_line(r: Reconciliation) -> str:
    s = r.settings
    if s is None:
        return ""
    fa = "on" if s.flash_attn else "off"
    parts = [
        f"context {s.context}",
        f"K/V {s.kv_k.value}/{s.kv_v.value}",
        f"flash attention {fa}",
        f"{s.parallel} sequence{'s' if s.parallel > 1 else ''}",
        f"n_ubatch {s.n_ubatch}",
    ]
    if r.ngl:
        parts.append(f"-ngl {r.ngl}")
        if r.layers_per_gpu and len(r.layers_per_gpu) > 1:
            parts.append("--tensor-split " + ",".join(str(c) for c in r.layers_per_gpu))
    else:
        parts.append("CPU only")
    return "Settings from the log: " + ", ".join(parts)


def _table(header: Sequence[str], body: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def fmt(row: Sequence[str]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [fmt(header), *(fmt(row) for row in body)]


def format_reconciliation(r: Reconciliation) -> str:
    """The reconciliation as the CLI prints it: a table per device and kind, then the
    llama-bench speeds, then the explanations."""
    log = r.log
    name = log.model_name or r.model
    src = f" ({log.model_path.rsplit('/', 1)[-1]})" if log.model_path else ""
    out = [f"Predicted vs actual: {name}{src}, {r.quant}"]
    line = _settings_line(r)
    if line:
        out.append(line)
    if r.rows:
        # MiB as llama.cpp prints them (two decimals), the difference between the two
        # printed figures and totals of the printed figures, so the table adds up
        body: list[list[str]] = []
        sums = [0.0, 0.0]
        for row in r.rows:
            pred = round(row.predicted_bytes / MIB, 2) if row.predicted_bytes is not None else None
            actual = row.actual_mib
            diff = "-"
            if pred is not None and actual is not None:
                sums[0] += pred
                sums[1] += actual
                diff = _signed(pred - actual)
            body.append(
                [
                    row.device,
                    KIND_LABELS[row.kind],
                    ", ".join(row.buffers) or "-",
                    f"{pred:,.2f}" if pred is not None else "-",
                    f"{actual:,.2f}" if actual is not None else "-",
                    diff,
                    row.status,
                ]
            )
        total = ["total", "", "", f"{sums[0]:,.2f}", f"{sums[1]:,.2f}", _signed(sums[0] - sums[1])]
        body.append([*total, ""])
        header = [
            "device",
            "kind",
            "llama.cpp buffers",
            "predicted MiB",
            "actual MiB",
            "difference MiB",
            "",
        ]
        out += ["", *_table(header, body, {3, 4, 5})]
    if r.speeds:
        body = []
        for sp in r.speeds:
            measured = f"{sp.measured_tok_s:,.2f}"
            if sp.measured_sd is not None:
                measured += f" ± {sp.measured_sd:,.2f}"
            if sp.predicted_tok_s is None:
                predicted = "-"
            else:
                predicted = f"{sp.predicted_tok_s:,.1f}"
                if sp.predicted_low is not None and sp.predicted_high is not None:
                    predicted += f" ({sp.predicted_low:,.1f}–{sp.predicted_high:,.1f})"
            ratio = f"{sp.ratio:.2f}" if sp.ratio is not None else "-"
            ngl = str(sp.ngl) if sp.ngl is not None else "-"
            body.append([sp.test, sp.backend, ngl, measured, predicted, ratio])
        header = [
            "llama-bench test",
            "backend",
            "ngl",
            "measured t/s",
            "predicted t/s (band)",
            "predicted/measured",
        ]
        out += ["", *_table(header, body, {2, 3, 4, 5})]
    if r.explanations:
        out += ["", "Why figures may differ:"]
        out += [f"- {e}" for e in r.explanations]
    return "\n".join(out) + "\n"
