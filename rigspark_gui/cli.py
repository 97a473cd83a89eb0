"""`rigspark-plan`: the planning engine, headless. Same engine, same figures as the window.

Exit codes: 0 the recommended path fits, 1 nothing fits, 2 bad input (one line on
stderr), 3 an internal error (one line on stderr, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rigspark_gui.formats.jsonable import jsonable

if TYPE_CHECKING:
    from rigspark_gui.catalog.gpu_database import GpuDatabase
    from rigspark_gui.core.model import ModelSpec
    from rigspark_gui.core.rig import Rig
    from rigspark_gui.core.settings import PlanSettings

EXIT_FITS, EXIT_NO_FIT, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
PROG = "rigspark-plan"
# The ids `models --local` prints: `ollama:TAG` and the like (local_models._ID_PREFIX).
LOCAL_ID_PREFIXES = frozenset({"ollama", "lmstudio", "hfcache", "llamacpp"})


class UsageError(Exception):
    """Bad flags or values; printed as one line, exit 2."""


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal's width: left to find it, argparse imports
    shutil (and with it bz2, lzma, zlib) and asks the terminal again for every flag."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:  # fmt: skip
        super().__init__(prog, indent_increment, max_help_position, width or _columns() - 2)


@cache
def _columns() -> int:
    """The terminal's width as shutil.get_terminal_size finds it ($COLUMNS, then stdout)."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _context(text: str) -> int:
    from rigspark_gui.core.units import parse_token_count

    n = parse_token_count(text)
    if n is None:
        raise argparse.ArgumentTypeError(f"not a token count: {text!r}")
    if not 1 <= n <= 1 << 24:
        raise argparse.ArgumentTypeError(f"context must be between 1 and 16M tokens, got {text}")
    return n


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"cannot be negative, got {n}")
    return n


