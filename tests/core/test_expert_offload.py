"""MoE on GPUs + system RAM the way llama.cpp places it now: every layer on the GPUs, the
routed experts of the first N layers in system memory (`--n-cpu-moe N`), planned when
that decodes faster than an -ngl layer split, and said with the flag."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.catalog.models import resolve_model
from rigspark_gui.core.launch import Engine, launch_command
from rigspark_gui.core.launch.llama_cpp import (
    apply_llama_args,
    llama_server_command,
    parse_llama_args,
)
from rigspark_gui.core.memory import repack_for, weights_layout
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    FitEvaluator,
    Placement,
    Verdict,
    auto_place,
    cpu_moe_count,
    device_loads,
    fit_by_ngl,
    is_cpu_moe,
    llama_cpp_ranges,
    move_experts,
    with_cpu_moe,
)
from rigspark_gui.core.plan import PathName, auto_placement, plan
from rigspark_gui.core.rig import Cpu, Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import bytes_read_per_token, estimate_decode
from tests.conftest import GIB, LLAMA_31_8B, make_rig, rtx3090, simple_speed_model, spec_of

S = PlanSettings(context=8192)


@cache
def _spec(model_id: str) -> ModelSpec:
    return resolve_model(model_id).spec


def _rig(n_gpus: int = 1) -> Rig:
    """RTX 3090s (24 GB) and 64 GB of RAM: the issue's machine."""
    return Rig(
        name="3090 + 64 GB",
        gpus=tuple(rtx3090(i) for i in range(n_gpus)),
        ram_total_bytes=64 * GIB,
        ram_available_bytes=60 * GIB,
        cpu=Cpu(name="Ryzen 9 5950X", cores=16, memory_bandwidth_gbps=51.2),
    )


def _argv_value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def _round_trip(cmd_argv: list[str], spec: ModelSpec, rig: Rig, s: PlanSettings) -> Placement:
    ngl, split, ot = parse_llama_args(cmd_argv)
    return apply_llama_args(spec.geometry, rig, s, ngl, split, ot)


# ---------------------------------------------------------------- the case


def test_gpt_oss_120b_on_one_3090_keeps_every_layer_on_the_gpu_and_experts_in_ram() -> None:
    spec, rig, perf = _spec("gpt-oss-120b"), _rig(), simple_speed_model()
    g = spec.geometry
    p = plan(spec, rig, S, perf)
    assert p.recommended is PathName.CPU_OFFLOAD
    path = next(x for x in p.paths if x.path is PathName.CPU_OFFLOAD)
    n = path.n_cpu_moe
    assert path.fits and n is not None and 0 < n < g.n_layer
    assert path.ngl == g.n_layer + 1
    placement = p.placement
    assert placement is not None
    # every layer (its attention and KV) on the GPU, the first N layers' experts in RAM
    assert all(u.device == "gpu:0" for u in placement.units if u.unit != "input")
    for u in placement.blocks:
        assert u.experts_device == (CPU if u.index < n else None)
    # N is the smallest that fits: one layer fewer overloads the GPU
    layout = weights_layout(spec, path.quant or "")
    fewer = device_loads(with_cpu_moe(placement, g, n - 1), g, layout, rig, p.settings)
    assert any(x.verdict is Verdict.OVER for x in fewer if x.device == "gpu:0")
    # it beats the -ngl layer split the plan used to give
    layers = fit_by_ngl(g, layout, rig, p.settings)
    assert layers.gpu_slots < g.n_layer + 1
    slower = estimate_decode(layers, g, layout, rig, p.settings, perf).tok_s
    assert path.tok_s is not None and slower is not None and path.tok_s > slower
    # one plan, one truth: the speed and memory shown are the placement's
    assert estimate_decode(placement, g, layout, rig, p.settings, perf).tok_s == path.tok_s
    assert sum(x.required_bytes for x in p.device_loads) == path.required_bytes


