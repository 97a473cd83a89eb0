"""The projector a command plans beside its model: `--mmproj FILE|URL` (read like a
model header), else the catalog's for a catalog model; none with `--text-only`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rigspark_gui.cli_base import print_note
from rigspark_gui.core.launch import split_projector_flags

if TYPE_CHECKING:
    from rigspark_gui.core.fit import FitOutcome
    from rigspark_gui.core.model import ModelSpec
    from rigspark_gui.core.rig import Rig
    from rigspark_gui.core.settings import PlanSettings


def attach_projector(args: argparse.Namespace, spec: ModelSpec) -> ModelSpec:
    from rigspark_gui.catalog.projectors import catalog_projector, with_projector

    if getattr(args, "text_only", False):
        return spec
    given = getattr(args, "mmproj", None)
    if given:
        from rigspark_gui.catalog.mmproj import load_projector
        from rigspark_gui.user_dirs import cache_dir

        timeout_s = getattr(args, "network_timeout", None)
        return with_projector(spec, load_projector(given, cache_dir(), timeout_s))
    entry = catalog_projector(spec)
    if entry is None:
        return spec
    if entry.projector is None:
        print_note(
            f"{spec.id} loads a vision projector whose size is not listed here: give its "
            "file with --mmproj FILE|URL, or plan it --text-only; planned without it"
        )
        return spec
    return with_projector(spec, entry.projector)


def fit_with_projector(
    argv: list[str],
    spec: ModelSpec,
    rig: Rig,
    s: PlanSettings,
    run_fit: Callable[[ModelSpec, Rig, PlanSettings], FitOutcome],
) -> FitOutcome:
    """Fit for a pasted command line whose projector flags were split off
    (`split_projector_flags`): llama-server measures the projector first and adds it
    to the margin of its device; `--no-mmproj` leaves it out."""
    _, found = split_projector_flags(argv)
    given = found.get("mmproj")
    if not isinstance(given, str) or found.get("text_only"):
        return run_fit(spec, rig, s)
    # only with a projector: the planner's import is a third of the fit verb's start-up
    from dataclasses import replace

    from rigspark_gui.catalog.mmproj import load_projector
    from rigspark_gui.catalog.projectors import with_projector
    from rigspark_gui.core.plan import claimed_rig, plan_projector, with_projector_fit
    from rigspark_gui.user_dirs import cache_dir

    spec = with_projector(spec, load_projector(given, cache_dir()))
    s = replace(s, mmproj_offload=bool(found.get("mmproj_offload", True)))
    load = plan_projector(spec, rig, s)
    fit = with_projector_fit(run_fit(spec, claimed_rig(rig, load), s), load)
    assert fit is not None  # given an outcome, it returns one
    return fit


def attach_draft(args: argparse.Namespace, spec: ModelSpec) -> ModelSpec:
    """`--model-draft NAME|FILE` (llama.cpp's -md) with -ngld, -ctkd/-ctvd and -devd."""
    from dataclasses import replace

    from rigspark_gui.cli_base import UsageError
    from rigspark_gui.core.model import DraftModel, kv_cache_type

    name = getattr(args, "model_draft", None)
    if not name:
        given = [
            flag
            for flag, key in (
                ("--device-draft", "device_draft"),
                ("-ngld", "gpu_layers_draft"),
                ("-ctkd", "cache_type_k_draft"),
                ("-ctvd", "cache_type_v_draft"),
            )
            if getattr(args, key, None)
        ]
        if given and getattr(args, "spec_type", None) == "draft-mtp":
            raise UsageError(
                f"{', '.join(given)}: not planned for MTP drafting yet (llama.cpp's "
                "defaults are: f16 cache on the target's devices)"
            )
        if given:
            raise UsageError(f"{', '.join(given)} set without --model-draft: there is no draft")
        return spec
    draft, quant = _draft_spec(name)
    quant = getattr(args, "draft_quant", None) or quant
    if quant is None:
        quant = "Q8_0" if "Q8_0" in draft.available_quants else draft.available_quants[0]
    ngl_text = (getattr(args, "gpu_layers_draft", None) or "auto").lower()
    if ngl_text in ("auto", "all", "-1", "-2"):
        ngl = None
    elif ngl_text.isdigit():
        ngl = int(ngl_text)
    else:
        raise UsageError(f"-ngld: expected a number, auto or all, not {ngl_text!r}")
    kv: dict[str, Any] = {}
    for flag, key in (("cache_type_k_draft", "kv_k"), ("cache_type_v_draft", "kv_v")):
        value = getattr(args, flag, None)
        if value:
            try:
                kv[key] = kv_cache_type(value)
            except (KeyError, ValueError):
                raise UsageError(
                    f"{flag.replace('_', '-')}: unknown cache type {value!r}"
                ) from None
    devd = getattr(args, "device_draft", None)
    if devd is not None:
        from rigspark_gui.core.launch import parse_draft_devices

        kv["devices"] = parse_draft_devices(devd)
    return replace(spec, draft=DraftModel(spec=draft, quant=quant, n_gpu_layers=ngl, **kv))


def _draft_spec(name: str) -> tuple[ModelSpec, str | None]:
    """A draft named like a model: a GGUF file (its own quantization) or a catalog model."""
    from pathlib import Path

    path = Path(name).expanduser()
    if name.lower().endswith(".gguf") or path.is_file():
        from rigspark_gui.catalog.gguf_import import import_gguf
        from rigspark_gui.core.errors import ModelImportError

        if not path.is_file():
            raise ModelImportError(f"no such draft model file: {name}")
        draft = import_gguf(path)
        return draft, draft.file_quant
    from rigspark_gui.catalog.models import resolve_model

    found = resolve_model(name)
    return found.spec, found.quant if found.quant in found.spec.available_quants else None
