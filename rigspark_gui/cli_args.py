"""`rigspark-plan`'s command line: the argument parser, the argparse types that check
each value, and per command the flags it takes. `build_parser` builds only the named
command's flags (building all of them is a tenth of a plan's start-up)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from rigspark_gui.cli_base import PROG, UsageError
from rigspark_gui.cli_beside_args import add_draft_args, add_projector_args


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


# ---------------------------------------------------------------- value types


def _context(text: str) -> int:
    from rigspark_gui.core.units import parse_token_count

    n = parse_token_count(text)
    if n is None:
        raise argparse.ArgumentTypeError(f"not a token count: {text!r}")
    if not 1 <= n <= 1 << 24:
        raise argparse.ArgumentTypeError(f"context must be between 1 and 16M tokens, got {text}")
    return n


def _context_or_auto(text: str) -> int | str:
    return "auto" if text.strip().lower() == "auto" else _context(text)


def _positive_or_auto(text: str) -> int | str:
    return "auto" if text.strip().lower() == "auto" else _positive(text)


def _mib_list(text: str) -> tuple[int, ...]:
    """-fitt: MiB, or one per device separated by commas."""
    return tuple(_non_negative(part) for part in text.replace("/", ",").split(","))


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    from rigspark_gui.catalog.remote_header import MAX_TIMEOUT_S  # the limit remote.py checks

    if not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and at most {MAX_TIMEOUT_S}, got {text}"
        )
    return value


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
# Named in --help (the whole list would fill a screen; a wrong name gets the model's own),
# checked against llama-quantize's types by tests/cli/test_newcomer_cli.py.
QUANT_EXAMPLES = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "IQ4_XS", "Q3_K_M", "IQ2_M", "BF16")
# KvCacheType's llama.cpp members, in its order (the test pins it).
KV_TYPES = ("f16", "bf16", "f32", "q8_0", "q5_1", "q5_0", "q4_1", "iq4_nl", "q4_0")
BACKENDS = ("llama.cpp", "ollama", "lm-studio", "koboldcpp", "vllm", "sglang", "mlx")


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


# ---------------------------------------------------------------- each command's flags


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
    p.add_argument(
        "--network-timeout",
        metavar="SECONDS",
        type=_seconds,
        help="the time limit of a remote model's whole read (--model-url, hf:REPO), "
        "retries and redirects included (default: $RIGSPARK_NETWORK_TIMEOUT or 30)",
    )
    p.add_argument(
        "--quant",
        metavar="TYPE",
        help="fixed quantization: a llama-quantize type such as "
        f"{', '.join(QUANT_EXAMPLES)} (a type the model lacks is answered with the model's "
        "own list). Default: Auto, the best quality that fits and reaches --min-speed",
    )
    add_projector_args(p)
    add_draft_args(p)
    _add_setting_args(p)


def _add_setting_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rig", metavar="RIG.json", type=Path, help="rig file (default: detect this machine)"
    )
    p.add_argument(
        "--context",
        type=_context_or_auto,
        default="auto",
        metavar="TOKENS",
        help="context length, e.g. 8192, 32k or 128K; auto: the engine's own (llama.cpp: "
        "the trained context, shrunk by --fit; default: %(default)s)",
    )
    p.add_argument(
        "--kv-k",
        default="f16",
        metavar="TYPE",
        help=f"K cache type: {', '.join(KV_TYPES)}; fp8 for vLLM/SGLang (default: %(default)s)",
    )
    p.add_argument(
        "--kv-v",
        default=None,
        metavar="TYPE",
        help="V cache type, the same names (default: as --kv-k; a quantized V needs flash "
        "attention)",
    )
    p.add_argument(
        "--flash-attn",
        choices=("auto", "on", "off"),
        default="auto",
        help="llama.cpp -fa; auto: on where every device holding KV runs it (default: %(default)s)",
    )
    p.add_argument(
        "--parallel",
        type=_positive_or_auto,
        default="auto",
        metavar="N",
        help="sequences served at once, llama.cpp -np; auto: the engine's (llama-server: "
        "4 slots on one unified KV cache; default: %(default)s)",
    )
    p.add_argument(
        "--kv-unified",
        action="store_true",
        help="the sequences share one KV cache, llama.cpp -kvu (default: off; auto slots "
        "share one already)",
    )
    fit = p.add_argument_group("llama.cpp's --fit")
    fit.add_argument(
        "--fit", choices=("on", "off"), default="on", help="llama.cpp --fit (default: on)"
    )
    fit.add_argument(
        "--fit-target",
        type=_mib_list,
        default=None,
        metavar="MIB[,MIB...]",
        help="MiB fit keeps free per device, one value for all or one per device (default: 1024)",
    )
    fit.add_argument(
        "--fit-ctx",
        type=_positive,
        default=None,
        metavar="N",
        help="the smallest context fit may shrink to (default: 4096)",
    )
    p.add_argument(
        "--backend",
        default="llama.cpp",
        choices=BACKENDS,
        metavar="ENGINE",
        help=f"the engine that runs it: {', '.join(BACKENDS)} (default: %(default)s)",
    )
    serving = p.add_argument_group("serving engines (--backend vllm or sglang)")
    serving.add_argument(
        "--memory-utilization",
        type=_fraction,
        metavar="F",
        help="vLLM --gpu-memory-utilization / SGLang --mem-fraction-static (default: theirs)",
    )
    serving.add_argument(
        "--tensor-parallel",
        type=_positive,
        metavar="N",
        help="tensor-parallel size (default: chosen per path from its GPUs and the heads)",
    )
    serving.add_argument(
        "--pipeline-parallel",
        type=_positive,
        metavar="N",
        help="pipeline stages (default: the path's GPUs left over, one stage per host)",
    )
    serving.add_argument(
        "--max-num-seqs",
        type=_positive,
        metavar="N",
        help="requests batched at once (default: the engine's)",
    )
    serving.add_argument(
        "--max-num-batched-tokens",
        type=_positive,
        metavar="N",
        help="tokens per step (default: the engine's)",
    )
    serving.add_argument(
        "--cpu-offload-gb",
        type=_gb,
        metavar="GB",
        default=0.0,
        help="vLLM weights kept in RAM (default: 0)",
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
        help="Auto: best quality reaching this decode speed (default: 8; 0 = best that fits)",
    )
    p.add_argument(
        "--swa-full",
        action="store_true",
        help="full-size sliding-window caches, llama.cpp --swa-full (default: off)",
    )
    p.add_argument(
        "--mmap",
        action=argparse.BooleanOptionalAction,
        help="--no-mmap: read the weights in (llama.cpp --load-mode none; --no-mmap before "
        "b11434; koboldcpp without --usemmap; Ollama use_mmap false) (default: llama.cpp "
        "reads in where the CPU repacks weights, else maps; the others load their own way)",
    )
    p.add_argument(
        "--no-repack", action="store_true", help="llama.cpp --no-repack (default: repacked)"
    )
    p.add_argument(
        "--prompt-tokens",
        type=_positive,
        default=1024,
        metavar="N",
        help="prompt length the prefill time is estimated for (default: %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _plan_args(p: argparse.ArgumentParser) -> None:
    _add_model_args(p)
    p.add_argument(
        "--kv-compare",
        choices=("none", "common", "all"),
        default="common",
        help="KV precision comparison rows (default: %(default)s pairs)",
    )


def _place_args(p: argparse.ArgumentParser) -> None:
    _add_model_args(p)
    p.add_argument(
        "--ngl",
        type=_non_negative,
        metavar="N",
        help="llama.cpp -ngl (default: the plan's placement)",
    )
    p.add_argument(
        "--tensor-split",
        type=_split,
        metavar="X,Y",
        help="llama.cpp --tensor-split, e.g. 3,1 (default: by free memory)",
    )


def _rank_args(p: argparse.ArgumentParser) -> None:
    _add_setting_args(p)
    p.add_argument(
        "--text-only",
        "--no-mmproj",
        dest="text_only",
        action="store_true",
        help="rank vision models without their projector (default: off, as llama-server "
        "-hf and Ollama load it)",
    )
    p.add_argument("--family", help="only this family, by a part of its name (default: all)")
    p.set_defaults(quant=None)


def _models_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.add_argument("--family", help="only this family, by a part of its name (default: all)")
    p.add_argument(
        "--local",
        action="store_true",
        help="the models on this computer (Ollama, LM Studio, Hugging Face and llama.cpp "
        "caches), each read from its file's header",
    )
    p.add_argument(
        "--folder", type=Path, action="append", default=[], help="also look in this folder"
    )
    p.add_argument(
        "--update",
        action="store_true",
        help="read the config.json and GGUF listings of a curated list of Hugging Face "
        "repositories into the user cache and add the models they give (network)",
    )
    p.add_argument(
        "--network-timeout",
        metavar="SECONDS",
        type=_seconds,
        help="with --update: the time limit of each repository's read (default: 30)",
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
    p.add_argument(
        "--format",
        choices=("html", "pdf", "md", "json"),
        default="html",
        help="report format (default: %(default)s)",
    )
    p.add_argument("-o", "--output", type=Path, required=True)


def _reconcile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", type=Path, metavar="LOG")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--model", metavar="NAME", help="the model (default: the log's file)")
    source.add_argument("--model-file", metavar="PATH", type=Path)
    p.add_argument("--rig", metavar="RIG.json", type=Path, help="rig file (default: detect)")
    p.add_argument("--json", action="store_true")


def _fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rig", metavar="RIG.json", type=Path, help="rig file (default: detect)")
    p.add_argument("--json", action="store_true", help="the fit object as JSON")
    p.add_argument(
        "command_line",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="a llama-server, llama-cli or llama-fit-params command line, after --",
    )


def _schema_args(p: argparse.ArgumentParser) -> None:
    from rigspark_gui.cli_schema import SCHEMAS  # names only: no pydantic until one is printed

    p.add_argument(
        "name", nargs="?", choices=tuple(SCHEMAS), metavar="NAME", help="the format (see --list)"
    )
    p.add_argument("--list", action="store_true", help="list the formats (also with no NAME)")
    p.add_argument("--json", action="store_true", help="the list as JSON: name -> what it is")


# command -> (what `--help` says of it, its own description, the flags it takes)
SUBCOMMANDS: dict[str, tuple[str, str | None, Callable[[argparse.ArgumentParser], None]]] = {
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
    "fit": (
        "what llama.cpp's --fit does with a command line",
        "Takes a llama-server, llama-cli or llama-fit-params command line as llama.cpp "
        "spells it (after --) and prints what llama.cpp's --fit would set, in the form "
        'llama-fit-params prints: -c N -ngl N [-ts ...] [-ot "..."]. --rpc addresses name '
        "the rig's hosts.",
        _fit_args,
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
    everything = named not in SUBCOMMANDS
    for name, (summary, description, add_args) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=summary, description=description)
        if everything or name == named:
            add_args(p)
    return parser