def _number_in(
    what: str, lo: float, hi: float, *, above: bool = False, unit: str = ""
) -> Callable[[str], float]:
    """An argparse type: a number in [lo, hi] (or (lo, hi] when `above`)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not (lo < v if above else lo <= v) or not v <= hi:
            low = f"above {lo:g}" if above else f"between {lo:g}"
            rest = f" and at most {hi:g}" if above else f" and {hi:g}"
            raise argparse.ArgumentTypeError(f"must be {low}{rest}{unit}, got {text}")
        return v

    return parse


_min_speed = _number_in("a speed in tokens/s", 0, 100000, unit=" tok/s")
_fraction = _number_in("a fraction", 0, 1, above=True)
_gb = _number_in("a size in GB", 0, 1 << 20, unit=" GB")


CALIBRATION_QUANTS = ("F16", "Q8_0", "Q6_K", "Q4_K_M", "Q4_0")


def _quant_list(text: str) -> tuple[str, ...]:
    quants = tuple(q.strip().upper() for q in text.split(",") if q.strip())
    bad = [q for q in quants if q not in CALIBRATION_QUANTS]
    if not quants or bad:
        raise argparse.ArgumentTypeError(
            f"--quants takes some of {', '.join(CALIBRATION_QUANTS)}, got {text!r}"
        )
    return quants


def _split(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--tensor-split takes numbers like 3,1: {text!r}"
        ) from None
    if not values or any(v < 0 for v in values) or sum(values) <= 0:
        raise argparse.ArgumentTypeError("--tensor-split needs non-negative numbers, not all 0")
    return values


def _add_model_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--model",
        metavar="NAME",
        help="a catalog model by id or name, Ollama tag (llama3.1:8b) or Hugging Face id "
        "(org/repo[:QUANT]); a quantization in the name is used (see `models`); "
        "hf:REPO[:QUANT] reads that repository's GGUF header over the network",
    )
    src.add_argument(
        "--model-file", metavar="PATH", type=Path, help="a .gguf, an HF config.json or its folder"
    )
    src.add_argument(
        "--model-url",
        metavar="URL",
        help="a GGUF on the web: only its header is read (range requests), then cached",
    )
    p.add_argument("--quant", help="fixed quantization (default: the best that fits)")
    _add_setting_args(p)


def _add_setting_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rig", metavar="RIG.json", type=Path, help="rig file (default: detect)")
    p.add_argument("--context", type=_context, default=8192, help="tokens, e.g. 8192 or 32k")
    p.add_argument("--kv-k", default="f16", help="K cache type (f16, q8_0, q4_0 ...)")
    p.add_argument("--kv-v", default=None, help="V cache type (default: same as K)")
    p.add_argument("--flash-attn", choices=("on", "off"), default=None)
    p.add_argument("--parallel", type=_positive, default=1, help="sequences at once (-np)")
    p.add_argument(
        "--backend",
        default="llama.cpp",
        choices=("llama.cpp", "ollama", "lm-studio", "koboldcpp", "vllm", "sglang", "mlx"),
    )
    serving = p.add_argument_group("serving engines (--backend vllm or sglang)")
    serving.add_argument(
        "--memory-utilization",
        type=_fraction,
        metavar="F",
        help="vLLM --gpu-memory-utilization / SGLang --mem-fraction-static (default: theirs)",
    )
    serving.add_argument("--tensor-parallel", type=_positive, metavar="N", help="TP size")
    serving.add_argument("--pipeline-parallel", type=_positive, metavar="N", help="PP size")
    serving.add_argument(
        "--max-num-seqs", type=_positive, metavar="N", help="requests batched at once"
    )
    serving.add_argument(
        "--max-num-batched-tokens", type=_positive, metavar="N", help="tokens per step"
    )
    serving.add_argument(
        "--cpu-offload-gb", type=_gb, metavar="GB", default=0.0, help="vLLM weights kept in RAM"
    )
    p.add_argument(
        "--gpu-backend",
        choices=("cuda", "rocm", "vulkan", "metal", "sycl"),
        default=None,
        help="GPU compute backend for speed estimates (default: each vendor's own)",
    )
    p.add_argument(
        "--min-speed",
        type=_min_speed,
        default=None,
        metavar="TOK_S",
        help="Auto: best quality reaching this decode speed (default 8; 0 = best that fits)",
    )
    p.add_argument("--swa-full", action="store_true", help="full-size sliding-window caches")
    p.add_argument("--prompt-tokens", type=_positive, default=1024, help="prompt for prefill time")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _plan_args(p: argparse.ArgumentParser) -> None:
    _add_model_args(p)
    p.add_argument(
        "--kv-compare",
        choices=("none", "common", "all"),
        default="common",
        help="KV precision comparison rows (default: common pairs)",
    )


def _place_args(p: argparse.ArgumentParser) -> None:
    _add_model_args(p)
    p.add_argument("--ngl", type=_non_negative, help="llama.cpp -ngl (default: the plan's)")
    p.add_argument("--tensor-split", type=_split, help="llama.cpp --tensor-split, e.g. 3,1")


def _rank_args(p: argparse.ArgumentParser) -> None:
    _add_setting_args(p)
    p.add_argument("--family", help="only this family (substring)")
    p.set_defaults(quant=None)


def _models_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.add_argument("--family", help="only this family (substring)")
    p.add_argument(
        "--local",
        action="store_true",
        help="the models on this computer (Ollama, LM Studio, Hugging Face and llama.cpp "
        "caches), each read from its file's header",
    )
    p.add_argument(
        "--folder", type=Path, action="append", default=[], help="also look in this folder"
    )


def _detect_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.add_argument("--bandwidth", action="store_true", help="also measure RAM bandwidth")


def _calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--llama-bench", type=Path, metavar="PATH", help="llama-bench to use")
    p.add_argument(
        "--llama-python", type=Path, metavar="PATH", help="a Python that has llama-cpp-python"
    )
    p.add_argument(
        "--quants",
        type=_quant_list,
        default=None,
        help="quantizations to time (default: Q4_K_M,Q8_0,Q4_0)",
    )
    p.add_argument("--json", action="store_true")


def _gpus_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")


def _export_args(p: argparse.ArgumentParser) -> None:
    _add_model_args(p)
    p.add_argument("--format", choices=("html", "pdf", "md", "json"), default="html")
    p.add_argument("-o", "--output", type=Path, required=True)


def _reconcile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", type=Path, metavar="LOG")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--model", metavar="NAME", help="the model (default: the log's file)")
    source.add_argument("--model-file", metavar="PATH", type=Path)
    p.add_argument("--rig", metavar="RIG.json", type=Path, help="rig file (default: detect)")
    p.add_argument("--json", action="store_true")


def _schema_args(p: argparse.ArgumentParser) -> None:
    from rigspark_gui.cli_schema import SCHEMAS  # names only: no pydantic until one is printed

    p.add_argument(
        "name", nargs="?", choices=tuple(SCHEMAS), metavar="NAME", help="the format (see --list)"
    )
    p.add_argument("--list", action="store_true", help="list the formats (also with no NAME)")
    p.add_argument("--json", action="store_true", help="the list as JSON: name -> what it is")


# command -> (what `--help` says of it, its own description, the flags it takes)
_SUBCOMMANDS: dict[str, tuple[str, str | None, Callable[[argparse.ArgumentParser], None]]] = {
    "plan": ("every path's fit, shortfall and speed", None, _plan_args),
    "place": ("per-layer placement and per-device loads", None, _place_args),
    "rank": (
        "every catalog model on this rig: what fits, best first, and how fast",
        None,
        _rank_args,
    ),
    "models": ("list the catalog", None, _models_args),
    "detect": ("detect this machine and print the rig", None, _detect_args),
    "calibrate": (
        "time llama.cpp on this machine and use its speeds from now on",
        "Writes a small synthetic model, quantizes it, times llama.cpp on the CPU and each "
        "GPU, and keeps measured / predicted for later plans. Needs llama-bench (and "
        "llama-quantize) on PATH, or a Python with llama-cpp-python; installs nothing.",
        _calibrate_args,
    ),
    "gpus": ("list the GPU database", None, _gpus_args),
    "export": ("write a plan report (html, pdf, md, json)", None, _export_args),
    "reconcile": (
        "predicted vs actual: what llama.cpp allocated per device in its log, "
        "against RigSpark's plan for the same settings",
        "Reads a llama.cpp / llama-server / llama-cli load log, an Ollama server log or "
        "llama-bench output (text, JSON, CSV), plans the settings it shows and prints each "
        "buffer per device, predicted and actual, with why they differ.",
        _reconcile_args,
    ),
    "schema": (
        "print the JSON Schema of a file or output format",
        "Prints the JSON Schema of a file RigSpark reads or writes, or of a command's "
        "--json output (docs/formats.md). With --list, or no NAME, lists the names.",
        _schema_args,
    ),
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for `argv`: every command is listed, and only the one `argv` names gets
    its flags (building all of them is a tenth of a plan's start-up); with no command
    named, all of them."""
    parser = _Parser(prog=PROG, description="Will this LLM run on this machine, and how fast?")
    from rigspark_gui.identity import APP_VERSION

    parser.add_argument("--version", action="version", version=f"{PROG} {APP_VERSION}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    named = next((a for a in argv or () if not a.startswith("-")), None)
    everything = named not in _SUBCOMMANDS
    for name, (summary, description, add_args) in _SUBCOMMANDS.items():
        p = sub.add_parser(name, help=summary, description=description)
        if everything or name == named:
            add_args(p)
    return parser


# ---------------------------------------------------------------- inputs


def gpu_database() -> GpuDatabase | None:
    from rigspark_gui.catalog.gpu_database import load_gpu_database
    from rigspark_gui.resources import data_file

    path = data_file("gpus.json")
    if not path.exists():
        return None
    return load_gpu_database(path, lenient=True)


def load_model(args: argparse.Namespace) -> ModelSpec:
    if getattr(args, "model_url", None) is not None or (
        args.model is not None and args.model.startswith("hf:")
    ):
        return _remote_model(args)
    if args.model is not None:
        from rigspark_gui.catalog.models import resolve_model

        if args.model.split(":", 1)[0] in LOCAL_ID_PREFIXES:
            from rigspark_gui.catalog.local_models import find_by_id

            local = find_by_id(args.model)  # ollama:TAG and the other ids `models --local` prints
            if local is not None:
                return local
        found = resolve_model(args.model)
        if found.quant is not None and getattr(args, "quant", None) is None:
            # the quantization named in the model ("llama3.1:8b-instruct-q4_K_M")
            if found.quant in found.spec.available_quants:
                args.quant = found.quant
            else:
                _note(
                    f"{found.quant} (named in {args.model!r}) is not among "
                    f"{found.spec.id}'s quantizations here; planning the best that fits"
                )
        return found.spec
    path: Path = args.model_file
    from rigspark_gui.core.errors import ModelImportError

    if not path.exists():
        raise ModelImportError(f"no such model file: {path}")
    if path.is_file() and path.suffix.lower() == ".gguf":
        from rigspark_gui.catalog.gguf_import import import_gguf

        return import_gguf(path)
    if path.is_dir() or path.suffix.lower() == ".json":
        from rigspark_gui.catalog.hf_import import import_hf_config

        result = import_hf_config(path)
        return getattr(result, "spec", result)  # type: ignore[no-any-return]
    raise ModelImportError(f"{path.name}: expected a .gguf file, a config.json or its folder")


def _remote_model(args: argparse.Namespace) -> ModelSpec:
    """The one place the CLI uses the network: the user named a remote model."""
    from rigspark_gui.catalog.remote import model_from_hf, model_from_url
    from rigspark_gui.user_dirs import cache_dir

    def progress(text: str) -> None:
        print(f"{PROG}: {text}", file=sys.stderr, flush=True)

    cache = cache_dir()
    if args.model_url is not None:
        return model_from_url(args.model_url, cache, progress)
    return model_from_hf(args.model, cache, progress)


def load_rig_arg(args: argparse.Namespace) -> Rig:
    if args.rig is not None:
        from rigspark_gui.catalog.rig_file import load_rig

        return load_rig(args.rig, gpu_database)  # read only when the rig names GPUs
    db = gpu_database()
    from rigspark_gui.hardware.detect import detect, with_measured_bandwidth

    rig = detect(database=db, timeout_s=5.0)
    if rig.cpu.memory_bandwidth_gbps is None:
        # CPU speed rests on it: measure once (a few seconds), kept for later runs
        print(f"{PROG}: measuring this machine's RAM bandwidth (once)…", file=sys.stderr)
        rig, result = with_measured_bandwidth(rig)
        if result.busy:
            print(f"{PROG}: note: {result.reason}; the figure is not kept", file=sys.stderr)
    return rig


def settings_from(args: argparse.Namespace) -> PlanSettings:
    from rigspark_gui.core.model import kv_cache_type
    from rigspark_gui.core.settings import make_settings

    k = kv_cache_type(args.kv_k)
    v = kv_cache_type(args.kv_v) if args.kv_v else k
    # quantized V needs flash attention; otherwise off unless asked for
    fa = v.quantized if args.flash_attn is None else args.flash_attn == "on"
    extra: dict[str, object] = {}
    if args.min_speed is not None:
        extra["min_tok_s"] = args.min_speed
    return make_settings(
        context=args.context,
        kv_k=k,
        kv_v=v,
        flash_attn=fa,
        parallel=args.parallel,
        backend=args.backend,
        swa_full=args.swa_full,
        quant=args.quant,
        prompt_tokens=args.prompt_tokens,
        gpu_backend=args.gpu_backend,
        **extra,
        **_serving_values(args),
    )


def _serving_values(args: argparse.Namespace) -> dict[str, object]:
    """The serving-engine flags the user gave (settings refuse them for other engines)."""
    names = (
        "memory_utilization",
        "tensor_parallel",
        "pipeline_parallel",
        "max_num_seqs",
        "max_num_batched_tokens",
    )
    out: dict[str, object] = {n: getattr(args, n) for n in names if getattr(args, n, None)}
    if getattr(args, "cpu_offload_gb", 0):
        out["cpu_offload_gb"] = args.cpu_offload_gb
    return out


def _note(text: str) -> None:
    print(f"{PROG}: note: {text}", file=sys.stderr)


def _emit(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


# ---------------------------------------------------------------- commands


def cmd_plan(args: argparse.Namespace) -> int:
    from rigspark_gui.cli_speed import speed_model as load_perf
    from rigspark_gui.core.plan import plan

    spec = load_model(args)
    s = settings_from(args)
    rig = load_rig_arg(args)
    perf = load_perf()
    result = plan(spec, rig, s, perf, kv_pairs=args.kv_compare)
    from rigspark_gui.catalog.quality import load_quality
    from rigspark_gui.core.plan import suggest

    ideas = suggest(spec, rig, s, perf, load_quality())
    if args.json:
        data = jsonable(result)
        data["suggestions"] = [jsonable(i) for i in ideas]
        _emit(data)
    else:
        from rigspark_gui.report.text import format_plan, format_suggestions

        print(format_plan(result))
        if ideas:
            print(format_suggestions(ideas))
    return EXIT_FITS if result.recommended is not None else EXIT_NO_FIT


def cmd_place(args: argparse.Namespace) -> int:
    from rigspark_gui.cli_speed import speed_model as load_perf
    from rigspark_gui.core.memory import repack_for, weights_layout
    from rigspark_gui.core.placement import auto_place, device_loads
    from rigspark_gui.core.plan import plan
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
    quant = s.quant or next(
        (p.quant for p in base.paths if p.fits and p.quant), spec.available_quants[-1]
    )
    if args.ngl is not None or args.tensor_split is not None:
        placement = auto_place(spec.geometry, rig, s, ngl=args.ngl, tensor_split=args.tensor_split)
    else:
        assert base.placement is not None
        placement = base.placement
    layout = weights_layout(spec, quant)
    repack = repack_for(spec, quant, rig.cpu.features)
    loads = device_loads(placement, spec.geometry, layout, rig, s, cpu_repack=repack)
    decode = estimate_decode(placement, spec.geometry, layout, rig, s, perf)
    prefill = estimate_prefill(placement, spec.geometry, layout, rig, s, perf)
    fits = all(d.verdict.value != "over" for d in loads)
    from rigspark_gui.core.launch import launch_commands

    commands = launch_commands(placement, spec, quant, s, rig)
    if args.json:
        from rigspark_gui.core.plan import PLAN_SCHEMA_VERSION

        _emit(
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
        from rigspark_gui.core.units import speed_text

        print(f"{spec.name} at {quant}, {s.context} context")
        print(format_placement(placement))
        print()
        print(format_loads(loads))
        print()
        speed = speed_text(decode.tok_s, decode.low_tok_s, decode.high_tok_s)
        print(f"Decode: {speed} ({decode.basis})")
        print("Fits." if fits else "Does not fit: a device is overcommitted.")
        print()
        for c in commands:
            print(f"{c.engine.value}:")
            body = c.text if c.supported else f"cannot express this placement: {c.explanation}"
            print("  " + body.replace("\n", "\n  "))
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
    s = settings_from(args)
    rig = load_rig_arg(args)
    rows = rank_models(specs, rig, s, load_perf())
    if args.json:
        _emit(
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


def cmd_models(args: argparse.Namespace) -> int:
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
        _emit(
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
        _emit({"schema_version": 1, "models": rows, "skipped": skipped})
        return EXIT_FITS
    if not rows:
        print("No models found on this computer (Ollama, LM Studio, Hugging Face, llama.cpp).")
    for r in rows:
        print(
            f"{r['name']:<50} {r['store']:<18} {r['quant']:<8} {gib(r['size_bytes']):>10}  "
            f"{r['architecture']}"
        )
    return EXIT_FITS


def cmd_detect(args: argparse.Namespace) -> int:
    from rigspark_gui.hardware.detect import detect

    rig = detect(database=gpu_database(), timeout_s=5.0, probe_bandwidth=args.bandwidth)
    if args.json:
        from rigspark_gui.formats.rig import rig_json

        sys.stdout.write(rig_json(rig) + "\n")
        return EXIT_FITS
    from rigspark_gui.core.units import gib

    print(f"CPU: {rig.cpu.name} ({rig.cpu.cores or '?'} cores)")
    print(f"RAM: {gib(rig.ram_total_bytes)} total, {gib(rig.ram_usable_bytes)} usable")
    bw = rig.cpu.memory_bandwidth_gbps
    if bw:
        print(f"RAM bandwidth: {bw:.1f} GB/s ({rig.cpu.basis_of('memory_bandwidth_gbps').source})")
    else:
        print("RAM bandwidth: unknown (use --bandwidth)")
    if not rig.gpus:
        print("GPUs: none")
    for gpu in rig.gpus:
        mem = gib(gpu.memory_total_bytes) if gpu.memory_total_bytes else "unknown"
        bw_g = f"{gpu.bandwidth_gbps:.0f} GB/s" if gpu.bandwidth_gbps else "unknown"
        print(
            f"GPU {gpu.index}: {gpu.name}, {mem}, {bw_g} ({gpu.basis_of('bandwidth_gbps').basis})"
        )
    for note in rig.notes:
        print(f"Note: {note}")
    return EXIT_FITS


def cmd_calibrate(args: argparse.Namespace) -> int:
    from rigspark_gui.calibrate import (
        DEFAULT_QUANTS,
        find_runner,
        run_calibration,
        save_calibration,
    )
    from rigspark_gui.catalog.perf import load_perf
    from rigspark_gui.hardware.detect import detect, with_measured_bandwidth

    runner = find_runner(args.llama_bench, args.llama_python)
    rig = detect(database=gpu_database(), timeout_s=5.0)
    if rig.cpu.memory_bandwidth_gbps is None:
        rig, _ = with_measured_bandwidth(rig)

    def progress(step: int, steps: int, what: str) -> None:
        print(f"[{step}/{steps}] {what}", file=sys.stderr, flush=True)

    cal = run_calibration(
        rig, runner, load_perf(), quants=args.quants or DEFAULT_QUANTS, progress=progress
    )
    path = save_calibration(cal)
    if args.json:
        _emit({"schema_version": 1, "path": str(path), **jsonable(cal)})
        return EXIT_FITS
    from rigspark_gui.core.units import speed_text

    print(f"Calibrated with {cal.llama_cpp} ({cal.runner})")
    print(f"  {'device':<34} {'quant':<7} {'measured':>12} {'predicted':>12}  ratio")
    for r in cal.runs:
        ratio = f"{r.decode_ratio:.2f}" if r.decode_ratio else "-"
        print(
            f"  {r.device_name[:34]:<34} {r.quant:<7} {speed_text(r.measured_tok_s):>12} "
            f"{speed_text(r.predicted_tok_s):>12}  {ratio}"
        )
    print(f"Kept in {path}; plans on this machine use it from now on.")
    return EXIT_FITS


def cmd_gpus(args: argparse.Namespace) -> int:
    from rigspark_gui.core.errors import CatalogError

    db = gpu_database()
    if db is None:
        raise CatalogError("the GPU database (data/gpus.json) is missing")
    if args.json:
        _emit({"schema_version": 1, "gpus": [jsonable(g) for g in db.gpus]})
        return EXIT_FITS
    for g in db.gpus:
        tf = f"{g.fp16_tflops:g} TFLOPS" if g.fp16_tflops else "TFLOPS unknown"
        print(
            f"{g.name:<40} {g.vendor.value:<7} {g.memory_bytes / (1 << 30):6.0f} GiB "
            f"{g.memory_bandwidth_gbps:7.0f} GB/s  {tf}"
        )
    return EXIT_FITS


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
        _emit({"schema_version": 1, **data})
    else:
        print(format_reconciliation(result))
    return EXIT_FITS


def cmd_schema(args: argparse.Namespace) -> int:
    from rigspark_gui.cli_schema import SCHEMAS

    if args.name is not None and not args.list:
        _emit(SCHEMAS[args.name]())
    elif args.json:
        _emit({name: schema.about for name, schema in SCHEMAS.items()})
    else:
        width = max(map(len, SCHEMAS))
        for name, schema in SCHEMAS.items():
            print(f"{name:<{width}}  {schema.about}")
    return EXIT_FITS


COMMANDS = {
    "reconcile": cmd_reconcile,
    "plan": cmd_plan,
    "place": cmd_place,
    "rank": cmd_rank,
    "models": cmd_models,
    "detect": cmd_detect,
    "gpus": cmd_gpus,
    "calibrate": cmd_calibrate,
    "export": cmd_export,
    "schema": cmd_schema,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(argv).parse_args(argv)
        return COMMANDS[args.command](args)
    except UsageError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FITS
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:  # one line, never a traceback
        from rigspark_gui.core.errors import RigSparkError

        if isinstance(err, RigSparkError):
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print(f"{PROG}: internal error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
