"""The CLI as a newcomer meets it: `plan` and `place` give one verdict for the same
inputs, the text people read is short and says its defaults, parameter counts round
the way people write them, and the README's examples are what the program prints."""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rigspark_gui.cli import main
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import HEADROOM, placement_fit
from rigspark_gui.core.plan import plan
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import make_settings

ROOT = Path(__file__).resolve().parents[2]
GB = 1_000_000_000


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    return code, out


def write_rig(folder: Path, name: str, **fields: object) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"schema_version": 1, "name": name, **fields}), encoding="utf-8")
    return path


# The user's machine: 2 cores, 24 GB of RAM, no GPU; what the OS and the open apps leave
# (ram_available_bytes, as `detect` reads it) is 14 GB.
LAPTOP_24GB = {
    "gpus": [],
    "ram_total_bytes": 24 * GB,
    "ram_available_bytes": 14 * GB,
    "cpu": {"name": "2-core laptop CPU", "cores": 2, "memory_bandwidth_gbps": 25.6},
    "unified_memory": False,
}

RIGS: dict[str, dict[str, object]] = {
    "laptop-24gb": LAPTOP_24GB,
    "desktop-24gb": {**LAPTOP_24GB, "ram_available_bytes": None},
    "rtx3060": {
        "gpus": [{"name": "NVIDIA GeForce RTX 3060"}],
        "ram_total_bytes": 32 * GIB,
        "cpu": {"name": "Ryzen 5 5600", "cores": 6, "memory_bandwidth_gbps": 51.2},
    },
    "apple-m2-max": {
        "gpus": [
            {
                "name": "Apple M2 Max",
                "vendor": "apple",
                "unified": True,
                "memory_total_bytes": 24 * GIB,
                "bandwidth_gbps": 400.0,
            }
        ],
        "ram_total_bytes": 32 * GIB,
        "cpu": {"name": "Apple M2 Max", "cores": 12, "memory_bandwidth_gbps": 400.0},
        "unified_memory": True,
    },
}


def _rig_path(tmp_path: Path, rig: str) -> Path:
    if rig == "2x3090":
        return ROOT / "examples" / "rig-2x3090.json"
    fields = {k: v for k, v in RIGS[rig].items() if v is not None}
    return write_rig(tmp_path, rig, **fields)


def _plan_and_place(
    capsys: pytest.CaptureFixture[str], model: str, rig: Path, *flags: str
) -> tuple[dict[str, object], dict[str, object], int, int]:
    args = ("--model", model, "--rig", str(rig), *flags, "--json")
    plan_code, plan_out = cli(capsys, "plan", *args, "--kv-compare", "none")
    place_code, place_out = cli(capsys, "place", *args)
    return json.loads(plan_out), json.loads(place_out), plan_code, place_code


def _shown(planned: dict[str, object]) -> dict[str, object]:
    """The path whose placement the plan shows: the recommended one, else the nearest."""
    paths = planned["paths"]
    assert isinstance(paths, list)
    rec = planned["recommended"]
    return next((p for p in paths if p["path"] == rec), paths[0])


