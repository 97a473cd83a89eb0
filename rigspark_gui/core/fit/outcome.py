"""What llama.cpp's `--fit` decides for one load (`common_fit_params`, common/fit.cpp):
the records every surface reads (plan JSON, the `fit` verb, reconcile, the window)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FitStatus(StrEnum):
    # every device keeps its margin at the initial settings: nothing changed
    UNCHANGED = "unchanged"
    # fit changed the context, -ngl, --tensor-split or the overrides
    FITTED = "fitted"
    # fit gave up (user -ngl/-ts/-ot, no GPU and too big, ...): loads as the user asked
    FAILED = "failed"
    # --fit off, or an engine that does not run llama.cpp's fit
    OFF = "off"


@dataclass(frozen=True, slots=True, kw_only=True)
class FitDevice:
    """One device as fit saw it: its free memory, the margin it keeps and what fit
    projects the final settings to use there (model + context + compute)."""

    # llama.cpp's device order: gpu:N / rpc-cpu:HOST, or "cpu" (host) with no GPU
    device: str
    free_bytes: int
    margin_bytes: int
    projected_bytes: int
    # layers fit gives this device (with the output layer on the last) and how many of
    # them overflow part of their FFN to another device
    layers: int = 0
    overflowing: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class FitOutcome:
    """llama.cpp's fit for one load, in its own terms."""

    status: FitStatus
    # why, in llama.cpp's words where it has them ("n_gpu_layers already set by user ...")
    reason: str
    context: int
    # -1 = "let fit decide" was left as is (fit failed before choosing)
    ngl: int
    # whole layer counts per device (multi-device only; empty otherwise)
    tensor_split: tuple[int, ...] = ()
    # "pattern=BUFFER" tensor overrides fit sets (MoE experts, partial layers)
    overrides: tuple[str, ...] = ()
    # exactly the line `llama-fit-params` prints
    command: str = ""
    devices: tuple[FitDevice, ...] = ()
    # the context llama.cpp started from (trained context x streams when automatic)
    initial_context: int = 0


def fit_command(context: int, ngl: int, split: tuple[int, ...], overrides: tuple[str, ...]) -> str:
    """The line llama-fit-params prints for these values (tools/fit-params/fit-params.cpp):
    `-c N -ngl N`, then ` -ts a,b` when more than one device has layers counted up to the
    last non-zero one, then ` -ot "p1=B1,p2=B2"`."""
    out = f"-c {context} -ngl {ngl}"
    nd = len(split)
    while nd > 1 and split[nd - 1] == 0:
        nd -= 1
    if nd > 1:
        out += " -ts " + ",".join(str(x) for x in split[:nd])
    if overrides:
        out += ' -ot "' + ",".join(overrides) + '"'
    return out
