"""Fit the speed model on the cited rows of data/perf.json and judge it on rows it was
not fitted to (leave one device out).

The engine evaluates the model one placement at a time (rigspark_gui.core.speed); this
module evaluates the same formula over every row at once with numpy so that a fit, and
a leave-one-device-out pass of fits, takes seconds. tests/validation checks that both
give the same number for every row.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rigspark_gui.core.speed import (
    Band,
    CpuIsa,
    DecodeParams,
    DeviceClass,
    PrefillParams,
    QuantFamily,
    SpeedModel,
)
from rigspark_gui.core.speed.model import ISA_FALLBACK
from validation.speed_rows import ROOT, Row

MODEL_PATH = ROOT / "data" / "speed_model.json"
UBATCH = 512


def cpu_key(p: dict[str, float] | set[str], prefix: str, isa: CpuIsa) -> str | None:
    """The parameter name of a per-ISA figure, falling back along ISA_FALLBACK."""
    at: CpuIsa | None = isa
    while at is not None:
        name = f"{prefix}[{at.value}]"
        if name in p:
            return name
        at = ISA_FALLBACK.get(at)
    return None


# One per-core memory stream for every ISA: a core streams what its outstanding line fills
# over the memory latency allow (8-17 GB/s a core in the rows at few threads, whatever the
# type: Threadripper 5975WX 8, i3-1315U 11, 7950X 12-16, M2 Max 12-17), which the vector ISA does not change; per ISA it
# rested on one or two devices each and sat at its prior for most.
CORE_BW_SHARED = True
# No decode factor for builds before Nov 2024: the only CPU with rows of both eras is the
# M2 Max, so such a factor was that device's, and it pulled the other old rows (the
# 7950X's, whose 2- and 4-thread decode streams memory at ~15 GB/s a core whatever the
# type: no kernel change moves that) far below their speed when they were held out
# (docs/validation-speed.md, CPU speed without calibration). Prompt rows keep theirs:
# repacking changed the GEMM kernels.
DECODE_ERA = False


def core_bw_name(isa: CpuIsa) -> str:
    return "cpu_core_bw[all]" if CORE_BW_SHARED else f"cpu_core_bw[{isa.value}]"


def core_bw_key(p: dict[str, float] | set[str], isa: CpuIsa) -> str | None:
    if CORE_BW_SHARED:
        return "cpu_core_bw[all]" if "cpu_core_bw[all]" in p else None
    return cpu_key(p, "cpu_core_bw", isa)


def isa_family(r: Row) -> str:
    return f"{r.isa.value}:{r.family.value}"


# ---- the model over all rows at once ------------------------------------------------

# Starting points and priors (log-space ridge keeps unidentified parameters here).
# The CPU backend's fixed cost per layer per token: a few thread barriers per op, about
# 20 us a layer. Held, not fitted: too few published CPU runs vary the layer count to
# tell it from bandwidth, and a free fit traded it for bandwidth (0.8 ms a layer).
CPU_LAYER_SECONDS = 2e-5

_PRIOR: dict[str, float] = {
    "eff": 0.7, "bf": 1.0, "qf": 0.9, "qb": 1.0, "ls": 2e-5, "hop": 2e-4,
    "cpu_eff": 0.8, "cpu_eff_meas": 0.95, "cpu_core_bw": 1.5e10, "cpu_rate": 4e9,
    "cpu_qf": 1.0, "cpu_qfi": 1.0, "cpu_era": 1.0, "cpu_vcpu": 1.0, "cpu_pp_vcpu": 1.0,
    "pp_eff": 0.4, "pp_qf": 0.8, "cpu_flops": 5e10, "cpu_pp_era": 1.0, "cpu_ppqf": 0.8,
}  # fmt: skip
_RIDGE = 0.05
# A share of RAM bandwidth is a property of the memory system, not of a benchmark: held
# near its prior unless many rows disagree (a free fit on the few memory-bound CPU rows
# let it pass 1.0 and turned every CPU row compute-bound).
_RIDGE_OF = {"cpu_eff": 1.0, "cpu_eff_meas": 1.0}


def _decode_names(rows: Sequence[Row]) -> list[str]:
    names: list[str] = []
    for r in rows:
        if r.kind != "tg":
            continue
        if r.is_cpu:
            names += [
                "cpu_eff_meas" if r.measured_bw else "cpu_eff",
                core_bw_name(r.isa),
                f"cpu_rate[{r.isa.value}]",
            ]
            if r.family is not QuantFamily.FLOAT:
                names += [f"cpu_qf[{r.family.value}]", f"cpu_qfi[{isa_family(r)}]"]
            if r.old_build and DECODE_ERA:
                names.append("cpu_era")
            if r.fitted_vcpu:
                names.append("cpu_vcpu")
        else:
            names += [f"eff[{r.cls.value}]", f"ls[{r.backend}]"]
            if r.backend_factor_key:
                names.append(f"bf[{r.backend_factor_key}]")
            if r.family is not QuantFamily.FLOAT:
                names += [f"qf[{r.family.value}]", f"qb[{r.backend}:{r.family.value}]"]
            if r.n_devices > 1:
                names.append("hop")
    return list(dict.fromkeys(names))


def _prefill_names(rows: Sequence[Row]) -> list[str]:
    names: list[str] = []
    for r in rows:
        if r.kind != "pp":
            continue
        if r.is_cpu:
            names.append(f"cpu_flops[{r.isa.value}]")
            if r.old_build:
                names.append("cpu_pp_era")
            if r.fitted_vcpu:
                names.append("cpu_pp_vcpu")
        else:
            names.append(f"pp_eff[{r.cls.value}]")
        if r.family is not QuantFamily.FLOAT:
            names.append(f"cpu_ppqf[{isa_family(r)}]" if r.is_cpu else f"pp_qf[{r.family.value}]")
    return list(dict.fromkeys(names))


def _get(p: dict[str, float], name: str, default: float) -> float:
    return p.get(name, default)


def cpu_terms(p: dict[str, float], r: Row) -> tuple[float, float, float]:
    """A CPU decode row's three times per token (s): RAM bandwidth, the cores' stream and
    the dequantize-and-dot compute (0 where the fit has no such figure); the token takes
    the largest."""
    read = r.weight_read_bytes + r.kv_read_bytes
    eff = p.get("cpu_eff_meas") if r.measured_bw else None
    ram = read / (r.bandwidth_gbps * 1e9 * (eff or p["cpu_eff"]))
    bw_key = core_bw_key(p, r.isa)
    per_core = _get(p, "cpu_vcpu", 1.0) if r.fitted_vcpu else r.core_share
    stream = read / (r.cores * p[bw_key] * per_core) if r.cores and bw_key else 0.0
    rate_key = cpu_key(p, "cpu_rate", r.isa)
    compute = 0.0
    if rate_key and r.cores:
        qf = 1.0 if r.family is QuantFamily.FLOAT else _get(p, f"cpu_qf[{r.family.value}]", 1.0)
        qf *= _cpu_isa_adjust(p, r)
        if r.old_build and DECODE_ERA:
            qf *= _get(p, "cpu_era", 1.0)
        compute = r.elements / (r.cores * p[rate_key] * qf * per_core)
    return ram, stream, compute


def cpu_limit(p: dict[str, float], r: Row) -> str:
    """Which term sets a CPU row's predicted time: "RAM", "per-core stream" or "compute"."""
    ram, stream, compute = cpu_terms(p, r)
    return max((ram, "RAM"), (stream, "per-core stream"), (compute, "compute"))[1]


