"""The commands that plan a model on a rig: `plan` (every path), `place` (one placement
per layer, with its launch commands), `rank` (every catalog model), `export` (a report
file) and `reconcile` (a llama.cpp log's buffers against the plan for its settings)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rigspark_gui.cli_base import EXIT_FITS, EXIT_NO_FIT, PROG, UsageError, emit_json
from rigspark_gui.cli_inputs import load_model, load_rig_arg, settings_from
from rigspark_gui.formats.jsonable import jsonable


def cmd_plan(args: argparse.Namespace) -> int:
    from rigspark_gui.cli_speed import speed_model as load_perf
    from rigspark_gui.core.plan import plan

    spec = load_model(args)
    s = settings_from(args)
    rig = load_rig_arg(args)
    perf = load_perf()
    from rigspark_gui.catalog.quality import load_quality
    from rigspark_gui.core.plan import suggest

    quality = load_quality()
    result = plan(spec, rig, s, perf, kv_pairs=args.kv_compare, kv_kld=quality.kv_kld)
    ideas = suggest(spec, rig, s, perf, quality)
    smaller = _smaller_models(spec, rig, s, perf)
    if args.json:
        data = jsonable(result)
        data["suggestions"] = [jsonable(i) for i in ideas]
        data["smaller_models"] = [jsonable(i) for i in smaller]
        from rigspark_gui.core.device_overhead import device_overheads

        data["device_overhead"] = [jsonable(o) for o in device_overheads(rig)]
        emit_json(data)
    else:
        from rigspark_gui.report.text import format_plan, format_smaller, format_suggestions

        print(format_plan(result))
        if ideas:
            print(format_suggestions(ideas))
        if smaller:
            print(format_smaller(smaller, s.min_tok_s))
    return EXIT_FITS if result.recommended is not None else EXIT_NO_FIT


def _smaller_models(spec: Any, rig: Any, s: Any, perf: Any) -> tuple[Any, ...]:
    """Smaller catalog models that reach the minimum speed where this one does not."""
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.catalog.projectors import with_catalog_projectors
    from rigspark_gui.core.plan import smaller_models

    specs = list(load_catalog().specs())
    # vision models load their projector, as their own plan would count it
    return smaller_models(
        spec, rig, s, perf, specs if s.text_only else with_catalog_projectors(specs)
    )


def cmd_place(args: argparse.Namespace) -> int:
    from rigspark_gui.cli_speed import speed_model as load_perf
    from rigspark_gui.core.memory import repack_for, weights_layout
    from rigspark_gui.core.placement import HEADROOM, auto_place, placement_fit
    from rigspark_gui.core.plan import loads_with_beside, plan
    from rigspark_gui.core.speed import estimate_decode, estimate_prefill
    from rigspark_gui.report.text import format_loads, format_placement

    spec = load_model(args)
    s = settings_from(args)
    if s.backend.serving:
        from rigspark_gui.core.errors import InvalidSettingsError

        raise InvalidSettingsError(
            f"{s.backend.label} places the layers itself (tensor and pipeline parallel): "
            f"`plan --backend {s.backend.value}` shows what each GPU holds"
        )
    rig = load_rig_arg(args)
    perf = load_perf()
    base = plan(spec, rig, s, perf)
    s = base.settings  # what the engine's defaults resolved to, as the plan has them
    # the path whose placement the plan shows: the recommended one, else the nearest
    shown = next((p for p in base.paths if p.path is base.recommended), base.paths[0])
    quant = s.quant or shown.quant or spec.available_quants[-1]
    if args.ngl is not None or args.tensor_split is not None:
        placement = auto_place(spec.geometry, rig, s, ngl=args.ngl, tensor_split=args.tensor_split)
    else:
        assert base.placement is not None
        placement = base.placement
    layout = weights_layout(spec, quant)
    from rigspark_gui.core.launch import placement_gpus

    repack = repack_for(spec, quant, rig.cpu.features, s, placement_gpus(placement, rig))
    # the projector and a draft model count on their devices, as in the plan
    loads = loads_with_beside(placement, spec, layout, rig, s, cpu_repack=repack)
    decode = estimate_decode(placement, spec.geometry, layout, rig, s, perf)
    prefill = estimate_prefill(placement, spec.geometry, layout, rig, s, perf)
    # the plan's rule (placement.fits_within, a unified chip pooled) and its context limit
    fit = placement_fit(loads, rig)
    trained = spec.geometry.context_length
    fits = fit.fits and s.context <= trained
    from rigspark_gui.core.launch import launch_commands

    commands = launch_commands(placement, spec, quant, s, rig)
    if args.json:
        from rigspark_gui.core.plan import PLAN_SCHEMA_VERSION

        emit_json(
            {
                "schema_version": PLAN_SCHEMA_VERSION,
                "model_id": spec.id,
                "quant": quant,
                "settings": jsonable(s),
                "placement": jsonable(placement),
                "device_loads": [jsonable(d) for d in loads],
                "fits": fits,
                "throughput": jsonable(decode),
                "prefill": jsonable(prefill),
                "launch_commands": [jsonable(c) for c in commands],
            }
        )
    else:
        from rigspark_gui.core.units import gib, speed_text

        print(f"{spec.name} at {quant}, {s.context} context")
        print(format_placement(placement))
        print()
        print(format_loads(loads))
        print()
        speed = speed_text(decode.tok_s, decode.low_tok_s, decode.high_tok_s)
        print(f"Decode: {speed} ({decode.basis})")
        if fits:
            print("Fits.")
        elif not fit.fits:
            print(
                f"Does not fit: needs {gib(fit.shortfall_bytes)} more usable memory "
                f"({HEADROOM:.0%} of each device's is kept free)."
            )
        else:
            print(f"Does not fit: {s.context} tokens exceed the model's trained context {trained}.")
        print()
        for c in commands:
            print(f"{c.engine.value}:")
            body = c.text if c.supported else f"cannot express this placement: {c.explanation}"
            print("  " + body.replace("\n", "\n  "))
            # llama-server's other form (let fit decide), and which of the two is recommended
            for f in c.forms:
                if f.argv != c.argv:
                    print(f"  {'let fit decide' if f.form == 'fit' else f.form}: {f.text}")
            if c.recommendation:
                print(f"  recommended: {c.recommendation}")
    return EXIT_FITS if fits else EXIT_NO_FIT


def cmd_rank(args: argparse.Namespace) -> int:
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.cli_speed import speed_model as load_perf
    from rigspark_gui.core.plan import RankVerdict, rank_models

    catalog = load_catalog()
    for err in catalog.errors:
        print(f"{PROG}: warning: {err}", file=sys.stderr)
    family = (args.family or "").lower()
    specs = [e.to_spec() for e in catalog.entries if family in e.family.lower()]
    if not specs:
        raise UsageError(f"no catalog model in family {args.family!r}")
    from rigspark_gui.catalog.projectors import with_catalog_projectors

    specs = with_catalog_projectors(specs)  # vision models load their projector, as in plan
    s = settings_from(args)
    rig = load_rig_arg(args)
    rows = rank_models(specs, rig, s, load_perf())
    if args.json:
        emit_json(
            {
                "schema_version": 1,
                "rig_name": rig.name,
                "settings": jsonable(s),
                "models": [jsonable(r) for r in rows],
            }
        )
    else:
        from rigspark_gui.report.text import format_ranking

        print(format_ranking(rows, rig.name, s))
    return EXIT_FITS if any(r.verdict is not RankVerdict.NO for r in rows) else EXIT_NO_FIT


def cmd_export(args: argparse.Namespace) -> int:
    from rigspark_gui.cli_speed import speed_model as load_perf

    # Charts and PDFs are drawn with QtGui on an offscreen QGuiApplication: no widgets,
    # no window (the import contract forbids QtWidgets and the ui package in the CLI).
    from rigspark_gui.report.export import export_plan

    spec = load_model(args)
    s = settings_from(args)
    rig = load_rig_arg(args)
    report = export_plan(spec, rig, s, load_perf(), args.output, args.format)
    print(f"wrote {args.output}")
    return EXIT_FITS if report.recommended is not None else EXIT_NO_FIT


def cmd_reconcile(args: argparse.Namespace) -> int:
    from rigspark_gui.cli_speed import speed_model as load_perf
    from rigspark_gui.core.errors import ModelImportError
    from rigspark_gui.reconcile import (
        format_reconciliation,
        parse_llama_log,
        read_log_text,
        reconcile_log,
    )

    log = parse_llama_log(read_log_text(args.log))
    args.model_url = None
    if args.model is None and args.model_file is None:
        named = Path(log.model_path) if log.model_path else None
        if named is None or not named.is_file():
            where = f" ({log.model_path})" if log.model_path else ""
            raise ModelImportError(
                f"the log's model file{where} is not on this computer: name the model with "
                "--model or --model-file"
            )
        args.model_file = named
    spec = load_model(args)
    result = reconcile_log(log, spec, load_rig_arg(args), load_perf())
    if args.json:
        data = {k: v for k, v in jsonable(result).items() if k != "log"}
        data["rows"] = [
            {
                **jsonable(r),
                "difference_bytes": r.difference_bytes,
                "status": r.status,
            }
            for r in result.rows
        ]
        emit_json({"schema_version": 1, **data})
    else:
        print(format_reconciliation(result))
    return EXIT_FITS
