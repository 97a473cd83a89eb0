"""llama-bench results as BenchRows: its markdown table rows, `-o json` (one array,
possibly after log lines), `-o jsonl` and `-o csv`.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable
from typing import Any

from rigspark_gui.reconcile.log_records import (
    MAX_LINE_CHARS,
    MAX_LOG_BYTES,
    BenchRow,
    parse_flash,
    parse_float,
    parse_int,
)

__all__ = ["bench_csv", "bench_from_markdown", "bench_json", "bench_models"]

# ------------------------------------------------------------------ llama-bench rows


def _size_bytes(text: str) -> int | None:
    parts = text.split()
    scale = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10}
    if len(parts) == 2 and parts[1] in scale:
        v = parse_float(parts[0])
        return None if v is None else round(v * scale[parts[1]])
    return None


def _params(text: str) -> int | None:
    parts = text.split()
    scale = {"B": 1e9, "M": 1e6, "K": 1e3, "T": 1e12}
    if len(parts) == 2 and parts[1] in scale:
        v = parse_float(parts[0])
        return None if v is None else round(v * scale[parts[1]])
    return None


_TEST_PART = re.compile(r"(pp|tg)\s?(\d{1,7})\Z")


def _test_shape(test: str) -> tuple[int, int, int] | None:
    """(n_prompt, n_gen, n_depth) of 'pp512', 'tg 128', 'pp512+tg128', 'tg128 @ d4096'."""
    head, _, depth_part = test.partition("@")
    depth = 0
    if depth_part:
        d = depth_part.strip()
        if not (d.startswith("d") and d[1:].isdigit() and len(d) < 10):
            return None
        depth = int(d[1:])
    n_prompt = n_gen = 0
    for part in head.split("+"):
        m = _TEST_PART.match(part.strip())
        if m is None:
            return None
        if m.group(1) == "pp":
            n_prompt = int(m.group(2))
        else:
            n_gen = int(m.group(2))
    return n_prompt, n_gen, depth


def _test_name(n_prompt: int, n_gen: int, n_depth: int) -> str:
    parts = ([f"pp{n_prompt}"] if n_prompt else []) + ([f"tg{n_gen}"] if n_gen else [])
    name = "+".join(parts) or "pp0"
    return f"{name} @ d{n_depth}" if n_depth else name


def _split(text: str | None) -> tuple[float, ...] | None:
    if not text:
        return None
    values = [parse_float(x) for x in text.replace("/", ",").split(",")[:64]]
    if any(v is None for v in values):
        return None
    out = tuple(v for v in values if v is not None)
    return out if sum(out) > 0 else None


def bench_from_markdown(cells: dict[str, str]) -> BenchRow | None:
    shape = _test_shape(cells.get("test", ""))
    speed = cells.get("t/s", "").replace("±", " ").split()
    tok_s = parse_float(speed[0]) if speed else None
    if shape is None or tok_s is None:
        return None
    backend = cells.get("backend", "")
    fa = cells.get("fa")
    return BenchRow(
        model=cells.get("model", ""),
        size_bytes=_size_bytes(cells.get("size", "")),
        params=_params(cells.get("params", "")),
        backend=backend,
        ngl=parse_int(cells.get("ngl")),
        threads=parse_int(cells.get("threads")),
        n_batch=parse_int(cells.get("n_batch")),
        n_ubatch=parse_int(cells.get("n_ubatch")),
        type_k=cells.get("type_k") or None,
        type_v=cells.get("type_v") or None,
        flash_attn=parse_flash(fa) if fa else None,
        tensor_split=_split(cells.get("ts")),
        test=cells.get("test", ""),
        n_prompt=shape[0],
        n_gen=shape[1],
        n_depth=shape[2],
        tok_s=tok_s,
        tok_s_sd=parse_float(speed[1]) if len(speed) > 1 else None,
    )


def _bench_from_record(raw: dict[str, Any]) -> BenchRow | None:
    """A llama-bench JSON object or CSV row (CSV gives every value as a string)."""
    from rigspark_gui.reconcile.bench_file import LlamaBenchRecord

    rec = LlamaBenchRecord.model_validate(raw)
    tok_s = rec.avg_ts
    n_prompt = rec.n_prompt or 0
    n_gen = rec.n_gen or 0
    n_depth = rec.n_depth or 0
    if tok_s is None or (n_prompt <= 0 and n_gen <= 0):
        return None
    fa = rec.flash_attn
    flash = parse_flash(fa.lower()) if fa is not None else None
    backend = rec.backends if rec.backends is not None else rec.backend
    return BenchRow(
        model=rec.model_type or "",
        model_filename=rec.model_filename,
        size_bytes=rec.model_size,
        params=rec.model_n_params,
        backend=backend or "",
        ngl=rec.n_gpu_layers,
        threads=rec.n_threads,
        n_batch=rec.n_batch,
        n_ubatch=rec.n_ubatch,
        type_k=rec.type_k,
        type_v=rec.type_v,
        flash_attn=flash,
        tensor_split=_split(rec.tensor_split),
        test=_test_name(n_prompt, n_gen, n_depth),
        n_prompt=n_prompt,
        n_gen=n_gen,
        n_depth=n_depth,
        tok_s=tok_s,
        tok_s_sd=rec.stddev_ts,
    )


def _records(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    return [x for x in items if isinstance(x, dict) and "avg_ts" in x]


def bench_json(text: str) -> tuple[list[BenchRow], str | None]:
    """llama-bench `-o json` (one array, possibly after log lines) or `-o jsonl`."""
    decoder = json.JSONDecoder()
    starts = [0] if text[:1] == "[" else []
    starts += [m.start() + 1 for m in re.finditer(r"\n\[", text[:MAX_LOG_BYTES])][:8]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        rows = [r for r in map(_bench_from_record, _records(value)) if r is not None]
        if rows:
            return rows, "json"
    rows = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("{") and '"avg_ts"' in s and len(s) <= MAX_LINE_CHARS:
            try:
                value = json.loads(s)
            except (ValueError, RecursionError):
                continue
            rows += [r for r in map(_bench_from_record, _records(value)) if r is not None]
    return rows, ("jsonl" if rows else None)


def bench_csv(lines: list[str]) -> list[BenchRow]:
    """llama-bench `-o csv`: a header naming avg_ts, then one row per result."""
    for i, line in enumerate(lines):
        header = line.startswith("build_commit,") or '"avg_ts"' in line or ",avg_ts," in line
        if header and not line.lstrip().startswith(("{", "[")):
            if line.count(",") < 5 or len(line) > MAX_LINE_CHARS:
                continue
            body = [x for x in lines[i:] if len(x) <= MAX_LINE_CHARS and x.count(",") >= 5]
            reader = csv.DictReader(body)
            rows = [_bench_from_record(dict(r)) for r in reader]
            return [r for r in rows if r is not None]
    return []


def bench_models(rows: Iterable[BenchRow]) -> list[str]:
    """The distinct models of llama-bench rows, in order."""
    return list(dict.fromkeys(r.model for r in rows))
