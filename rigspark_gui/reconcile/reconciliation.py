"""A reconciliation's result: a buffer row per device and kind, a llama-bench speed row,
a row per decision of llama.cpp's fit, the whole comparison; llama.cpp's rounding that
decides a match; and the helpers that write its MiB figures and read its device names."""

from __future__ import annotations

from dataclasses import dataclass

from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.reconcile.log_records import MIB, BufferKind, LlamaLog

# llama.cpp prints MiB with two decimals: each printed buffer is within half of
# 0.01 MiB of its size.
ROUNDING_BYTES = (MIB + 199) // 200
# A figure within half a MiB of llama.cpp's is "close": the CPU compute buffer is a
# fitted estimate and lands there (docs/validation.md).
CLOSE_BYTES = MIB // 2
KIND_LABELS = {
    BufferKind.MODEL: "weights",
    BufferKind.REPACK: "repack",
    BufferKind.KV: "KV",
    BufferKind.COMPUTE: "compute",
    BufferKind.OUTPUT: "output",
    BufferKind.OTHER: "other",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class BufferRow:
    """One device's buffers of one kind: what RigSpark predicts and what llama.cpp made."""

    # cpu, gpu:N, or the buffer's name for an unknown backend
    device: str
    kind: BufferKind
    # llama.cpp's names of the buffers summed
    buffers: tuple[str, ...]
    # None: RigSpark does not model it
    predicted_bytes: int | None
    # None: the log shows no such buffer
    actual_bytes: int | None
    actual_mib: float | None = None

    @property
    def difference_bytes(self) -> int | None:
        """Predicted minus actual."""
        if self.predicted_bytes is None or self.actual_bytes is None:
            return None
        return self.predicted_bytes - self.actual_bytes

    @property
    def within_rounding(self) -> bool:
        diff = self.difference_bytes
        return diff is not None and abs(diff) <= ROUNDING_BYTES * max(len(self.buffers), 1)

    @property
    def close(self) -> bool:
        """Within half a MiB (or llama.cpp's rounding, for many buffers)."""
        diff = self.difference_bytes
        return diff is not None and (self.within_rounding or abs(diff) <= CLOSE_BYTES)

    @property
    def status(self) -> str:
        if self.predicted_bytes is None:
            return "not modelled"
        if self.actual_bytes is None:
            return "not in log"
        return "match" if self.within_rounding else "close" if self.close else "differs"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeedRow:
    """One llama-bench test: measured against RigSpark's estimate for the same run."""

    model: str
    test: str
    backend: str
    ngl: int | None
    measured_tok_s: float
    measured_sd: float | None = None
    predicted_tok_s: float | None = None
    predicted_low: float | None = None
    predicted_high: float | None = None
    basis: str = ""

    @property
    def ratio(self) -> float | None:
        """Predicted over measured."""
        if self.predicted_tok_s is None or self.measured_tok_s <= 0:
            return None
        return self.predicted_tok_s / self.measured_tok_s


@dataclass(frozen=True, slots=True, kw_only=True)
class FitRow:
    """One decision of llama.cpp's `--fit`: what the log shows against RigSpark's
    FitOutcome for the same load."""

    # 'status', 'context', 'initial context', 'layers on gpu:0', 'projected MiB on gpu:0'
    what: str
    logged: str
    predicted: str
    agrees: bool
    # MiB rows: predicted (floored, as llama.cpp prints) minus logged
    difference_mib: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reconciliation:
    model: str
    quant: str
    # the log's settings, as planned
    settings: PlanSettings | None
    ngl: int | None = None
    # slots each GPU got: the --tensor-split that reproduces it
    layers_per_gpu: tuple[int, ...] | None = None
    rows: tuple[BufferRow, ...] = ()
    speeds: tuple[SpeedRow, ...] = ()
    explanations: tuple[str, ...] = ()
    log: LlamaLog
    # llama.cpp's fit against RigSpark's, when the log shows a fit and a FitOutcome was given
    fit_rows: tuple[FitRow, ...] = ()

    @property
    def compared_rows(self) -> tuple[BufferRow, ...]:
        return tuple(r for r in self.rows if r.difference_bytes is not None)

    @property
    def predicted_total(self) -> int:
        return sum(r.predicted_bytes or 0 for r in self.compared_rows)

    @property
    def actual_total(self) -> int:
        return sum(r.actual_bytes or 0 for r in self.compared_rows)

    @property
    def all_within_rounding(self) -> bool:
        return all(r.within_rounding for r in self.rows)


def mib_text(n: int | float) -> str:
    """Bytes as MiB, two decimals (as llama.cpp prints them)."""
    return f"{n / MIB:,.2f}"


def signed_mib_text(n: int) -> str:
    return signed_text(n / MIB)


def signed_text(mib: float) -> str:
    """A MiB difference with its sign; below half a hundredth, +0.00."""
    return f"{0.0 if abs(mib) < 0.005 else mib:+,.2f}"


def gpu_index(device: str | None) -> int | None:
    """N of a gpu:N device; None for the CPU, an unknown backend or no device."""
    if device is None or not device.startswith("gpu:"):
        return None
    return int(device.split(":")[1])