def test_its_llama_cpp_command_says_n_cpu_moe_and_reads_back_the_same() -> None:
    spec, rig = _spec("gpt-oss-120b"), _rig()
    p = plan(spec, rig, S, simple_speed_model())
    path = next(x for x in p.paths if x.path is p.recommended)
    assert p.placement is not None and path.quant is not None
    cmd = llama_server_command(p.placement, spec, path.quant, p.settings, rig)
    assert cmd.supported
    assert _argv_value(cmd.argv, "-ngl") == str(spec.geometry.n_layer + 1)
    assert _argv_value(cmd.argv, "--n-cpu-moe") == str(path.n_cpu_moe)
    assert "-ot" not in cmd.argv
    assert _round_trip(cmd.argv, spec, rig, p.settings) == p.placement
    # engines without the flag: koboldcpp says it as -ot, Ollama cannot say it
    kobold = launch_command(Engine.KOBOLDCPP, p.placement, spec, path.quant, p.settings, rig)
    assert kobold.supported and "--overridetensors" in kobold.argv
    ollama = launch_command(Engine.OLLAMA, p.placement, spec, path.quant, p.settings, rig)
    assert not ollama.supported


def test_two_gpus_split_the_lighter_layers_onto_the_first() -> None:
    spec, rig = _spec("gpt-oss-120b"), _rig(2)
    p = plan(spec, rig, S, simple_speed_model())
    path = next(x for x in p.paths if x.path is PathName.CPU_OFFLOAD)
    assert path.fits and path.n_cpu_moe and path.ngl == spec.geometry.n_layer + 1
    assert p.placement is not None and path.quant is not None
    assert all(u.device != CPU for u in p.placement.units if u.unit != "input")
    cmd = llama_server_command(p.placement, spec, path.quant, p.settings, rig)
    assert _argv_value(cmd.argv, "--n-cpu-moe") == str(path.n_cpu_moe)
    assert _round_trip(cmd.argv, spec, rig, p.settings) == p.placement
    assert not any(x.verdict is Verdict.OVER for x in p.device_loads)


def test_a_dense_model_is_planned_as_before() -> None:
    spec, rig = _spec("llama-3.3-70b-instruct"), _rig()
    p = plan(spec, rig, S, simple_speed_model())
    for path in p.paths:
        assert path.n_cpu_moe is None
    assert p.placement is not None
    assert all(u.experts_device is None for u in p.placement.units)


def test_auto_place_makes_the_same_choice() -> None:
    spec, rig, perf = _spec("gpt-oss-120b"), _rig(), simple_speed_model()
    g = spec.geometry
    layout = weights_layout(spec, "MXFP4")
    p = auto_placement(g, layout, rig, S, perf)
    n = cpu_moe_count(p, g)
    assert n and p.gpu_slots == g.n_layer + 1
    assert p == with_cpu_moe(auto_place(g, rig, S), g, n)
    # a model that fits the GPU whole keeps every expert with its layer
    small = _spec("gpt-oss-20b")
    whole = auto_placement(small.geometry, weights_layout(small, "MXFP4"), rig, S, perf)
    assert cpu_moe_count(whole, small.geometry) == 0 and whole.gpu_slots > small.geometry.n_layer


# ---------------------------------------------------------------- the placement shape


def test_with_cpu_moe_is_what_llama_cpp_makes_of_the_flag() -> None:
    spec = _spec("gpt-oss-120b")
    g, rig = spec.geometry, _rig(2)
    for ngl in (g.n_layer + 1, 20, 0):
        for n in (0, 1, 7, 30, g.n_layer, 99):
            base = auto_place(g, rig, S, ngl=ngl, tensor_split=[3.0, 2.0])
            flags = ["-ngl", str(ngl), "-ts", "3,2", "--n-cpu-moe", str(n)]
            assert _round_trip(flags, spec, rig, S) == with_cpu_moe(base, g, n)
    everything = _round_trip(["-ngl", "99", "--cpu-moe"], spec, rig, S)
    assert everything == with_cpu_moe(auto_place(g, rig, S), g, g.n_layer)
    assert is_cpu_moe(everything, g)