def predict_decode(p: dict[str, float], r: Row) -> float:
    """Tokens per second of a decode row (the engine's formula, DESIGN §4)."""
    read = r.weight_read_bytes + r.kv_read_bytes
    if r.is_cpu:
        return 1.0 / (max(cpu_terms(p, r)) + r.n_layer * CPU_LAYER_SECONDS)
    eff = p[f"eff[{r.cls.value}]"]
    if r.backend_factor_key:
        eff *= _get(p, f"bf[{r.backend_factor_key}]", 1.0)
    if r.family is not QuantFamily.FLOAT:
        eff *= _get(p, f"qf[{r.family.value}]", 1.0)
        eff *= _get(p, f"qb[{r.backend}:{r.family.value}]", 1.0)
    t = read / (r.bandwidth_gbps * 1e9 * min(eff, 1.0))
    t += r.n_layer * _get(p, f"ls[{r.backend}]", 0.0)
    t += (r.n_devices - 1) * _get(p, "hop", 2e-4)
    return 1.0 / t


def _cpu_isa_adjust(p: dict[str, float], r: Row) -> float:
    at: CpuIsa | None = r.isa
    while at is not None:
        v = p.get(f"cpu_qfi[{at.value}:{r.family.value}]")
        if v is not None:
            return v
        at = ISA_FALLBACK.get(at)
    return 1.0


