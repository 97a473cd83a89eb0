"""The commands that list what RigSpark knows: `models` (the catalog, or with `--local`
the models on this computer), `gpus` (the GPU database) and `schema` (the JSON Schema of
each file and output format)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rigspark_gui.cli_base import EXIT_FITS, EXIT_NO_FIT, PROG, UsageError, emit_json
from rigspark_gui.cli_inputs import gpu_database
from rigspark_gui.formats.jsonable import jsonable


def cmd_models(args: argparse.Namespace) -> int:
    if getattr(args, "update", False):
        return _update(args)
    if args.local or args.folder:
        return _local_models(args)
    from rigspark_gui.catalog.models import load_catalog

    catalog = load_catalog()
    entries = [
        e for e in catalog.entries if not args.family or args.family.lower() in e.family.lower()
    ]
    for err in catalog.errors:
        print(f"{PROG}: warning: {err}", file=sys.stderr)
    if args.json:
        emit_json(
            {
                "schema_version": 1,
                "models": [jsonable(e) for e in entries],
            }
        )
        return EXIT_FITS
    for e in entries:
        g = e.geometry
        moe = f" MoE {g.n_expert_used}/{g.n_expert}" if g.n_expert else ""
        params = f"{e.params_b:g}B" if e.params_b else ""
        print(f"{e.id:<40} {e.family:<14} {params:>7}{moe:<12} ctx {g.context_length:>7}")
    return EXIT_FITS


def _update(args: argparse.Namespace) -> int:
    """`models --update`: the curated repositories read into the user cache."""
    from rigspark_gui.catalog.update import run_update

    def progress(done: int, total: int, repo: str) -> None:
        if repo:
            print(f"{PROG}: [{done + 1}/{total}] reading {repo}", file=sys.stderr, flush=True)

    result = run_update(progress=progress, timeout_s=getattr(args, "network_timeout", None))
    for err in result.errors:
        print(f"{PROG}: {err}", file=sys.stderr)
    if args.json:
        emit_json(
            {
                "schema_version": 1,
                "added": list(result.added),
                "errors": list(result.errors),
                "path": str(result.path) if result.path else None,
            }
        )
    elif result.added:
        print(f"{len(result.added)} models read into {result.path}: {', '.join(result.added)}")
    else:
        print("No model was read; the shipped catalog is unchanged.")
    return EXIT_FITS if result.added or not result.errors else EXIT_NO_FIT


def _local_models(args: argparse.Namespace) -> int:
    from rigspark_gui.catalog.local_models import find_local_models, read_local_model
    from rigspark_gui.core.errors import RigSparkError
    from rigspark_gui.core.memory import param_count
    from rigspark_gui.core.units import gib

    missing = [str(f) for f in args.folder if not f.is_dir()]
    if missing:
        raise UsageError(f"--folder: no such folder: {missing[0]}")
    scan = find_local_models(folders=args.folder)
    rows: list[dict[str, Any]] = []
    skipped = list(scan.skipped)
    for m in scan.found:
        try:
            spec = read_local_model(m)
        except (RigSparkError, OSError, ValueError) as err:
            skipped.append(f"{m.path}: {err}")
            continue
        rows.append(
            {
                "id": spec.id,
                "name": m.name,
                "store": m.store,
                "path": str(m.path),
                "size_bytes": m.size_bytes,
                "quant": spec.available_quants[0],
                "architecture": spec.geometry.architecture,
                "params": param_count(spec).total,
                "context_length": spec.geometry.context_length,
                "ollama_tag": m.ollama_tag or None,
            }
        )
    for why in skipped:
        print(f"{PROG}: skipped {why}", file=sys.stderr)
    if args.json:
        emit_json({"schema_version": 1, "models": rows, "skipped": skipped})
        return EXIT_FITS
    if not rows:
        print("No models found on this computer (Ollama, LM Studio, Hugging Face, llama.cpp).")
    for r in rows:
        print(
            f"{r['name']:<50} {r['store']:<18} {r['quant']:<8} {gib(r['size_bytes']):>10}  "
            f"{r['architecture']}"
        )
    return EXIT_FITS


def cmd_gpus(args: argparse.Namespace) -> int:
    from rigspark_gui.core.errors import CatalogError

    db = gpu_database()
    if db is None:
        raise CatalogError("the GPU database (data/gpus.json) is missing")
    if args.json:
        emit_json({"schema_version": 1, "gpus": [jsonable(g) for g in db.gpus]})
        return EXIT_FITS
    for g in db.gpus:
        tf = f"{g.fp16_tflops:g} TFLOPS" if g.fp16_tflops else "TFLOPS unknown"
        print(
            f"{g.name:<40} {g.vendor.value:<7} {g.memory_bytes / (1 << 30):6.0f} GiB "
            f"{g.memory_bandwidth_gbps:7.0f} GB/s  {tf}"
        )
    return EXIT_FITS


def cmd_schema(args: argparse.Namespace) -> int:
    from rigspark_gui.cli_schema import SCHEMAS

    if args.name is not None and not args.list:
        emit_json(SCHEMAS[args.name]())
    elif args.json:
        emit_json({name: schema.about for name, schema in SCHEMAS.items()})
    else:
        width = max(map(len, SCHEMAS))
        for name, schema in SCHEMAS.items():
            print(f"{name:<{width}}  {schema.about}")
    return EXIT_FITS
