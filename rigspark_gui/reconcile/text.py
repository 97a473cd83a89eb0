"""The reconciliation as text, as the CLI prints it: the settings read from the log, a
table of buffers per device and kind, the llama-bench speeds, llama.cpp's fit, then the
explanations."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.reconcile.log_records import MIB, FitLog
from rigspark_gui.reconcile.reconciliation import KIND_LABELS, Reconciliation, signed_text


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


def _fit_line(fit: FitLog) -> str:
    """One line on what llama.cpp's fit did: 'llama.cpp's fit: fitted, context 131072 ->
    32768, took 9.25 s'."""
    parts = [fit.status.value if fit.status is not None else "no verdict in the log"]
    if fit.reason:
        parts[0] += f" ({fit.reason})"
    if fit.initial_context is not None and fit.context is not None:
        if fit.context != fit.initial_context:
            parts.append(f"context {fit.initial_context} -> {fit.context}")
        else:
            parts.append(f"context {fit.context}" + (" (set by user)" * fit.context_set_by_user))
    if fit.projected_mib is not None and fit.free_mib is not None:
        memory = "host memory" if fit.host_only else "free device memory"
        parts.append(f"projected {fit.projected_mib:,} of {fit.free_mib:,} MiB {memory}")
    if fit.seconds is not None:
        parts.append(f"took {fit.seconds:.2f} s")
    return "llama.cpp's fit: " + ", ".join(parts)


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
    llama-bench speeds, llama.cpp's fit (when the log shows one), then the explanations."""
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
                diff = signed_text(pred - actual)
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
        total = [
            "total",
            "",
            "",
            f"{sums[0]:,.2f}",
            f"{sums[1]:,.2f}",
            signed_text(sums[0] - sums[1]),
        ]
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
    if log.fit is not None:
        out += ["", _fit_line(log.fit)]
        if r.fit_rows:
            body = [
                [
                    row.what,
                    row.logged,
                    row.predicted,
                    "agrees" if row.agrees else "differs",
                ]
                for row in r.fit_rows
            ]
            out += _table(["fit decision", "llama.cpp", "RigSpark", ""], body, {1, 2})
    if r.explanations:
        out += ["", "Why figures may differ:"]
        out += [f"- {e}" for e in r.explanations]
    return "\n".join(out) + "\n"
