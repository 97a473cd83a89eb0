"""What the Layers tab shows of a placement, computed from it without widgets: each
device's strip blocks, the summary line (decode and prefill speed, the limiting device,
whether it fits) and the launch command for the chosen engine."""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.launch import Engine, LaunchCommand, launch_command
from rigspark_gui.core.memory import WeightsLayout
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import INPUT, OUTPUT, DeviceLoad, Placement, Verdict
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel, estimate_decode, estimate_prefill
from rigspark_gui.core.units import gib, seconds_text, speed_text
from rigspark_gui.ui.lane_model import device_label
from rigspark_gui.ui.layer_strip import StripBlock


def strip_blocks(
    p: Placement, layout: WeightsLayout, kv_layers: Sequence[int]
) -> dict[str, list[StripBlock]]:
    """Each device's blocks, in one pass: its units (a layer whose experts left,
    without them; KV drawn with its layer) and the experts of other devices' layers
    it runs."""
    out: dict[str, list[StripBlock]] = {}
    for u in p.units:
        here = out.setdefault(u.device, [])
        if u.unit == INPUT or u.unit == OUTPUT:
            n = layout.input_bytes if u.unit == INPUT else layout.output_bytes
            here.append(StripBlock(u.unit, n, 0, False))
            continue
        experts = layout.block_expert_bytes[u.index]
        away = u.experts_device is not None and u.experts_device != u.device
        kv = kv_layers[u.index] if u.index < len(kv_layers) else 0
        weights = layout.block_bytes[u.index] - (experts if away else 0)
        here.append(StripBlock(u.unit, weights, kv, False))
        if away and u.experts_device is not None:
            out.setdefault(u.experts_device, []).append(StripBlock(u.unit, experts, 0, True))
    return out


def placement_summary(
    p: Placement,
    spec: ModelSpec,
    layout: WeightsLayout,
    rig: Rig,
    settings: PlanSettings,
    perf: SpeedModel,
    loads: Sequence[DeviceLoad],
) -> tuple[str, str]:
    """The summary line of a placement, and its tooltip (how each speed was estimated)."""
    g, s = spec.geometry, settings
    decode = estimate_decode(p, g, layout, rig, s, perf)
    prefill = estimate_prefill(p, g, layout, rig, s, perf)
    parts = [f"Decode {speed_text(decode.tok_s, decode.low_tok_s, decode.high_tok_s)}"]
    if prefill.known and prefill.seconds is not None:
        parts.append(
            f"prefill of {prefill.prompt_tokens} tokens "
            f"{seconds_text(prefill.seconds, prefill.low_seconds, prefill.high_seconds)}"
        )
    else:
        parts.append(f"prefill {prefill.basis}")
    if decode.limiting_device is not None:
        parts.append(f"limited by {device_label(decode.limiting_device)}")
    over = [x for x in loads if x.verdict is Verdict.OVER]
    if over:
        worst = max(over, key=lambda x: x.over_bytes)
        parts.append(
            f"✗ does not fit: {device_label(worst.device)} over by {gib(worst.over_bytes, 2)}"
        )
    else:
        parts.append("✓ the whole placement fits")
    return "  ·  ".join(parts), f"{decode.basis}\n{prefill.basis}"


def placement_launch(
    engine: Engine,
    p: Placement,
    spec: ModelSpec,
    quant: str,
    settings: PlanSettings,
    rig: Rig,
    loads: Sequence[DeviceLoad],
) -> LaunchCommand:
    """The command that runs `p` with `engine`, told the largest share of a GPU's
    memory the placement needs."""
    need = None
    totals = {x.device: x.total_bytes for x in loads}
    fractions = [
        totals.get(f"gpu:{i}", 0) / gpu.memory_total_bytes
        for i, gpu in enumerate(rig.gpus)
        if gpu.memory_total_bytes
    ]
    if fractions:
        need = max(fractions)
    return launch_command(
        engine,
        p,
        spec,
        quant,
        settings,
        rig,
        gpu_fraction_needed=need,
    )
