"""What a llama.cpp log says about one model load: settings, devices and every buffer.

Reads the load log llama-server, llama-cli and llama-cpp-python write to stderr (also
inside Ollama's server log, where each line may carry a journald or timestamp prefix)
and llama-bench's results (markdown table, `-o json` / `-o jsonl`, `-o csv`). Lines it
does not understand are skipped, so format drift across llama.cpp versions loses
detail rather than failing: `llm_load_tensors:` became `load_tensors:`,
`llama_kv_cache_init:` became `llama_kv_cache_unified:` then `llama_kv_cache:`, and
`llama_new_context_with_model:` became `llama_init_from_model:` then `llama_context:`.

Hostile input is bounded: the text is capped (MAX_LOG_BYTES), over-long lines are
skipped, and lines are taken apart with `str.find` / `split` and anchored patterns
without nested repetition, so the time is linear in the input.

The records are in log_records, the load-log reader in load_log, `--fit`'s lines in
fit_log and llama-bench's formats in bench_log; this module is the entry:
parse_llama_log and read_log_text.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from rigspark_gui.reconcile.bench_log import bench_csv, bench_json
from rigspark_gui.reconcile.fit_log import FitLogReader
from rigspark_gui.reconcile.load_log import LoadLogReader
from rigspark_gui.reconcile.log_records import MAX_LOG_BYTES, MIB, LlamaLog, LogReadError

__all__ = ["parse_llama_log", "read_log_text"]

# A file is binary when its head holds a NUL byte (a GGUF, an archive, an image).
_BINARY_PROBE = 65536


# ------------------------------------------------------------------ entry points


def _text_of(data: str | bytes) -> str:
    size = len(data)
    if size > MAX_LOG_BYTES:
        raise LogReadError(
            f"the log is {size / MIB:.0f} MiB; RigSpark reads logs up to "
            f"{MAX_LOG_BYTES // MIB} MiB (keep the part around the model load)"
        )
    head = data[:_BINARY_PROBE]
    if isinstance(head, bytes):
        head = head.decode("latin-1")
    if "\x00" in head:
        what = "a GGUF model file" if head.startswith("GGUF") else "binary"
        raise LogReadError(f"the file is {what}, not a llama.cpp log")
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    if not text.strip():
        raise LogReadError("the log is empty")
    return text


def _lines(text: str) -> Iterator[str]:
    # splitlines also breaks on \x0b, \x1c ... which logs never use; \n and \r\n suffice
    for line in text.split("\n"):
        yield line.removesuffix("\r")


def parse_llama_log(data: str | bytes) -> LlamaLog:
    """Everything a llama.cpp load log or llama-bench output says, with what `--fit`
    printed before the load (`fit`); raises LogReadError (one sentence) when the text is
    empty, binary, too large or holds no buffer sizes, no llama-bench results and no fit."""
    text = _text_of(data)
    lines = list(_lines(text))
    reader = LoadLogReader()
    fit_reader = FitLogReader()
    fit_lines = 0
    for n, line in enumerate(lines, 1):
        reader.line(n, line)
        fit_lines += fit_reader.line(n, line)
    bench, bench_format = bench_json(text) if "avg_ts" in text else ([], None)
    if not bench and "avg_ts" in text:
        bench, bench_format = bench_csv(lines), "csv"
    log = reader.result(len(lines), bench, bench_format)
    fit = fit_reader.result()
    if fit is not None:
        log = replace(log, fit=fit, skipped_lines=max(log.skipped_lines - fit_lines, 0))
    if not log.buffers and not log.bench and log.fit is None:
        raise LogReadError(
            "found no llama.cpp buffer sizes and no llama-bench results in the log "
            "(expected the output of llama-server, llama-cli, llama-cpp-python or llama-bench)"
        )
    return log


def read_log_text(path: str | os.PathLike[str]) -> str:
    """A log file's text, read up to MAX_LOG_BYTES; LogReadError when it cannot be read."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_LOG_BYTES + 1)
    except OSError as err:
        raise LogReadError(f"cannot read {p.name}: {err.strerror or err}") from None
    return _text_of(data)
