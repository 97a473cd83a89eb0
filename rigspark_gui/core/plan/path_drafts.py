"""A draft model on each path as that path's own command would load it.

llama-server gives the draft the target's devices and --tensor-split
(common_base_params_to_speculative, b11434): a one-GPU path's command shows llama.cpp
that GPU alone, a CPU-only path's none. The plan's own draft follows the recommended
placement (planner.follow_draft); the other paths get theirs from a nominal placement
of the target on their GPUs (every layer offloaded there, llama.cpp's default split),
so each path is planned, and counted in the Paths tab, with its own draft."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import auto_place
from rigspark_gui.core.plan.beside import BytesOn, paths_beside
from rigspark_gui.core.plan.draft import plan_draft
from rigspark_gui.core.plan.paths import PathName, PathPlan, model_paths
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings

if TYPE_CHECKING:
    from rigspark_gui.core.plan.planner import Plan


def path_drafts(
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    skip: PathName | None,
    quant: str | None,
    quants: Mapping[PathName, str | None] | None = None,
) -> dict[PathName, dict[str, int]]:
    """Each path's draft bytes per device (but `skip`'s, the plan's own), with MTP
    blocks quantized as the path's own quantization (`quants`, once the paths are
    planned) or, while planning, `quant` (the last choice) where Auto left it open."""
    if spec.draft is None and not s.mtp_draft:
        return {}
    out: dict[PathName, dict[str, int]] = {}
    for c in model_paths(spec, rig, s.backend):
        if c.name is skip:
            continue
        q = (quants or {}).get(c.name) or quant
        sq = s if s.quant is not None or q is None else replace(s, quant=q)
        # every device of the path in llama.cpp's order, other hosts' too (the RPC
        # command's device list, which the draft inherits)
        nominal = auto_place(spec.geometry, rig, sq, gpu_ids=c.order)
        d = plan_draft(spec, rig, sq, nominal)
        if d is not None:
            out[c.name] = d.on()
    return out


def paths_with_drafts(
    paths: tuple[PathPlan, ...],
    own: BytesOn,
    per_path: Mapping[PathName, BytesOn],
    recommended: PathName | None,
) -> tuple[PathPlan, ...]:
    """Each path's memory with its draft counted: the plan's own draft (`own`) on the
    recommended path, each other path's from `per_path`."""
    out: list[PathPlan] = []
    for p in paths:
        on = own if p.path is recommended else per_path.get(p.path, own)
        out.extend(paths_beside((p,), on, "draft_bytes"))
    return tuple(out)


def quant_of(s: PlanSettings, p: Plan) -> PlanSettings:
    """`s` with the quantization the plan chose where Auto left it open: MTP blocks are
    quantized like the rest of the target's file."""
    if s.quant is not None:
        return s
    shown = next((x for x in p.paths if x.path is p.recommended), None) or p.paths[0]
    return replace(s, quant=shown.quant) if shown.quant else s


def draft_held(tried: list[dict[str, int]]) -> dict[str, int]:
    """What a plan sets aside for its draft model: the draft's bytes per device as the
    last target placement's command loads it; once that has moved, the most any try
    put on each device, so the target planned next leaves room for either (the draft
    follows the target's split, which can follow the room the draft leaves)."""
    if len(tried) == 1:
        return dict(tried[0])
    return {d: max(t.get(d, 0) for t in tried) for d in set().union(*tried)}