def _cpu_pp_quant(p: dict[str, float], r: Row) -> float:
    """A family's prompt-rate factor on the row's ISA (nearest fitted ISA's; the GPUs'
    factor of the family where no CPU of the chain has one, as the engine does)."""
    at: CpuIsa | None = r.isa
    while at is not None:
        v = p.get(f"cpu_ppqf[{at.value}:{r.family.value}]")
        if v is not None:
            return v
        at = ISA_FALLBACK.get(at)
    return _get(p, f"pp_qf[{r.family.value}]", 1.0)


def predict_prefill(p: dict[str, float], d: dict[str, float], r: Row) -> float | None:
    if r.family is QuantFamily.FLOAT:
        qf = 1.0
    elif r.is_cpu:
        qf = _cpu_pp_quant(p, r)
    else:
        qf = _get(p, f"pp_qf[{r.family.value}]", 1.0)
    if r.is_cpu:
        key = cpu_key(p, "cpu_flops", r.isa)
        if not key or not r.cores:
            return None
        flops = p[key] * r.cores * (_get(p, "cpu_pp_era", 1.0) if r.old_build else 1.0)
        flops *= _get(p, "cpu_pp_vcpu", 1.0) if r.fitted_vcpu else r.core_share
        ls = CPU_LAYER_SECONDS
    else:
        eff = p.get(f"pp_eff[{r.cls.value}]")
        if r.flops is None or eff is None:
            return None
        flops = r.flops * eff
        ls = _get(d, f"ls[{r.backend}]", 0.0)
    t = (2.0 * r.active_params * r.tokens + r.attn_flops) / (flops * qf)
    t += math.ceil(r.tokens / UBATCH) * r.n_layer * ls
    return r.tokens / t


