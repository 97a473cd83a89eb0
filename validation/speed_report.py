"""The held-out error tables of docs/validation-speed.md, computed from the data."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rigspark_gui.core.speed import SpeedModel
from validation.speed_fit import (
    Heldout,
    Stats,
    bands_excluding,
    fit_decode,
    fit_prefill,
    judge,
    leave_one_device_out,
    to_speed_model,
)
from validation.speed_rows import Row, load_inputs

# Targets on held-out decode rows (issue: speed you can bet on).
TARGET_MEDIAN = 0.10
TARGET_P90 = 0.25
TARGET_INSIDE = 0.80
TARGET_WIDTH = 0.25


@dataclass
class Calibration:
    rows: list[Row]
    skipped: list[str]
    held: list[Heldout]
    model: SpeedModel
    bands: dict[tuple[str, bool], dict[str, object]]


def calibrate() -> Calibration:
    rows, skipped = load_inputs()
    decode = fit_decode(rows)
    prefill = fit_prefill(rows, decode)
    held = leave_one_device_out(rows)
    devices = len({r.device_key for r in rows})
    model = to_speed_model(decode, prefill, held, len(rows), devices)
    bands = {
        (kind, cpu): bands_excluding(held, kind, cpu)  # type: ignore[misc]
        for kind in ("tg", "pp")
        for cpu in (False, True)
    }
    return Calibration(rows, skipped, held, model, bands)  # type: ignore[arg-type]


def stats_where(cal: Calibration, kind: str, keep: Callable[[Row], bool]) -> Stats | None:
    rows = [h for h in cal.held if h.row.kind == kind and keep(h.row)]
    if not rows:
        return None
    bands = {}
    for h in rows:
        bands[h.row.device_key] = cal.bands[(kind, h.row.is_cpu)][h.row.device_key]
    return judge(rows, bands)  # type: ignore[arg-type]


def _line(label: str, st: Stats | None, devices: int) -> str:
    if st is None or st.n == 0:
        return f"| {label} | 0 | – | – | – | – | – |"
    return (
        f"| {label} | {st.n} | {devices} | {st.median_abs:.1%} | {st.p90_abs:.1%} | "
        f"{st.inside:.0%} | ±{st.widest:.0%} |"
    )


def _devices(cal: Calibration, kind: str, keep: Callable[[Row], bool]) -> int:
    return len({h.row.device_key for h in cal.held if h.row.kind == kind and keep(h.row)})


HEADER = (
    "| rows | held-out rows | devices | median \\|error\\| | p90 \\|error\\| | "
    "truth inside band | band half-width (max) |\n|---|---|---|---|---|---|---|"
)


def table(cal: Calibration, kind: str, groups: Sequence[tuple[str, Callable[[Row], bool]]]) -> str:
    lines = [HEADER]
    for label, keep in groups:
        lines.append(_line(label, stats_where(cal, kind, keep), _devices(cal, kind, keep)))
    return "\n".join(lines)


def groups(cal: Calibration, kind: str) -> dict[str, list[tuple[str, Callable[[Row], bool]]]]:
    backends = sorted({h.row.backend for h in cal.held if h.row.kind == kind})
    classes = sorted({h.row.cls.value for h in cal.held if h.row.kind == kind})
    return {
        "all": [("all", lambda r: True), ("GPUs and SoCs", lambda r: not r.is_cpu),
                ("CPUs", lambda r: r.is_cpu)],
        "backend": [(b, lambda r, b=b: r.backend == b) for b in backends],  # type: ignore[misc]
        "class": [(c, lambda r, c=c: r.cls.value == c) for c in classes],  # type: ignore[misc]
        "moe": [("dense", lambda r: not r.moe), ("MoE", lambda r: r.moe),
                ("one device", lambda r: r.n_devices == 1),
                ("2-8 GPUs", lambda r: r.n_devices > 1)],
    }  # fmt: skip


def worst(cal: Calibration, kind: str, n: int = 10) -> list[tuple[float, Heldout]]:
    rated = [
        (abs(1 / h.ratio - 1), h) for h in cal.held if h.row.kind == kind and h.ratio is not None
    ]
    rated.sort(key=lambda x: -x[0])
    return rated[:n]


def why(h: Heldout) -> str:
    r = h.row
    bits = []
    if r.kind == "tg" and r.tokens >= 2048:
        bits.append(f"long generation (mean depth {r.tokens // 2}): attention reads grow")
    if r.n_devices > 1:
        bits.append(f"{r.n_devices} GPUs")
    if r.moe:
        bits.append("MoE: active share of the file approximated from parameter counts")
    if r.is_cpu:
        bits.append(f"{r.cores} threads, {r.isa.value}")
    assert h.ratio is not None
    bits.append("faster than predicted" if h.ratio > 1 else "slower than predicted")
    note = str(r.raw.get("note") or "")
    if note:
        bits.append("source note: " + note[:140])
    return "; ".join(bits)
