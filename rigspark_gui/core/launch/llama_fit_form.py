"""llama-server's two forms of one plan: `pinned` (the plan's placement written out with
-ngl, --tensor-split and -ot or --n-cpu-moe, which switches llama.cpp's --fit off) and
`fit` (no -ngl: llama.cpp's fit places the layers itself at launch; -c, -fitt and -fitc
only where the plan's settings are not llama-server's defaults), and which of the two
the plan recommends.

The fit form is recommended when llama.cpp's own fit, run on that command line against
the rig, arrives at the plan's placement and context: then it says the same thing in
fewer words and keeps adapting to the free memory found at launch. Otherwise the pinned
form is, because fit alone would run something RigSpark did not plan (a shrunk context,
another split, experts moved elsewhere), or give up."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rigspark_gui.core.errors import InvalidPlacementError, InvalidSettingsError
from rigspark_gui.core.fit import (
    DEFAULT_FIT_CTX,
    DEFAULT_MARGIN,
    MIB,
    FitOutcome,
    FitStatus,
    UserFlags,
    fit_devices,
    llama_fit,
)
from rigspark_gui.core.launch.engine import LaunchForm, shell_line
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import Placement
from rigspark_gui.core.rig import Rig, gpu_index
from rigspark_gui.core.settings import PlanSettings

PINNED = "pinned"
FIT = "fit"


def fit_form_argv(model: Sequence[str], s: PlanSettings, tail: Sequence[str]) -> list[str]:
    """llama-server letting fit decide: the model, -c only for a context the plan pins,
    the plan's -fitt / -fitc where they differ from llama.cpp's defaults (1024 MiB per
    device, 4096 tokens), then the flags both forms share (`tail`: K/V types, -fa, -np,
    -ub ...). --fit itself is on by default and never written."""
    argv = ["llama-server", *model]
    if not s.is_auto("context"):
        argv += ["-c", str(s.context)]
    if s.fit_target_mib != (DEFAULT_MARGIN // MIB,):
        argv += ["-fitt", ",".join(str(m) for m in s.fit_target_mib)]
    if s.fit_ctx != DEFAULT_FIT_CTX:
        argv += ["-fitc", str(s.fit_ctx)]
    return [*argv, *tail]


def plan_fit(spec: ModelSpec, quant: str, s: PlanSettings, rig: Rig) -> FitOutcome:
    """What llama.cpp's fit does with the fit form on this machine's own GPUs (the same
    question the plan's `fit` answers for llama-server)."""
    devices = tuple(
        d for d in fit_devices(rig) if (i := gpu_index(d)) is not None and not rig.gpus[i].host
    )
    user = UserFlags(context=None if s.is_auto("context") else s.context)
    return llama_fit(spec, quant, rig, s, devices=devices, user=user)


def fit_placement(spec: ModelSpec, s: PlanSettings, rig: Rig, fit: FitOutcome) -> Placement | None:
    """The placement llama.cpp makes of fit's -ngl / -ts / -ot; None when fit gave up
    or names a buffer this rig has no device for."""
    from rigspark_gui.core.launch.llama_cpp import apply_llama_args, parse_llama_args

    if fit.status in (FitStatus.FAILED, FitStatus.OFF):
        return None
    argv: list[str] = []
    if fit.ngl >= 0:
        argv += ["-ngl", str(fit.ngl)]
    if fit.tensor_split:
        argv += ["-ts", ",".join(str(x) for x in fit.tensor_split)]
    if fit.overrides:
        argv += ["-ot", ",".join(fit.overrides)]
    try:
        ngl, split, overrides = parse_llama_args(argv)
        return apply_llama_args(
            spec.geometry, rig, replace(s, context=fit.context), ngl, split, overrides
        )
    except (InvalidPlacementError, InvalidSettingsError, ValueError):
        return None


def same_placement(a: Placement, b: Placement) -> bool:
    """Every unit on the same device, experts included."""
    return _units(a) == _units(b)


def _units(p: Placement) -> tuple[tuple[str, str, str | None], ...]:
    return tuple((u.unit, u.device, u.experts_device) for u in p.units)


def choose_form(
    placement: Placement,
    spec: ModelSpec,
    quant: str,
    s: PlanSettings,
    rig: Rig,
    pinned: Sequence[str],
    fit_argv: Sequence[str],
    env: Sequence[tuple[str, str]],
    fit_env: Sequence[tuple[str, str]],
) -> tuple[tuple[LaunchForm, LaunchForm], str]:
    """Both forms, the recommended one marked, and why it is recommended. `fit_env`
    shows the backend every GPU of this machine (fit chooses among them)."""
    if not s.fit:
        chosen = PINNED
        why = "pinned: this plan turns llama.cpp's --fit off, so the placement is written out"
    else:
        fit = plan_fit(spec, quant, s, rig)
        placed = fit_placement(spec, s, rig, fit)
        if fit.status is FitStatus.FAILED:
            chosen = PINNED
            why = (
                "pinned: llama.cpp's fit gives up on this command line "
                f"({fit.reason}) and would load every layer on the GPUs as asked"
            )
        elif placed is not None and fit.context == s.context and same_placement(placed, placement):
            chosen = FIT
            why = (
                "let fit decide: llama.cpp's own fit arrives at this plan's placement and "
                f"context by itself ({fit.command}) and adapts to the free memory it finds "
                "at launch; the pinned form fixes what RigSpark measured"
            )
        else:
            chosen = PINNED
            differs = (
                f"a {fit.context}-token context"
                if fit.context != s.context
                else "another placement"
            )
            why = (
                f"pinned: llama.cpp's fit alone would settle on {differs} ({fit.command}); "
                "-ngl, --tensor-split and -ot pin the placement RigSpark planned and "
                "measured, which switches fit off"
            )
    forms = (
        LaunchForm(
            form=PINNED,
            argv=tuple(pinned),
            text=shell_line(env, pinned),
            recommended=chosen == PINNED,
        ),
        LaunchForm(
            form=FIT,
            argv=tuple(fit_argv),
            text=shell_line(fit_env, fit_argv),
            recommended=chosen == FIT,
        ),
    )
    return forms, why