class _Design:
    """The rows as arrays: each factor of the formula gathered from the log-parameter
    vector by index (the last slot holds log 1 = 0 for factors a row does not use)."""

    def __init__(self, names: list[str], rows: Sequence[Row]) -> None:
        self.names = names
        idx = {n: i for i, n in enumerate(names)}
        none = len(names)

        def col(fn: Any) -> np.ndarray:
            return np.array([idx.get(fn(r), none) if fn(r) else none for r in rows])

        def val(fn: Any) -> np.ndarray:
            return np.array([float(fn(r)) for r in rows])

        self.rows = rows
        self.cpu = np.array([r.is_cpu for r in rows])
        self.read = val(lambda r: r.weight_read_bytes + r.kv_read_bytes)
        self.bw = val(lambda r: r.bandwidth_gbps * 1e9)
        self.layers = val(lambda r: r.n_layer)
        self.hops = val(lambda r: r.n_devices - 1)
        self.cores = val(lambda r: (r.cores or 0) * r.core_share)
        self.elements = val(lambda r: r.elements)
        self.tokens = val(lambda r: r.tokens)
        self.work = val(lambda r: 2.0 * r.active_params * r.tokens + r.attn_flops)
        self.flops = val(lambda r: r.flops or 1.0)
        self.ubatches = val(lambda r: math.ceil(r.tokens / UBATCH))
        fam = lambda r: None if r.family is QuantFamily.FLOAT else r.family.value  # noqa: E731
        self.i_eff = col(lambda r: f"eff[{r.cls.value}]")
        self.i_bf = col(lambda r: r.backend_factor_key and f"bf[{r.backend_factor_key}]")
        self.i_qf = col(lambda r: fam(r) and f"qf[{fam(r)}]")
        self.i_qb = col(lambda r: fam(r) and f"qb[{r.backend}:{fam(r)}]")
        self.i_ls = col(lambda r: f"ls[{r.backend}]")
        self.i_hop = col(lambda r: "hop")
        self.i_ceff = col(lambda r: "cpu_eff_meas" if r.measured_bw else "cpu_eff")
        self.i_cbw = col(lambda r: core_bw_name(r.isa))
        self.i_rate = col(lambda r: f"cpu_rate[{r.isa.value}]")
        self.i_cqf = col(lambda r: fam(r) and f"cpu_qf[{fam(r)}]")
        self.i_cqfi = col(lambda r: r.is_cpu and fam(r) and f"cpu_qfi[{isa_family(r)}]")
        self.i_era = col(lambda r: r.is_cpu and r.old_build and DECODE_ERA and "cpu_era")
        self.i_ppera = col(lambda r: r.is_cpu and r.old_build and "cpu_pp_era")
        self.i_vcpu = col(lambda r: r.is_cpu and r.fitted_vcpu and "cpu_vcpu")
        self.i_ppvcpu = col(lambda r: r.is_cpu and r.fitted_vcpu and "cpu_pp_vcpu")
        self.i_ppeff = col(lambda r: f"pp_eff[{r.cls.value}]")
        self.i_ppqf = col(
            lambda r: fam(r) and (f"cpu_ppqf[{isa_family(r)}]" if r.is_cpu else f"pp_qf[{fam(r)}]")
        )
        self.i_cflops = col(lambda r: f"cpu_flops[{r.isa.value}]")
        self.has_rate = self.i_rate < none
        self.has_cbw = (self.i_cbw < none) & (self.cores > 0)

    def decode(self, x: np.ndarray) -> np.ndarray:
        lx = np.append(x, 0.0)
        e = np.exp
        eff = e(lx[self.i_eff] + lx[self.i_bf] + lx[self.i_qf] + lx[self.i_qb])
        t_gpu = self.read / (self.bw * np.minimum(eff, 1.0))
        ls = np.where(self.i_ls < len(x), e(lx[self.i_ls]), 0.0)
        hop = np.where(self.i_hop < len(x), e(lx[self.i_hop]), _PRIOR["hop"])
        t_gpu = t_gpu + self.layers * ls + self.hops * hop
        bw = self.bw * e(lx[self.i_ceff])
        per_core = self.cores * e(lx[self.i_vcpu])
        bw = np.where(self.has_cbw, np.minimum(bw, per_core * e(lx[self.i_cbw])), bw)
        t_cpu = self.read / bw
        rate = per_core * e(lx[self.i_rate] + lx[self.i_cqf] + lx[self.i_cqfi] + lx[self.i_era])
        t_comp = np.where(
            self.has_rate & (self.cores > 0), self.elements / np.maximum(rate, 1e-9), 0.0
        )
        t_cpu = np.maximum(t_cpu, t_comp) + self.layers * CPU_LAYER_SECONDS
        return np.log(1.0 / np.where(self.cpu, t_cpu, t_gpu))

    def prefill(self, x: np.ndarray, ls_of: np.ndarray) -> np.ndarray:
        lx = np.append(x, 0.0)
        e = np.exp
        flops = np.where(
            self.cpu,
            self.cores * e(lx[self.i_cflops] + lx[self.i_ppera] + lx[self.i_ppvcpu]),
            self.flops * e(lx[self.i_ppeff]),
        ) * e(lx[self.i_ppqf])
        t = self.work / flops + self.ubatches * self.layers * ls_of
        return np.log(self.tokens / t)


def _fit_design(
    names: list[str], rows: Sequence[Row], logpred: Any, iters: int = 60
) -> dict[str, float]:
    """Levenberg-Marquardt on log(measured / predicted), parameters in log space, with a
    light ridge toward the priors so a parameter few rows touch stays plausible."""
    x = np.log([_PRIOR[n.split("[")[0]] for n in names])
    prior = x.copy()
    ridge = np.array([_RIDGE_OF.get(n.split("[")[0], _RIDGE) for n in names])
    meas = np.log([r.measured for r in rows])
    per_device = Counter(r.device_key for r in rows)
    weight = np.sqrt([1.0 / math.sqrt(per_device[r.device_key]) for r in rows])

    def residuals(v: np.ndarray) -> np.ndarray:
        return np.concatenate([weight * (logpred(v) - meas), ridge * (v - prior)])

    lam = 1e-2
    r0 = residuals(x)
    cost = float(r0 @ r0)
    for _ in range(iters):
        jac = np.empty((r0.size, x.size))
        for j in range(x.size):
            step = np.zeros_like(x)
            step[j] = 1e-6
            jac[:, j] = (residuals(x + step) - r0) / 1e-6
        jtj = jac.T @ jac
        g = jac.T @ r0
        improved = False
        for _ in range(10):
            dx = np.linalg.solve(jtj + lam * np.diag(np.diag(jtj) + 1e-9), -g)
            r1 = residuals(x + dx)
            c1 = float(r1 @ r1)
            if c1 < cost:
                x, r0, lam, improved = x + dx, r1, lam / 3, True
                break
            lam *= 4
        new_cost = float(r0 @ r0)
        if not improved or cost - new_cost < 1e-12 * max(cost, 1.0):
            break
        cost = new_cost
    return dict(zip(names, (float(v) for v in np.exp(x)), strict=True))


