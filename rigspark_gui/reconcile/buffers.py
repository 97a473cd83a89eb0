"""Predicted and actual buffers side by side: the CPU_REPACK buffer as the log shows it,
RigSpark's bytes per device and kind, and the rows that pair them with the buffers
llama.cpp printed (those it does not plan kept apart)."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.memory import RepackBytes, repack_for
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import CPU, OUTPUT, DeviceLoad, Placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.reconcile.log_records import BufferKind, LlamaLog, LogBuffer
from rigspark_gui.reconcile.reconciliation import BufferRow, gpu_index, mib_text

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


def log_repack(
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
            f"{mib_text(on_rig.total)} MiB of repacked weights beside the mapped file."
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


def predicted_buffers(
    loads: Sequence[DeviceLoad],
    placement: Placement,
    repack: RepackBytes | None,
    out_planned: int,
    out_real: int,
) -> dict[tuple[str, BufferKind], int]:
    """RigSpark's bytes per device and buffer kind, split as llama.cpp prints them."""
    pred: dict[tuple[str, BufferKind], int] = {}
    for load in loads:
        d = load.device
        repacked = _repack_on_cpu(placement, repack) if d == CPU else 0
        pred[(d, BufferKind.MODEL)] = load.weights_bytes - repacked
        if repacked:
            pred[(d, BufferKind.REPACK)] = repacked
        # llama.cpp's RS (recurrent state) buffers are read as KV buffers (load_log.py)
        pred[(d, BufferKind.KV)] = load.kv_bytes + load.state_bytes
        pred[(d, BufferKind.COMPUTE)] = load.compute_bytes - (out_planned if d == CPU else 0)
        if d == CPU:
            pred[(d, BufferKind.OUTPUT)] = out_real
    return pred


def _modelled(b: LogBuffer) -> bool:
    return (
        b.device is not None
        and b.kind is not BufferKind.OTHER
        and not b.name.startswith("AMX")
        and llama_origin(b.origin)
    )


def llama_origin(origin: str) -> bool:
    """Whether a buffer was printed by llama.cpp's own model or context."""
    return origin in _LLAMA_ORIGINS or origin.startswith(_LLAMA_ORIGIN_PREFIXES)


def _device_order(device: str) -> tuple[int, int, str]:
    if device == CPU:
        return (0, 0, device)
    idx = gpu_index(device)
    return (1, idx, device) if idx is not None else (2, 0, device)


def buffer_rows(
    log: LlamaLog, pred: dict[tuple[str, BufferKind], int]
) -> tuple[list[BufferRow], list[LogBuffer]]:
    """A row per device and kind, then one per buffer RigSpark does not plan (also
    returned apart)."""
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
