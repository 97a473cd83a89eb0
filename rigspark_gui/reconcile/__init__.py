"""Predicted against actual: read a llama.cpp load log or llama-bench output and compare
RigSpark's plan for the same model, rig and settings with what llama.cpp allocated."""

from rigspark_gui.reconcile.compare import compare_fit, reconcile, reconcile_log
from rigspark_gui.reconcile.fit_log import parse_fit_log
from rigspark_gui.reconcile.llama_log import parse_llama_log, read_log_text
from rigspark_gui.reconcile.log_records import (
    MAX_LOG_BYTES,
    BenchRow,
    BufferKind,
    FitLog,
    FitLogDevice,
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
    FitRow,
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
    "FitLog",
    "FitLogDevice",
    "FitRow",
    "FlashAttn",
    "LlamaLog",
    "LogBuffer",
    "LogDevice",
    "LogReadError",
    "Reconciliation",
    "SpeedRow",
    "buffer_device",
    "compare_fit",
    "format_reconciliation",
    "parse_fit_log",
    "parse_llama_log",
    "quant_label",
    "read_log_text",
    "reconcile",
    "reconcile_log",
]
