"""Regenerate (or check) the README's example blocks from what `rigspark-plan` prints.

Each block the README shows output in follows a marker line
`<!-- readme-example: NAME -->`; NAME is one of EXAMPLES below: the command it runs and
the lines of its output the README keeps (an excerpt: "…" marks what is left out). The
prose around the blocks is the README's own and is never touched.

The commands run in this process against the repository's example rigs, with a private,
empty user cache (no local calibration or measured bandwidth changes a figure).

Run: .venv/bin/python scripts/readme_examples.py          (rewrite the blocks)
     .venv/bin/python scripts/readme_examples.py --check  (exit 1 and show a diff if stale)
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MARKER = re.compile(r"^<!-- readme-example: ([\w-]+) -->$")
WIDTH = 92  # the longest line a wrapped command or JSON object gets
ELIDED = "…"


class Example(NamedTuple):
    argv: tuple[str, ...]
    # the README's excerpt of the output
    pick: Callable[[str], list[str]]
    # show the `$ rigspark-plan …` line above the excerpt
    prompt: bool = True


# ---------------------------------------------------------------- excerpts of plan's text


def _plan_parts(text: str) -> tuple[list[str], list[str], list[str]]:
    """(path lines, the recommendation and its indented lines, the rest) of `plan`."""
    lines = text.splitlines()
    i = 2  # the title and a blank line
    # the notes, the engine's defaults and llama.cpp's fit: a paragraph each
    while i < len(lines) and lines[i].startswith(("Note:", "Engine defaults", "As llama.cpp")):
        while lines[i]:
            i += 1
        i += 1
    start = i
    while i < len(lines) and lines[i]:
        i += 1
    paths = lines[start:i]
    i += 1
    rec_start = i
    i += 1
    while i < len(lines) and lines[i].startswith("  "):
        i += 1
    return paths, lines[rec_start:i], lines[i:]


def paths_and_recommendation(text: str) -> list[str]:
    paths, rec, _ = _plan_parts(text)
    return [*paths, "", *(line for line in rec if not line.startswith("  Fits on this path"))]


def recommended_and_ladder(text: str, rungs: int = 4) -> list[str]:
    """The recommended path's line and the first rungs of its ladder."""
    paths, rec, _ = _plan_parts(text)
    (chosen,) = [line for line in paths if line.endswith("<- recommended")]
    (ladder,) = [x for x in rec if x.startswith("  Fits on this path: ")]
    head, _, rest = ladder.partition(": ")
    shown = rest.split(", ")
    if len(shown) > rungs:
        shown = [*shown[:rungs], ELIDED]
    return [chosen, f"  {ELIDED}", f"{head}: {', '.join(shown)}"]


def paths_and_devices(text: str) -> list[str]:
    """The path lines and the per-device table (a hybrid model's state has its column)."""
    paths, _, rest = _plan_parts(text)
    start = next(i for i, line in enumerate(rest) if line.startswith("Per device:"))
    end = rest.index("", start) if "" in rest[start:] else len(rest)
    return [*paths, "", *rest[start:end]]


def paths_and_serving(text: str) -> list[str]:
    paths, _, rest = _plan_parts(text)
    serving = [x for x in rest if x.startswith(("vLLM:", "SGLang:", "  KV pool"))]
    return [*paths, *serving]


def llama_cpp_command(text: str) -> list[str]:
    """The llama.cpp launch line `place` prints, wrapped as a shell command."""
    lines = text.splitlines()
    command = lines[lines.index("llama.cpp:") + 1].strip()
    return wrap_command(command)


def wrap_command(command: str, width: int = WIDTH) -> list[str]:
    out: list[str] = []
    line = ""
    for word in shlex.split(command):
        word = shlex.quote(word) if "=" not in word else word
        if line and len(line) + 1 + len(word) + 2 > width:
            out.append(line + " \\")
            line = "  " + word
        else:
            line = f"{line} {word}" if line else word
    return [*out, line]


# ---------------------------------------------------------------- an excerpt of plan's JSON