def test_gpt_oss_20b_on_a_24gb_laptop_without_gpu_gets_one_verdict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The user's case: `plan` said "does not fit, needs 0.1 GiB more" (exit 1) while
    `place` said "Fits" (fits: true): the 5 % kept free counted for one and not the
    other. Both now apply it: one verdict, one exit code, on every surface."""
    rig = write_rig(tmp_path, "laptop-24gb", **LAPTOP_24GB)
    # as the user ran it: 8K context, flash attention off, one sequence
    old = ("--context", "8192", "--flash-attn", "off", "--parallel", "1")
    planned, placed, plan_code, place_code = _plan_and_place(capsys, "gpt-oss-20b", rig, *old)
    path = _shown(planned)
    assert path["fits"] is False and placed["fits"] is False
    assert plan_code == place_code == 1
    # it is the band the two disagreed in: under the capacity, inside the 5 % kept free
    (cpu,) = placed["device_loads"]
    assert cpu["total_bytes"] <= cpu["capacity_bytes"]
    assert cpu["verdict"] == "over"
    assert placed["quant"] == path["quant"] == "MXFP4"

    # the words agree too
    _, plan_text = cli(capsys, "plan", "--model", "gpt-oss-20b", "--rig", str(rig), *old)
    _, place_text = cli(capsys, "place", "--model", "gpt-oss-20b", "--rig", str(rig), *old)
    need = f"needs {path['shortfall_bytes'] / GIB:.1f} GiB more usable memory"
    assert need == "needs 0.1 GiB more usable memory"  # what the user saw
    assert f"does not fit at MXFP4; {need}" in plan_text
    assert f"Does not fit: {need}" in place_text
    assert "Fits." not in place_text
    assert "5% of each device's is kept free" in place_text
    # the per-device tables say why a device short of its capacity is over
    for text in (plan_text, place_text):
        assert "(over: past 95% of capacity less reserve; 5% is kept free)" in text


@pytest.mark.parametrize(
    ("model", "rig", "flags"),
    [
        ("gpt-oss-20b", "laptop-24gb", ()),
        ("gpt-oss-20b", "desktop-24gb", ()),
        ("gpt-oss-20b", "desktop-24gb", ("--context", "64k")),
        ("llama-3.1-8b-instruct", "laptop-24gb", ("--context", "32k")),
        ("llama-3.1-8b-instruct", "rtx3060", ("--context", "32k")),
        ("llama-3.1-8b-instruct", "2x3090", ("--context", "256k")),  # past its trained 128K
        ("gemma-3-1b-it", "laptop-24gb", ()),
        ("qwen3-30b-a3b", "rtx3060", ()),
        ("qwen3-30b-a3b", "apple-m2-max", ("--context", "32k")),
        ("llama-3.3-70b-instruct", "2x3090", ("--context", "32k")),
        ("llama-3.3-70b-instruct", "2x3090", ("--context", "32k", "--kv-k", "q8_0")),
        ("llama-3.3-70b-instruct", "apple-m2-max", ()),
        ("llama-3.3-70b-instruct", "rtx3060", ("--quant", "Q4_K_M")),
    ],
)
def test_plan_and_place_agree(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    model: str,
    rig: str,
    flags: tuple[str, ...],
) -> None:
    """`plan --json` paths[recommended or nearest].fits is `place --json` fits, for the
    same inputs, with the same quantization, and both exit alike."""
    planned, placed, plan_code, place_code = _plan_and_place(
        capsys, model, _rig_path(tmp_path, rig), *flags
    )
    path = _shown(planned)
    assert placed["fits"] is path["fits"]
    assert placed["quant"] == path["quant"]
    assert placed["placement"] == planned["placement"]
    assert placed["device_loads"] == planned["device_loads"]
    assert place_code == plan_code


# MoE with MXFP4, dense, sliding-window, MoE
DRAWN_MODELS = ("gpt-oss-20b", "llama-3.1-8b-instruct", "gemma-3-4b-it", "qwen3-30b-a3b")


@cache
def _catalog_specs() -> dict[str, ModelSpec]:
    from rigspark_gui.catalog.models import resolve_model

    return {n: resolve_model(n).spec for n in DRAWN_MODELS}


@cache
def _perf():  # type: ignore[no-untyped-def]
    from rigspark_gui.catalog.perf import load_perf

    return load_perf()


@st.composite
def rigs(draw: st.DrawFn) -> Rig:
    ram = draw(st.integers(4, 512)) * GIB // 4
    n_gpus = draw(st.integers(0, 2))
    unified = n_gpus == 1 and draw(st.booleans())
    gpus = tuple(
        Gpu(
            name="Apple M2 Max" if unified else f"GPU {i}",
            vendor=Vendor.APPLE if unified else Vendor.NVIDIA,
            index=i,
            unified=unified,
            memory_total_bytes=draw(st.integers(4, 192)) * GIB // 4,
            bandwidth_gbps=400.0,
            fp16_tflops=30.0,
        )
        for i in range(n_gpus)
    )
    available = draw(st.one_of(st.none(), st.integers(1, 100)))
    return Rig(
        name="drawn",
        gpus=gpus,
        ram_total_bytes=ram,
        ram_available_bytes=None if available is None else ram * available // 100,
        cpu=Cpu(name="CPU", cores=draw(st.integers(2, 16)), memory_bandwidth_gbps=50.0),
        unified_memory=unified,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(
        ("gpt-oss-20b", "llama-3.1-8b-instruct", "gemma-3-4b-it", "qwen3-30b-a3b")
    ),
    rig=rigs(),
    context=st.sampled_from((2048, 8192, 32768, 131072, 262144)),
    kv=st.sampled_from(("f16", "q8_0")),
)
def test_place_says_of_the_plans_placement_what_the_plan_says(
    model: str, rig: Rig, context: int, kv: str
) -> None:
    """For any placement the plan shows (recommended, else the nearest path's), the rule
    `place` and the window apply to its device loads gives the plan's own verdict."""
    spec = _catalog_specs()[model]
    s = make_settings(context=context, kv_k=kv, kv_v=kv, flash_attn=kv != "f16")
    p = plan(spec, rig, s, _perf(), ladders=False)
    shown = next((x for x in p.paths if x.path is p.recommended), p.paths[0])
    fit = placement_fit(p.device_loads, rig)
    event(f"{shown.path.value}: {'fits' if shown.fits else 'does not fit'}")
    assert (fit.fits and context <= spec.geometry.context_length) is shown.fits
    if shown.fits:
        assert all(d.verdict.value != "over" for d in p.device_loads if d.units)
    elif shown.shortfall_bytes is not None:
        assert fit.shortfall_bytes == shown.shortfall_bytes


def test_the_rule_keeps_the_headroom_free() -> None:
    from rigspark_gui.core.placement import Verdict, fits_within, load_verdict, shortfall_bytes

    usable = 100 * GIB
    edge = int(usable * (1 - HEADROOM))
    assert fits_within(edge, usable) and not fits_within(edge + 1, usable)
    assert load_verdict(edge, usable) is Verdict.TIGHT
    assert load_verdict(edge + 1, usable) is Verdict.OVER
    assert load_verdict(usable // 2, usable) is Verdict.FITS
    assert shortfall_bytes(edge, usable) == 0 and shortfall_bytes(edge + 1, usable) > 0


# ---------------------------------------------------------------- text for people


def test_the_quality_line_is_short_and_the_json_keeps_the_source(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The "Quality:" line carried a 350-character provenance; the screen gets one short
    basis, the JSON (and the report) the whole of it."""
    rig = str(ROOT / "examples" / "rig-cpu-only.json")
    args = ("plan", "--model", "llama-3.1-8b-instruct", "--rig", rig, "--kv-compare", "none")
    _, text = cli(capsys, *args)
    (line,) = [x for x in text.splitlines() if x.lstrip().startswith("Quality:")]
    assert len(line) <= 130, line
    assert "measured on Llama 3 8B" in line and "source in --json" in line
    assert "README.md" not in line and "@" not in line
    _, out = cli(capsys, *args, "--json")
    rec = _shown(json.loads(out))
    assert "tools/perplexity/README.md" in rec["quality"]["basis"]
    assert len(rec["quality"]["basis"]) > 200


def test_a_reference_quality_keeps_its_whole_basis() -> None:
    from rigspark_gui.report.text import short_basis

    assert short_basis("16/32-bit: the reference") == "16/32-bit: the reference"
    long = "measured on X (source A (B)); caveat"
    assert short_basis(long) == "measured on X; source in --json"


@pytest.mark.parametrize("command", ["plan", "place", "rank", "export"])
def test_help_names_every_default(capsys: pytest.CaptureFixture[str], command: str) -> None:
    """`plan --help` named no defaults; each option that has one now says it."""
    from rigspark_gui.cli_args import build_parser

    parser = build_parser([command])
    sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    no_default = {"-h", "--json", "--model", "--model-file", "--model-url", "--output"}
    for action in sub._actions:
        flag = max(action.option_strings, key=len, default="")
        if not flag or flag in no_default or action.option_strings[0] in no_default:
            continue
        assert action.help and "default" in action.help.lower(), flag
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    for shown in ("(default: auto)", "(default: f16)", "(default: llama.cpp)"):
        assert shown in out.replace("\n", " ").replace("  ", " ") or command == "export"


def test_help_lists_the_kv_types_and_real_quantizations(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from rigspark_gui.cli_args import BACKENDS, KV_TYPES, QUANT_EXAMPLES
    from rigspark_gui.core.model import KvCacheType
    from rigspark_gui.core.model.quant_recipe import LLAMA_QUANTIZE_TYPES
    from rigspark_gui.core.settings import DEFAULT_MIN_TOK_S, Backend

    assert set(KV_TYPES) == {k.value for k in KvCacheType if k.llama_cpp}
    assert set(QUANT_EXAMPLES) <= set(LLAMA_QUANTIZE_TYPES)
    assert set(BACKENDS) == {b.value for b in Backend}
    assert DEFAULT_MIN_TOK_S == 8  # as --min-speed's help says
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert ", ".join(KV_TYPES) in out
    assert ", ".join(QUANT_EXAMPLES) in out
    assert "(default: 8;" in out


def test_gemma_3_1b_reads_one_billion(capsys: pytest.CaptureFixture[str]) -> None:
    rig = str(ROOT / "examples" / "rig-cpu-only.json")
    _, text = cli(capsys, "rank", "--rig", rig, "--family", "gemma 3")
    (row,) = [x for x in text.splitlines() if "gemma-3-1b-it" in x]
    assert " 1.0B " in row and "1000M" not in text


# ---------------------------------------------------------------- the README's examples


@cache
def _readme_examples():  # type: ignore[no-untyped-def]
    import importlib.util

    path = ROOT / "scripts" / "readme_examples.py"
    spec = importlib.util.spec_from_file_location("readme_examples", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_readme_examples_are_what_the_program_prints() -> None:
    """The worked example and the CLI section's blocks, regenerated from the real output:
    stale blocks fail here (run scripts/readme_examples.py)."""
    script = _readme_examples()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert script.regenerate(readme) == readme, "stale: run scripts/readme_examples.py"


def test_regenerating_touches_the_blocks_only() -> None:
    script = _readme_examples()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stale = readme.replace(
        "$ rigspark-plan plan --model llama-3.3",
        "$ old output\n$ rigspark-plan plan --model llama-3.3",
        1,
    )
    assert stale != readme
    assert script.regenerate(stale) == readme
    prose = [x for x in readme.splitlines() if x.startswith("One GPU is")]
    assert prose, "the worked example's prose is the README's own"


def test_the_readme_synopsis_names_real_flags() -> None:
    """The hand-written usage block under "## The CLI": every flag it shows exists."""
    from rigspark_gui.cli_args import build_parser

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The CLI", 1)[1]
    synopsis = section.split("```sh", 1)[1].split("```", 1)[0]
    command = ""
    checked = 0
    for line in synopsis.strip().splitlines():
        if line.startswith("rigspark-plan "):
            command = line.split()[1]
        parser = build_parser([command])
        sub = parser._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
        known = {s for a in sub._actions for s in a.option_strings}
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line):
            assert flag in known, f"`{command}` has no {flag}"
            checked += 1
    assert checked > 30
