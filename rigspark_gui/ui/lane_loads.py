"""What each lane of the Layers tab holds: the placement's loads with what loads beside
the model (its vision projector, a draft model) on their devices, as the plan counts it."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.memory import RepackBytes, WeightsLayout
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import DeviceLoad, Placement
from rigspark_gui.core.plan import loads_with_beside
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings


def lane_loads(
    placement: Placement,
    spec: ModelSpec,
    layout: WeightsLayout,
    rig: Rig,
    settings: PlanSettings,
    kv_layers: Sequence[int],
    repack: RepackBytes | None,
) -> tuple[DeviceLoad, ...]:
    """Each lane's load under `placement` (text only: without the projector)."""
    return loads_with_beside(placement, spec, layout, rig, settings, kv_layers, repack)
