"""The recurrent state of hybrid models apart from the attention KV, per device.

Device loads are tallied with the state inside the KV (both are context memory, on the
device llama.cpp gives the layer); `split_state` moves it into `state_bytes`, totals
unchanged, so plans show what a KV cache type changes and what it does not (the state is
f32 whatever the cache type)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from rigspark_gui.core.memory import state_bytes_per_layer
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.settings import PlanSettings

if TYPE_CHECKING:  # layout imports this module
    from rigspark_gui.core.placement.layout import DeviceLoad

__all__ = ["split_state"]


def split_state(
    loads: tuple[DeviceLoad, ...], g: Geometry, s: PlanSettings, kv_dev: Sequence[str]
) -> tuple[DeviceLoad, ...]:
    """`loads` with each device's recurrent state (its layers' by `kv_dev`, the device of
    each block's KV) out of kv_bytes and in state_bytes."""
    if not g.recurrent_layers:
        return loads
    state: dict[str, int] = {}
    for il, b in enumerate(state_bytes_per_layer(g, s)):
        state[kv_dev[il]] = state.get(kv_dev[il], 0) + b
    return tuple(
        replace(x, kv_bytes=x.kv_bytes - state.get(x.device, 0), state_bytes=state.get(x.device, 0))
        for x in loads
    )