def _first(items: Sequence[Any], keep: Callable[[Any], Any] = lambda x: x) -> list[Any]:
    return [keep(items[0]), ...] if len(items) > 1 else [keep(x) for x in items]


def _only(d: dict[str, Any], keys: Sequence[str], more: bool = True) -> dict[str, Any]:
    out = {k: d[k] for k in keys}
    if more and set(d) - set(keys):
        out[ELIDED] = ...
    return out


def _clip(text: str, words: int) -> str:
    cut = text.split()
    return " ".join(cut[:words]) + f" {ELIDED}" if len(cut) > words else text


def _round(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


PATH_KEYS = ("path", "fits", "quant", "required_bytes", "usable_bytes", "shortfall_bytes",
             "reason", "gpu_count", "ngl")  # fmt: skip


def json_excerpt(text: str) -> list[str]:
    """The plan JSON's shape, its first path and device load shown, the rest elided."""
    data = json.loads(text)

    def path(p: dict[str, Any]) -> dict[str, Any]:
        out = _only(p, PATH_KEYS, more=False)
        t = p["throughput"]
        out["throughput"] = {
            **{k: _round(t[k]) for k in ("tok_s", "low_tok_s", "high_tok_s", "known")},
            "limiting_device": t["limiting_device"],
            "basis": _clip(t["basis"], 6),
        }
        prefill = {k: _round(v) for k, v in p["prefill"].items()}
        out["prefill"] = _only(prefill, ("prompt_tokens", "seconds"))
        out["ladder"] = _first(p["ladder"], lambda r: _only(r, ("quant", "required_bytes")))
        out["quality"] = _only(p["quality"], ("quant", "kld", "words"))
        out[ELIDED] = ...
        return out

    excerpt = {
        "schema_version": data["schema_version"],
        "model_id": data["model_id"],
        "recommended": data["recommended"],
        "paths": _first(data["paths"], path),
        "placement": {
            "units": _first(data["placement"]["units"], lambda u: _only(u, ("unit", "device")))
        },
        "device_loads": _first(data["device_loads"]),
        "kv_comparison": _first(
            data["kv_comparison"], lambda r: _only(r, ("kv_k", "kv_v", "bytes_per_token"))
        ),
        ELIDED: ...,
    }
    return render_json(excerpt).splitlines()


def _inline(value: Any) -> str:
    if value is ...:
        return ELIDED
    if isinstance(value, dict):
        items = (
            ELIDED if k == ELIDED else f"{json.dumps(k)}: {_inline(v)}" for k, v in value.items()
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def render_json(value: Any, column: int = 0) -> str:
    """JSON laid out to the README's width: a value on one line when it fits, else its
    items one a line (as many to a line as fit), aligned under the opening bracket."""
    one = _inline(value)
    if column + len(one) <= WIDTH or not isinstance(value, dict | list):
        return one
    if isinstance(value, list):
        parts = [render_json(v, column + 1) for v in value]
        return "[" + f",\n{' ' * (column + 1)}".join(parts) + "]"
    lines: list[str] = []
    line = ""
    for k, v in value.items():
        if k == ELIDED:
            item = ELIDED
        else:
            key = f"{json.dumps(k)}: "
            item = key + render_json(v, column + 1 + len(key))
        if "\n" not in item and line and column + 1 + len(line) + 2 + len(item) <= WIDTH:
            line += ", " + item
            continue
        if line:
            lines.append(line)
        line = item
    lines.append(line)
    return "{" + f",\n{' ' * (column + 1)}".join(lines) + "}"


# ---------------------------------------------------------------- the examples

RIG = "examples/rig-2x3090.json"
LLAMA_70B = ("--model", "llama-3.3-70b-instruct", "--rig", RIG, "--context", "32k")


# fmt: off
def engine_defaults(text: str) -> list[str]:
    """The title, the engine's defaults the plan took and llama.cpp's fit, then "…"."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Engine defaults"))
    end = start
    while end < len(lines) and lines[end]:
        end += 1
    return [lines[0], "", *lines[start:end], ELIDED]


EXAMPLES: dict[str, Example] = {
    "plan-70b-defaults": Example(
        ("plan", "--model", "llama-3.3-70b-instruct", "--rig", RIG, "--kv-compare", "none"),
        engine_defaults,
    ),
    "plan-70b": Example(("plan", *LLAMA_70B), paths_and_recommendation),
    "plan-qwen36": Example(
        ("plan", "--model", "qwen3.6:27b", "--rig", RIG, "--kv-compare", "none"),
        paths_and_devices,
    ),
    "plan-70b-q8": Example(("plan", *LLAMA_70B, "--kv-k", "q8_0"), recommended_and_ladder),
    "place-70b-q8": Example(
        ("place", *LLAMA_70B, "--kv-k", "q8_0"), llama_cpp_command, prompt=False
    ),
    "plan-vllm": Example(
        ("plan", "--model", "llama-3.1-8b-instruct", "--rig", RIG, "--backend", "vllm",
         "--context", "131072", "--quant", "BF16"),
        paths_and_serving,
    ),
    "plan-json": Example(
        ("plan", "--model", "qwen2.5-7b-instruct", "--rig", RIG, "--json"),
        json_excerpt,
        prompt=False,
    ),
}
# fmt: on


@contextlib.contextmanager
def _private_cache() -> Iterator[None]:
    """No calibration or measured bandwidth of this machine leaks into the examples."""
    saved = os.environ.get("RIGSPARK_CACHE_DIR")
    with tempfile.TemporaryDirectory() as folder:
        os.environ["RIGSPARK_CACHE_DIR"] = folder
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("RIGSPARK_CACHE_DIR", None)
            else:
                os.environ["RIGSPARK_CACHE_DIR"] = saved


def run(argv: Sequence[str]) -> str:
    """What `rigspark-plan ARGV` prints, run here from the repository's root."""
    from rigspark_gui.cli import main

    out, err = io.StringIO(), io.StringIO()
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    finally:
        os.chdir(cwd)
    if code not in (0, 1):
        raise RuntimeError(f"rigspark-plan {' '.join(argv)} exited {code}: {err.getvalue()}")
    return out.getvalue()


def block(name: str) -> list[str]:
    """The lines of example NAME's code block, between its fences."""
    example = EXAMPLES[name]
    with _private_cache():
        lines = example.pick(run(example.argv))
    if example.prompt:
        lines = [f"$ rigspark-plan {shlex.join(example.argv)}", *lines]
    return [line.rstrip() for line in lines]


def regenerate(readme: str) -> str:
    """The README with every marked block replaced by what the program prints now."""
    lines = readme.split("\n")
    out: list[str] = []
    i = 0
    seen: set[str] = set()
    while i < len(lines):
        out.append(lines[i])
        m = MARKER.match(lines[i].strip())
        i += 1
        if not m:
            continue
        name = m.group(1)
        if name not in EXAMPLES:
            raise SystemExit(f"README.md: unknown example {name!r} (known: {', '.join(EXAMPLES)})")
        if i >= len(lines) or not lines[i].startswith("```"):
            raise SystemExit(f"README.md: the marker for {name!r} is not followed by a fence")
        out.append(lines[i])
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise SystemExit(f"README.md: the block of {name!r} is not closed")
        out += block(name)
        out.append(lines[end])
        i = end + 1
        seen.add(name)
    missing = set(EXAMPLES) - seen
    if missing:
        raise SystemExit(f"README.md: no marker for {', '.join(sorted(missing))}")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a block is stale")
    args = parser.parse_args(argv)
    old = README.read_text(encoding="utf-8")
    new = regenerate(old)
    if args.check:
        if new != old:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), "README.md", "regenerated"
                )
            )
            print("\nREADME.md examples are stale: run scripts/readme_examples.py")
            return 1
        return 0
    if new != old:
        README.write_text(new, encoding="utf-8")
        print("README.md: examples regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