def test_only_a_first_n_shape_becomes_the_flag() -> None:
    spec = _spec("gpt-oss-120b")
    g, rig = spec.geometry, _rig()
    p = auto_place(g, rig, S)
    gap = move_experts(p, ["blk.0", "blk.2"], CPU)  # blk.1 keeps its experts
    assert cpu_moe_count(gap, g) is None
    cmd = llama_server_command(gap, spec, "MXFP4", S, rig)
    assert "--n-cpu-moe" not in cmd.argv and "-ot" in cmd.argv
    assert _round_trip(cmd.argv, spec, rig, S) == gap
    # every layer's experts: --cpu-moe
    allp = with_cpu_moe(p, g, g.n_layer)
    cmd = llama_server_command(allp, spec, "MXFP4", S, rig)
    assert "--cpu-moe" in cmd.argv and "--n-cpu-moe" not in cmd.argv
    assert _round_trip(cmd.argv, spec, rig, S) == allp


def test_the_flag_comes_before_hand_moved_layers() -> None:
    """llama.cpp takes the first matching rule: the expert rules must precede `-ot`."""
    spec = _spec("gpt-oss-120b")
    g, rig = spec.geometry, _rig(2)
    p = with_cpu_moe(auto_place(g, rig, S), g, 5)
    from rigspark_gui.core.placement import move_layers

    p = move_layers(p, ["blk.3"], "gpu:1")
    p = move_experts(p, ["blk.3"], CPU)
    cmd = llama_server_command(p, spec, "MXFP4", S, rig)
    assert cmd.argv.index("--n-cpu-moe") < cmd.argv.index("-ot")
    assert _round_trip(cmd.argv, spec, rig, S) == p


def test_a_dense_model_has_no_experts_to_move() -> None:
    rig = make_rig(1)
    p = auto_place(LLAMA_31_8B, rig, S, ngl=20)
    assert with_cpu_moe(p, LLAMA_31_8B, 10) == p
    assert cpu_moe_count(p, LLAMA_31_8B) == 0
    cmd = llama_server_command(p, spec_of(LLAMA_31_8B), "Q4_K_M", S, rig)
    assert "--n-cpu-moe" not in cmd.argv and "--cpu-moe" not in cmd.argv


# ---------------------------------------------------------------- the fast tallies


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(0, 52),
    ngl=st.integers(0, 49),
    split=st.lists(st.integers(0, 5), min_size=2, max_size=2).filter(any),
    repack=st.booleans(),
)
def test_fast_tally_with_experts_in_ram_agrees_with_device_loads(
    n: int, ngl: int, split: list[int], repack: bool
) -> None:
    spec = _spec("qwen3-30b-a3b")
    g, rig = spec.geometry, make_rig(2)
    layout = weights_layout(spec, "Q4_0")
    rp = repack_for(spec, "Q4_0", ("avx2",)) if repack else None
    fsplit = [float(x) for x in split]
    p = with_cpu_moe(auto_place(g, rig, S, ngl=ngl, tensor_split=fsplit), g, n)
    loads = {d.device: d for d in device_loads(p, g, layout, rig, S, cpu_repack=rp)}
    ev = FitEvaluator(g, layout, rig, S, rp)
    ranges = llama_cpp_ranges(g.n_layer, ngl, fsplit, [0, 1])
    fast = ev.tally_ranges(ranges, n)
    for dev, t in fast.items():
        d = loads[dev]
        assert (t.weights_bytes, t.kv_bytes, t.compute_bytes) == (
            d.weights_bytes,
            d.kv_bytes,
            d.compute_bytes,
        )
    reads = ev.read_bytes(ranges, 1024, n)
    slow = bytes_read_per_token(p, g, layout, S, 1024)
    for dev in set(reads) | set(slow):
        assert reads.get(dev, 0.0) == pytest.approx(slow.get(dev, 0.0))
    on_gpus = [x for d, x in loads.items() if d != CPU and x.units]
    assert ev.gpus_fit(ranges, n) is all(x.verdict is not Verdict.OVER for x in on_gpus)
