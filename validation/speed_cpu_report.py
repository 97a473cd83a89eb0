"""The CPU and new-GPU sections of docs/validation-speed.md, computed from the data.

CPU rows are judged like every other row: leave one device out (each CPU's rows are
predicted from a fit on all other devices). The rows of this project's own VM
(validation/speed_local.py) are a device like any other, so their held-out figures say
how well the published CPUs predict it; the in-fit figures say what the shipped model
estimates for it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from rigspark_gui.core.speed import CpuIsa, QuantFamily
from validation.speed_fit import (
    Heldout,
    cpu_key,
    cpu_limit,
    fit_decode,
    predict_decode,
    quantile,
)
from validation.speed_report import Calibration
from validation.speed_rows import Row

TARGET_CPU_P90 = 0.40  # published CPU runs held out of the fit
TARGET_LOCAL_MEDIAN = 0.15  # this project's 2-vCPU VMs, before any calibration
LOCAL_DEVICE = "intel xeon ice lake 2 vcpu vm this project s validation machine"
# the same kind of machine (a 2-vCPU x86 KVM guest) on AMD EPYC (Zen 4) hosts: llama-bench
# b11434 rows (validation/speed_local.py bench) and llama-cpp-python 0.3.36 timings
EPYC_DEVICE = "amd epyc 2 vcpu vm this project s validation machine"
LOCAL_DEVICES = (LOCAL_DEVICE, EPYC_DEVICE)


def _errs(held: Sequence[Heldout]) -> list[float]:
    return [abs(1 / h.ratio - 1) for h in held if h.ratio]


def _line(label: str, held: Sequence[Heldout]) -> str:
    e = _errs(held)
    if not e:
        return f"| {label} | 0 | – | – | – |"
    devices = len({h.row.device_key for h in held if h.ratio})
    return (
        f"| {label} | {len(e)} | {devices} | {statistics.median(e):.1%} | {quantile(e, 0.9):.1%} |"
    )


def cpu_decode_held(cal: Calibration, keep: Callable[[Row], bool]) -> list[Heldout]:
    return [h for h in cal.held if h.row.kind == "tg" and h.row.is_cpu and keep(h.row)]


def published(r: Row) -> bool:
    """A run someone published (this project's own VM runs are not)."""
    return str(r.raw.get("source", "")).startswith("http")


def local(r: Row) -> bool:
    """A row of this project's 2-vCPU VMs (either host)."""
    return r.device_key in LOCAL_DEVICES


def cpu_targets(cal: Calibration) -> tuple[float, float, float]:
    """(published held-out p90, the 2-vCPU VMs' held-out median, their in-fit median)."""
    pub = _errs(cpu_decode_held(cal, published))
    local_held = _errs(cpu_decode_held(cal, local))
    local_fit = local_in_fit(cal)
    return (
        quantile(pub, 0.9) if pub else float("nan"),
        statistics.median(local_held) if local_held else float("nan"),
        statistics.median([abs(p / m - 1) for _r, m, p in local_fit])
        if local_fit
        else float("nan"),
    )


def local_in_fit(cal: Calibration) -> list[tuple[Row, float, float]]:
    """(row, measured, predicted by the shipped fit) for the 2-vCPU VMs' decode rows."""
    rows = [r for r in cal.rows if r.kind == "tg" and local(r)]
    if not rows:
        return []
    params = fit_decode(cal.rows)
    return [(r, r.measured, predict_decode(params, r)) for r in rows]


def _per_core_rates(cal: Calibration) -> list[str]:
    """The fitted dequantize-and-dot rate per core, ISA x family, G weights/s."""
    params = fit_decode(cal.rows)
    isas = [i for i in CpuIsa if cpu_key(params, "cpu_rate", i) == f"cpu_rate[{i.value}]"]
    fams = [f for f in QuantFamily]
    out = ["| ISA | " + " | ".join(f.value for f in fams) + " |",
           "|---|" + "---|" * len(fams)]  # fmt: skip
    for isa in isas:
        rate = params[f"cpu_rate[{isa.value}]"]
        cells = []
        for f in fams:
            if f is QuantFamily.FLOAT:
                qf = 1.0
            else:
                qf = params.get(f"cpu_qf[{f.value}]", 1.0)
                qf *= params.get(f"cpu_qfi[{isa.value}:{f.value}]", 1.0)
            fitted = f is QuantFamily.FLOAT or f"cpu_qfi[{isa.value}:{f.value}]" in params
            cells.append(f"{rate * qf / 1e9:.1f}" + ("" if fitted else " *"))
        out.append(f"| {isa.value} | " + " | ".join(cells) + " |")
    return out


def cpu_section(cal: Calibration) -> list[str]:
    pub_p90, local_held, local_fit = cpu_targets(cal)
    met = pub_p90 <= TARGET_CPU_P90
    header = "| CPU decode | held-out rows | devices | median \\|error\\| | p90 \\|error\\| |"
    sep = "|---|---|---|---|---|"
    isas = sorted({h.row.isa.value for h in cal.held if h.row.is_cpu})
    out = [
        "### CPUs (decode)",
        "",
        f"Target: p90 ≤ {TARGET_CPU_P90:.0%} on published CPU runs held out of the fit "
        f"(leave one device out): **{'met' if met else 'not met'}** (p90 {pub_p90:.1%}). "
        "This project's 2-vCPU VMs (Xeon Ice Lake and AMD EPYC Zen 4 KVM guests, llama.cpp "
        "b11434, `validation/speed_local.py`), target median ≤ "
        f"{TARGET_LOCAL_MEDIAN:.0%} before calibration: held out {local_held:.1%}, with their "
        f"rows in the fit (the shipped model) {local_fit:.1%}.",
        "",
        header,
        sep,
        _line("published CPUs", cpu_decode_held(cal, published)),
        _line("this project's VMs (held out)", cpu_decode_held(cal, local)),
        _line(
            "this project's Xeon VM (held out)",
            cpu_decode_held(cal, lambda r: r.device_key == LOCAL_DEVICE),
        ),
        _line(
            "this project's EPYC VM (held out)",
            cpu_decode_held(cal, lambda r: r.device_key == EPYC_DEVICE),
        ),
    ]
    for isa in isas:
        out.append(_line(f"ISA {isa}", cpu_decode_held(cal, lambda r, i=isa: r.isa.value == i)))
    out.append(
        _line(
            "all physical cores",
            cpu_decode_held(cal, lambda r: bool(r.cores and r.cores >= _cores(r))),
        )
    )
    out.append(
        _line(
            "fewer threads than cores",
            cpu_decode_held(cal, lambda r: bool(r.cores and r.cores < _cores(r))),
        )
    )
    out.append(_line("builds before Nov 2024", cpu_decode_held(cal, lambda r: r.old_build)))
    out += [
        "",
        "Dequantize-and-dot rate per core fitted for each ISA and quantization family "
        "(G weights/s; `*`: no row of that ISA and family, the family's shared factor "
        "applies):",
        "",
        *_per_core_rates(cal),
        "",
        "Every CPU decode row held out (predicted by a fit on all other devices), worst "
        "first; *limit*: the term of the held-out fit that sets the time (RAM bandwidth × "
        "efficiency, the cores' per-core stream, or the dequantize-and-dot compute):",
        "",
        *_held_rows(cal),
        "",
        "This project's VMs, each row measured (best of the timed requests) and estimated "
        "by the shipped model:",
        "",
        "| model | test | measured tok/s | estimated | error |",
        "|---|---|---|---|---|",
    ]
    for r, m, p in local_in_fit(cal):
        out.append(f"| {r.raw['model']} | {r.raw['test']} | {m:.1f} | {p:.1f} | {p / m - 1:+.1%} |")
    out += ["", "CPU devices (memory configuration as published; threads used):", ""]
    out += ["| device | ISA | bandwidth | memory | threads / cores | build | source |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    seen: set[str] = set()
    for r in cal.rows:
        if not r.is_cpu or r.device_key in seen:
            continue
        seen.add(r.device_key)
        threads = sorted({x.threads or 0 for x in cal.rows if x.device_key == r.device_key})
        kind = "measured" if r.measured_bw else "spec"
        out.append(
            f"| {r.raw['device']} | {r.isa.value} | {r.bandwidth_gbps:g} GB/s ({kind}) | "
            f"{r.raw.get('memory') or r.raw.get('bandwidth_source') or '–'} | "
            f"{', '.join(map(str, threads))} / {r.raw.get('cpu_cores') or '–'} | "
            f"{r.raw.get('build') or r.raw.get('date') or '–'}"
            f"{' (old)' if r.old_build else ''} | {r.raw['source']} |"
        )
    return [*out, ""]


def _held_rows(cal: Calibration) -> list[str]:
    """Every held-out CPU decode row with what limits its prediction."""
    held = cpu_decode_held(cal, lambda r: True)
    limits: dict[str, dict[int, str]] = {}
    for dev in {h.row.device_key for h in held}:
        train = [r for r in cal.rows if r.device_key != dev]
        params = fit_decode(train)
        limits[dev] = {id(h.row): cpu_limit(params, h.row) for h in held if h.row.device_key == dev}
    out = ["| error | device | model | threads / cores | build | measured | predicted | limit |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for h in sorted(held, key=lambda h: -abs(1 / h.ratio - 1) if h.ratio else 0.0):
        r = h.row
        if not h.predicted:
            continue
        out.append(
            f"| {h.predicted / r.measured - 1:+.0%} | {r.raw['device']} | {r.raw['model']} | "
            f"{r.threads or '–'} / {r.raw.get('cpu_cores') or '–'} | "
            f"{r.raw.get('build') or r.raw.get('date') or '–'}{' (old)' if r.old_build else ''} "
            f"| {r.measured:.2f} | {h.predicted:.2f} | {limits[r.device_key][id(r)]} |"
        )
    return out


def _cores(r: Row) -> int:
    return int(r.raw.get("cpu_cores") or r.cores or 0)
