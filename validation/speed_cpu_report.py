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
from validation.speed_fit import Heldout, Row, cpu_key, fit_decode, predict_decode, quantile
from validation.speed_report import Calibration

TARGET_CPU_P90 = 0.40  # published CPU runs held out of the fit
TARGET_LOCAL_MEDIAN = 0.15  # this project's 2-vCPU VM, before any calibration
LOCAL_DEVICE = "intel xeon ice lake 2 vcpu vm this project s validation machine"


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
    return r.device_key == LOCAL_DEVICE


def cpu_targets(cal: Calibration) -> tuple[float, float, float]:
    """(published held-out p90, this VM held-out median, this VM in-fit median)."""
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
    """(row, measured, predicted by the shipped fit) for this VM's decode rows."""
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
        f"This project's 2-vCPU VM (Xeon Ice Lake, llama.cpp b11434, "
        "`validation/speed_local.py`), target median ≤ "
        f"{TARGET_LOCAL_MEDIAN:.0%} before calibration: held out {local_held:.1%}, with its "
        f"rows in the fit (the shipped model) {local_fit:.1%}.",
        "",
        header,
        sep,
        _line("published CPUs", cpu_decode_held(cal, published)),
        _line("this project's Xeon VM (held out)", cpu_decode_held(cal, local)),
        _line(
            "this project's earlier EPYC VM (held out)",
            cpu_decode_held(cal, lambda r: not published(r) and not local(r)),
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
        "This project's VM, each row measured (best of the timed requests) and estimated "
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


def _cores(r: Row) -> int:
    return int(r.raw.get("cpu_cores") or r.cores or 0)