def fit_decode(rows: Sequence[Row]) -> dict[str, float]:
    """GPU and CPU rows share no parameter: each block is fitted on its own, so a change
    to the CPU rows cannot move the GPU parameters through the solver's common steps."""
    tg = [r for r in rows if r.kind == "tg"]
    out: dict[str, float] = {}
    for part in ([r for r in tg if not r.is_cpu], [r for r in tg if r.is_cpu]):
        if part:
            names = _decode_names(part)
            out.update(_fit_design(names, part, _Design(names, part).decode))
    return out


def _prefill_rows(rows: Sequence[Row]) -> list[Row]:
    return [r for r in rows if r.kind == "pp" and (r.flops is not None or (r.is_cpu and r.cores))]


def fit_prefill(rows: Sequence[Row], decode: dict[str, float]) -> dict[str, float]:
    pp = _prefill_rows(rows)
    names = _prefill_names(pp)
    design = _Design(names, pp)
    ls_of = np.array(
        [CPU_LAYER_SECONDS if r.is_cpu else decode.get(f"ls[{r.backend}]", 0.0) for r in pp]
    )
    return _fit_design(names, pp, lambda x: design.prefill(x, ls_of))


# ---- judging on held-out rows --------------------------------------------------------


@dataclass
class Heldout:
    row: Row
    predicted: float | None

    @property
    def ratio(self) -> float | None:
        return self.row.measured / self.predicted if self.predicted else None


def leave_one_device_out(rows: Sequence[Row]) -> list[Heldout]:
    """Predict every device's rows from a fit on all other devices."""
    out: list[Heldout] = []
    devices = sorted({r.device_key for r in rows})
    for dev in devices:
        train = [r for r in rows if r.device_key != dev]
        test = [r for r in rows if r.device_key == dev]
        d = fit_decode(train)
        pp = fit_prefill(train, d)
        for r in test:
            if r.kind == "tg":
                ok = _covered(d, r)
                out.append(Heldout(r, predict_decode(d, r) if ok else None))
            else:
                out.append(Heldout(r, predict_prefill(pp, d, r) if _covered_pp(pp, r) else None))
    return out


def _covered(p: dict[str, float], r: Row) -> bool:
    """Whether the training rows calibrated what this row needs (class, backend)."""
    if r.is_cpu:
        return ("cpu_eff" in p or "cpu_eff_meas" in p) and cpu_key(p, "cpu_rate", r.isa) is not None
    if f"eff[{r.cls.value}]" not in p:
        return False
    return r.backend_factor_key is None or f"bf[{r.backend_factor_key}]" in p


def _covered_pp(p: dict[str, float], r: Row) -> bool:
    if r.is_cpu:
        return cpu_key(p, "cpu_flops", r.isa) is not None
    return r.flops is not None and f"pp_eff[{r.cls.value}]" in p


