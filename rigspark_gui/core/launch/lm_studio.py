"""LM Studio: an `lms load` line with `--gpu` as the fraction of layers offloaded, for a
placement that needs no `-ot` rule; the settings `lms` has no flags for become notes.

Loading: LM Studio's "Try mmap()" load setting is on by default (lmstudio-ai/lmstudio-js
packages/lms-kv-config/src/schema.ts, `llm.load.llama.tryMmap` default true, commit
6ec11db1), so the plan counts the file mapped unless told to read it in; `lms load` has no
flag for it (lmstudio-ai/lms src/subcommands/load.ts, commit 07b7252d): a note says so."""

from __future__ import annotations

import shlex

from rigspark_gui.core.launch.engine import Engine, LaunchCommand, refuse, split_note
from rigspark_gui.core.launch.llama_layout import simple_layout
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.placement import Placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings


def lm_studio_command(
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
) -> LaunchCommand:
    engine = Engine.LM_STUDIO
    layout = simple_layout(engine, placement)
    if isinstance(layout, LaunchCommand):
        return layout
    n_slots = spec.geometry.n_layer + 1
    if layout.ngl >= n_slots:
        gpu = "max"
    elif layout.ngl == 0:
        gpu = "off"
    else:
        gpu = f"{layout.ngl / n_slots:.4f}"
    if gpu not in ("max", "off") and round(float(gpu) * n_slots) != layout.ngl:
        return refuse(engine, f"--gpu takes a fraction that cannot name {layout.ngl} layers")
    argv = ("lms", "load", spec.id, "--gpu", gpu, "--context-length", str(s.context))
    notes: list[str] = [f"load the {quant} file of this model", *split_note(engine, placement)]
    if s.kv_k is not KvCacheType.F16 or s.kv_v is not KvCacheType.F16 or s.flash_attn:
        notes.append(
            "set flash attention and the K/V cache types in LM Studio's model settings: "
            f"K {s.kv_k.value}, V {s.kv_v.value}, flash attention "
            f"{'on' if s.flash_attn else 'off'} (lms load has no flags for them)"
        )
    if s.parallel > 1:
        notes.append("LM Studio serves requests one at a time here; -np has no lms flag")
    if s.mmap is False:
        notes.append(
            'turn off "Try mmap()" in LM Studio\'s model load settings: this plan reads the '
            "weights into memory (lms load has no flag for it)"
        )
    if not s.repack:
        notes.append("LM Studio has no setting against repacking: its CPU repacks as planned")
    return LaunchCommand(
        engine=engine, supported=True, argv=argv, text=shlex.join(argv), notes=tuple(notes)
    )
