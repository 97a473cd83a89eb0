"""The one fit rule and the verdicts it gives: what every surface (`plan`, `place`,
`rank`, the suggestions, the window, the report) says of a device or a placement.

A device fits when what it needs for weights, KV cache and compute leaves HEADROOM of
its usable memory (capacity less reserve) free; it is tight when it fits with under
TIGHT_SHARE to spare, the thresholds a path's verdict uses too. A unified-memory chip's
GPU and CPU side share one pool and are judged together.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from enum import StrEnum
from typing import NamedTuple, Protocol

from rigspark_gui.core.rig import Rig

CPU = "cpu"
# Kept free on every device for fragmentation and allocator rounding (plan.rs HEADROOM).
HEADROOM = 0.05
# A device or path that fits with less than this share of its usable memory to spare is
# "tight" (the one verdict vocabulary of the chart, the tables, the report and the CLI).
TIGHT_SHARE = 0.10


class Verdict(StrEnum):
    """A device's verdict under the one fit rule (`fits_within`): over when it breaks it,
    tight when it keeps it with under TIGHT_SHARE of its usable memory to spare."""

    FITS = "fits"
    TIGHT = "tight"
    OVER = "over"


def fits_within(required: int, usable: int) -> bool:
    """The fit rule: what a device (or one unified pool) needs for weights, KV cache and
    compute leaves HEADROOM of its usable memory (capacity less reserve) free."""
    return required <= usable * (1 - HEADROOM)


def shortfall_bytes(required: int, usable: int) -> int:
    """Usable memory to add before `fits_within` holds: 0 exactly when it holds."""
    if fits_within(required, usable):
        return 0
    return max(1, math.ceil(required / (1 - HEADROOM)) - usable)


def load_verdict(required: int, usable: int) -> Verdict:
    """over (breaks `fits_within`), tight (fits with under TIGHT_SHARE of usable to
    spare) or fits: a path's verdict uses the same thresholds."""
    if not fits_within(required, usable):
        return Verdict.OVER
    if usable - required < TIGHT_SHARE * max(usable, 1):
        return Verdict.TIGHT
    return Verdict.FITS


class _Load(Protocol):
    """What the fit rule reads of a device's load: a DeviceLoad or a fit.DeviceTally."""

    @property
    def device(self) -> str: ...
    @property
    def required_bytes(self) -> int: ...
    @property
    def usable_bytes(self) -> int: ...


class _PlacedLoad(_Load, Protocol):
    """A DeviceLoad: also the units it holds."""

    @property
    def units(self) -> tuple[str, ...]: ...


class Fit(NamedTuple):
    """A whole placement under the fit rule: whether it fits, and the usable memory it
    lacks (summed over the devices, or the pool, that break the rule)."""

    fits: bool
    shortfall_bytes: int


def judge_fit(loads: Iterable[_Load], pool: Collection[str] = ()) -> Fit:
    """The fit rule over a placement's device loads. Devices in `pool` share one memory
    (a unified-memory chip and its CPU side: `unified_pool`): their needs are summed and
    judged against the pooled GPUs' usable memory; every other device on its own."""
    fits, short = True, 0
    pooled_required = pooled_usable = 0
    pooled = False
    for x in loads:
        if x.device in pool:
            pooled = True
            pooled_required += x.required_bytes
            if x.device != CPU:
                pooled_usable += x.usable_bytes
            continue
        fits = fits and fits_within(x.required_bytes, x.usable_bytes)
        short += shortfall_bytes(x.required_bytes, x.usable_bytes)
    if pooled:
        fits = fits and fits_within(pooled_required, pooled_usable)
        short += shortfall_bytes(pooled_required, pooled_usable)
    return Fit(fits, short)


def unified_pool(rig: Rig, used: Iterable[str]) -> frozenset[str]:
    """The devices of `used` that share one memory: this machine's unified-memory GPUs
    among them and, when there is one, the CPU (its buffers live in the same memory).
    Empty when no unified GPU here holds anything. Another host's unified chip is judged
    on its own: its capacity is already its host's usable memory (`device_capacity`)."""
    unified = {
        d
        for d in used
        if d.startswith("gpu:")
        and rig.gpus[int(d.split(":")[1])].unified
        and not rig.gpus[int(d.split(":")[1])].host
    }
    return frozenset({CPU, *unified}) if unified else frozenset()


def placement_fit(loads: Iterable[_PlacedLoad], rig: Rig) -> Fit:
    """Whether a placement's `device_loads` fit under the one rule (`judge_fit`), a unified
    chip's GPU and CPU side pooled as the plan pools them: what `place` and the window
    report, and what the plan's path says for the same placement."""
    loads = tuple(loads)
    return judge_fit(loads, unified_pool(rig, (x.device for x in loads if x.units)))