def quantile(values: Sequence[float], q: float) -> float:
    v = sorted(values)
    if not v:
        return float("nan")
    k = (len(v) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


@dataclass
class Stats:
    n: int
    median_abs: float
    p90_abs: float
    inside: float
    widest: float


# The band spans the 8th to 92nd percentile of held-out measured / predicted: 84 % of
# held-out rows by construction, so that "truth inside the band" holds at >= 80 % on
# devices the band was not taken from.
BAND_QUANTILES = (0.08, 0.92)


def band_of(ratios: Sequence[float]) -> Band:
    lo, hi = BAND_QUANTILES
    return Band(
        low=min(max(quantile(ratios, lo), 0.01), 1.0),
        high=max(quantile(ratios, hi), 1.0),
        rows=len(ratios),
    )


def judge(held: Sequence[Heldout], bands: dict[str, Band]) -> Stats:
    """Errors of the point, and whether the truth fell inside the band the engine would
    show; each row's band is taken from the held-out residuals of the *other* devices."""
    errs: list[float] = []
    inside = 0
    widest = 0.0
    for h in held:
        ratio = h.ratio
        if ratio is None:
            continue
        errs.append(abs(1 / ratio - 1))  # |predicted / measured - 1|
        b = bands[h.row.device_key]
        inside += b.low <= ratio <= b.high
        widest = max(widest, 1 - b.low, b.high - 1)
    n = len(errs)
    return Stats(
        n=n,
        median_abs=statistics.median(errs) if errs else float("nan"),
        p90_abs=quantile(errs, 0.9),
        inside=inside / n if n else float("nan"),
        widest=widest,
    )


def bands_excluding(held: Sequence[Heldout], kind: str, cpu: bool) -> dict[str, Band]:
    """For each device: the band from every other device's held-out ratios."""
    pool = [h for h in held if h.ratio is not None and h.row.kind == kind and h.row.is_cpu == cpu]
    out: dict[str, Band] = {}
    for dev in {h.row.device_key for h in held}:
        ratios = [h.ratio for h in pool if h.row.device_key != dev]
        if len(ratios) < 5:  # too few other devices of the kind: the GPUs' decode band
            ratios = [
                h.ratio for h in held
                if h.ratio is not None and h.row.kind == "tg" and not h.row.is_cpu
                and h.row.device_key != dev
            ]  # fmt: skip
        out[dev] = band_of([r for r in ratios if r is not None])
    return out


# ---- the engine's parameter file ----------------------------------------------------


def to_speed_model(
    decode: dict[str, float],
    prefill: dict[str, float],
    held: Sequence[Heldout],
    n_rows: int,
    n_devices: int,
) -> SpeedModel:
    def pick(p: dict[str, float], prefix: str) -> dict[str, float]:
        return {k[len(prefix) + 1 : -1]: v for k, v in p.items() if k.startswith(prefix + "[")}

    def ratios(kind: str, cpu: bool) -> list[float]:
        return [
            h.ratio
            for h in held
            if h.ratio is not None and h.row.kind == kind and h.row.is_cpu == cpu
        ]

    gpu_tg, cpu_tg = ratios("tg", False), ratios("tg", True)
    pp = ratios("pp", False) + ratios("pp", True)
    qf = {QuantFamily(k): v for k, v in pick(decode, "qf").items()}
    qf.setdefault(QuantFamily.FLOAT, 1.0)
    cqf = {QuantFamily(k): v for k, v in pick(decode, "cpu_qf").items()}
    cqf.setdefault(QuantFamily.FLOAT, 1.0)
    pqf = {QuantFamily(k): v for k, v in pick(prefill, "pp_qf").items()}
    pqf.setdefault(QuantFamily.FLOAT, 1.0)
    d = DecodeParams(
        backend_quant_factor=pick(decode, "qb"),
        efficiency={DeviceClass(k): v for k, v in pick(decode, "eff").items()},
        backend_factor=pick(decode, "bf"),
        quant_factor=qf,
        layer_seconds={**pick(decode, "ls"), "cpu": CPU_LAYER_SECONDS},
        hop_seconds=decode.get("hop", _PRIOR["hop"]),
        cpu_efficiency=min(decode.get("cpu_eff", _PRIOR["cpu_eff"]), 1.5),
        cpu_core_bandwidth=_core_bandwidth(decode),
        cpu_core_rate={CpuIsa(k): v for k, v in pick(decode, "cpu_rate").items()},
        cpu_quant_factor=cqf,
        cpu_isa_quant_factor=pick(decode, "cpu_qfi"),
        cpu_measured_efficiency=decode.get("cpu_eff_meas"),
        cpu_vcpu_factor=decode.get("cpu_vcpu"),
        band=band_of(gpu_tg),
        cpu_band=band_of(cpu_tg) if cpu_tg else band_of(gpu_tg),
    )
    p = PrefillParams(
        efficiency={DeviceClass(k): v for k, v in pick(prefill, "pp_eff").items()},
        quant_factor=pqf,
        cpu_core_flops={CpuIsa(k): v for k, v in pick(prefill, "cpu_flops").items()},
        cpu_quant_factor=pick(prefill, "cpu_ppqf"),
        cpu_vcpu_factor=prefill.get("cpu_pp_vcpu"),
        band=band_of(pp),
    )
    return SpeedModel(
        decode=d,
        prefill=p,
        basis=f"calibrated on {n_rows} published llama-bench rows over {n_devices} devices "
        "(data/perf.json)",
        source="data/speed_model.json",
    )


def _core_bandwidth(decode: dict[str, float]) -> dict[CpuIsa, float]:
    """The per-core stream of each ISA (one shared figure: the same for all)."""
    shared = decode.get("cpu_core_bw[all]")
    if shared is not None:
        return {isa: shared for isa in CpuIsa}
    return {
        CpuIsa(k[len("cpu_core_bw[") : -1]): v
        for k, v in decode.items()
        if k.startswith("cpu_core_bw[")
    }
