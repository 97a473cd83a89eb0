"""Any placement's per-device loads with what loads beside the model counted as the
plan counts it: the vision projector and a draft model, each on its devices and in its
own field (the Layers tab and `place` tally placements outside `plan`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rigspark_gui.core.memory import ProjectorLoad, RepackBytes, WeightsLayout
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import DeviceLoad, Placement, device_loads
from rigspark_gui.core.plan.beside import claim, loads_beside
from rigspark_gui.core.plan.draft import DraftLoad, plan_draft
from rigspark_gui.core.plan.projector import (
    claimed_rig,
    placement_gpus,
    plan_projector,
    projector_bytes_on,
    projector_settings,
    with_projector,
)
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings


def loads_with_beside(
    placement: Placement,
    spec: ModelSpec,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    kv_layers: Sequence[int] | None = None,
    cpu_repack: RepackBytes | None = None,
) -> tuple[DeviceLoad, ...]:
    """`device_loads` of `placement`, the projector (unless text only) and the draft
    model (if any) set aside on their devices and shown in `projector_bytes` and
    `draft_bytes`. The projector is on the GPU llama-server picks for this placement's
    command (the first GPU it shows), and the draft on that command's GPUs and split,
    as the plan counts them."""
    projector = plan_projector(spec, rig, s, placement_gpus(placement, rig, s))
    # on the GPUs and split of its command; MTP blocks quantized like the layout's file
    draft = plan_draft(spec, rig, replace(s, quant=layout.quant), placement)
    draft_on = draft.on() if draft is not None else {}
    tally_rig = rig_beside(rig, projector, draft)
    loads = device_loads(placement, spec.geometry, layout, tally_rig, s, kv_layers, cpu_repack)
    loads = with_projector(loads, projector, rig)
    return loads_beside(loads, draft_on, rig, "draft_bytes")


def rig_beside(rig: Rig, projector: ProjectorLoad | None, draft: DraftLoad | None) -> Rig:
    """`rig` with a plan's projector and draft model set aside, as the plan was made."""
    return claim(claimed_rig(rig, projector), draft.on() if draft is not None else {})


def plan_beside(
    spec: ModelSpec, rig: Rig, s: PlanSettings, shown: Sequence[int] | None = None
) -> tuple[PlanSettings, Rig, dict[str, int]]:
    """The settings and rig a plan of `spec` is made with: its projector (on the first
    of the GPUs `shown`, None: all) and draft model set aside (Ollama's fit margin for
    the projector), as `plan` does; and their bytes per device."""
    projector = plan_projector(spec, rig, s, shown)
    draft = plan_draft(spec, rig, s)
    on = projector_bytes_on(projector)
    for d, n in (draft.on() if draft is not None else {}).items():
        on[d] = on.get(d, 0) + n
    return projector_settings(s, projector), rig_beside(rig, projector, draft), on
