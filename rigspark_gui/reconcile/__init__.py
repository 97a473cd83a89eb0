"""Predicted against actual: read a llama.cpp load log or llama-bench output and compare
RigSpark's plan for the same model, rig and settings with what llama.cpp allocated."""

from rigspark_gui.reconcile.compare import reconcile, reconcile_log
from rigspark_gui.reconcile.llama_log import parse_llama_log, read_log_text
from rigspark_gui.reconcile.log_records import (
    MAX_LOG_BYTES,
    BenchRow,
    BufferKind,
    FlashAttn,
    LlamaLog,
    LogBuffer,
    LogDevice,
    LogReadError,
    buffer_device,
    quant_label,
)
from rigspark_gui.reconcile.reconciliation import (
    KIND_LABELS,
    ROUNDING_BYTES,
    BufferRow,
    Reconciliation,
    SpeedRow,
)
from rigspark_gui.reconcile.text import format_reconciliation

__all__ = [
    "KIND_LABELS",
    "MAX_LOG_BYTES",
    "ROUNDING_BYTES",
    "BenchRow",
    "BufferKind",
    "BufferRow",
    "FlashAttn",
    "LlamaLog",
    "LogBuffer",
    "LogDevice",
    "LogReadError",
    "Reconciliation",
    "SpeedRow",
    "buffer_device",
    "format_reconciliation",
    "parse_llama_log",
    "quant_label",
    "read_log_text",
    "reconcile",
    "reconcile_log",
]
