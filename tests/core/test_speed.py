"""The speed model, worked by hand on round parameters (tests/conftest.py's
simple_speed_model: 70 % of bandwidth on NVIDIA cards, 10 us per layer, +-15 % band),
and the properties a user relies on."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.placement import CPU, uniform_placement
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import GpuBackend, PlanSettings
from rigspark_gui.core.speed import (
    DecodeShape,
    bytes_read_per_token,
    estimate_decode,
    estimate_decode_shape,
    estimate_prefill,
)
from tests.conftest import LLAMA_31_8B, simple_speed_model, spec_of


def one_gpu(bandwidth: float = 1000.0, vendor: Vendor = Vendor.NVIDIA, name: str = "RTX") -> Rig:
    gpu = Gpu(name=name, vendor=vendor, memory_total_bytes=48 * GIB, bandwidth_gbps=bandwidth,
              fp16_tflops=100.0)  # fmt: skip
    return Rig(ram_total_bytes=64 * GIB, gpus=(gpu,), cpu=Cpu(cores=8, memory_bandwidth_gbps=50.0))


def test_decode_is_bytes_over_bandwidth_plus_a_fixed_cost_per_layer(llama8b) -> None:
    rig, s, model = one_gpu(), PlanSettings(context=8192, prompt_tokens=1000), simple_speed_model()
    g = llama8b.geometry
    layout = weights_layout(llama8b, "Q4_K_M")
    p = uniform_placement(g, rig, s, "gpu:0")
    read = bytes_read_per_token(p, g, layout, s, 1000)["gpu:0"]

    t = estimate_decode(p, g, layout, rig, s, model)

    expected = 1 / (read / (1000e9 * 0.7) + 32 * 1e-5)
    assert t.known and t.tok_s == pytest.approx(expected, rel=1e-9)
    assert (t.low_tok_s, t.high_tok_s) == pytest.approx((0.85 * expected, 1.15 * expected))
    assert t.depth == 1000 and "1000 tokens of context" in t.basis
    assert t.limiting_device == "gpu:0" and "test calibration" in t.basis


def test_the_gpu_backend_changes_the_speed_and_must_run_on_the_card(llama8b) -> None:
    rig, model = one_gpu(), simple_speed_model()
    g, layout = llama8b.geometry, weights_layout(llama8b, "Q8_0")
    p = uniform_placement(g, rig, PlanSettings(), "gpu:0")

    cuda = estimate_decode(p, g, layout, rig, PlanSettings(), model)
    vulkan = estimate_decode(p, g, layout, rig, PlanSettings(gpu_backend=GpuBackend.VULKAN), model)
    metal = estimate_decode(p, g, layout, rig, PlanSettings(gpu_backend=GpuBackend.METAL), model)

    assert vulkan.tok_s is not None and cuda.tok_s is not None and vulkan.tok_s < cuda.tok_s
    assert not metal.known and "metal does not run on nvidia GPUs" in metal.basis


def test_a_cpu_with_few_cores_is_compute_bound(llama8b) -> None:
    model = simple_speed_model()
    g, layout = llama8b.geometry, weights_layout(llama8b, "BF16")
    s = PlanSettings()

    def on(cores: int) -> object:
        rig = Rig(ram_total_bytes=64 * GIB,
                  cpu=Cpu(name="Ryzen", cores=cores, memory_bandwidth_gbps=60.0))  # fmt: skip
        return estimate_decode(uniform_placement(g, rig, s, CPU), g, layout, rig, s, model)

    two, sixteen = on(2), on(16)
    assert "compute-bound" in two.basis and "compute-bound" not in sixteen.basis
    assert two.tok_s < sixteen.tok_s
    assert (two.low_tok_s, two.high_tok_s) == pytest.approx((0.6 * two.tok_s, 1.5 * two.tok_s))


def test_unknown_bandwidth_is_said_not_guessed(llama8b) -> None:
    rig = Rig(ram_total_bytes=64 * GIB, cpu=Cpu(cores=8))
    g, layout, s = llama8b.geometry, weights_layout(llama8b, "Q4_K_M"), PlanSettings()
    t = estimate_decode(uniform_placement(g, rig, s, CPU), g, layout, rig, s, simple_speed_model())
    assert not t.known and t.tok_s is None and t.basis.startswith("unknown: CPU memory bandwidth")


def test_prefill_is_a_point_with_a_band(llama8b) -> None:
    rig, s = one_gpu(), PlanSettings(prompt_tokens=2048)
    g, layout = llama8b.geometry, weights_layout(llama8b, "BF16")
    f = estimate_prefill(
        uniform_placement(g, rig, s, "gpu:0"), g, layout, rig, s, simple_speed_model()
    )
    assert f.known and f.seconds is not None
    work = 2 * layout.n_active_params * 2048 + 4 * 32 * 4096 * 2048 * 1024
    assert f.seconds == pytest.approx(work / (100e12 * 0.4) + 4 * 32 * 1e-5, rel=1e-6)
    assert f.low_seconds == pytest.approx(f.seconds / 1.4)
    assert f.high_seconds == pytest.approx(f.seconds / 0.7)


def test_moe_reads_only_its_active_experts() -> None:
    moe = replace(LLAMA_31_8B, n_ff=0, n_expert=8, n_expert_used=2, n_ff_expert=14336)
    spec = spec_of(moe)
    rig, s = one_gpu(), PlanSettings()
    g, layout = spec.geometry, weights_layout(spec, "Q4_K_M")
    p = uniform_placement(g, rig, s, "gpu:0")
    t = estimate_decode(p, g, layout, rig, s, simple_speed_model())
    read = bytes_read_per_token(p, g, layout, s, s.prompt_tokens)["gpu:0"]
    assert read < 0.4 * layout.total_bytes  # 2 of 8 experts
    assert t.tok_s == pytest.approx(1 / (read / 700e9 + 32e-5), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    bw=st.floats(50, 3000),
    more=st.floats(1.0, 4.0),
    quant=st.sampled_from(["BF16", "Q8_0", "Q4_K_M", "Q2_K"]),
)
def test_more_bandwidth_never_slows_decode(bw: float, more: float, quant: str) -> None:
    spec = spec_of(LLAMA_31_8B)
    g, layout, s = spec.geometry, weights_layout(spec, quant), PlanSettings()
    slow, fast = one_gpu(bw), one_gpu(bw * more)
    p = uniform_placement(g, slow, s, "gpu:0")
    m = simple_speed_model()
    assert (
        estimate_decode(p, g, layout, fast, s, m).tok_s
        >= estimate_decode(p, g, layout, slow, s, m).tok_s
    )


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(1, 60000), deeper=st.integers(0, 60000))
def test_a_deeper_context_never_speeds_decode(depth: int, deeper: int) -> None:
    spec = spec_of(LLAMA_31_8B)
    rig, m = one_gpu(), simple_speed_model()
    g, layout = spec.geometry, weights_layout(spec, "Q4_K_M")
    s1 = PlanSettings(context=131072, prompt_tokens=depth)
    s2 = replace(s1, prompt_tokens=depth + deeper)
    p = uniform_placement(g, rig, s1, "gpu:0")
    assert (
        estimate_decode(p, g, layout, rig, s2, m).tok_s
        <= estimate_decode(p, g, layout, rig, s1, m).tok_s
    )


def test_a_layer_split_runs_the_cards_in_turn() -> None:
    """Two identical cards each reading half: about one card's speed, less a hand-off."""
    spec = spec_of(LLAMA_31_8B)
    layout, m = weights_layout(spec, "Q8_0"), simple_speed_model()
    gpus = tuple(
        Gpu(
            name="RTX",
            vendor=Vendor.NVIDIA,
            index=i,
            memory_total_bytes=48 * GIB,
            bandwidth_gbps=1000.0,
        )
        for i in range(2)
    )
    rig = Rig(ram_total_bytes=64 * GIB, gpus=gpus)
    s = PlanSettings()
    one = estimate_decode_shape(DecodeShape({"gpu:0": 8e9}, {"gpu:0": 32}, 0, 0), layout, rig, s, m)
    two = estimate_decode_shape(
        DecodeShape({"gpu:0": 4e9, "gpu:1": 4e9}, {"gpu:0": 16, "gpu:1": 16}, 1, 0),
        layout, rig, s, m,
    )  # fmt: skip
    assert 1 / two.tok_s == pytest.approx(1 / one.tok_s + 2e-4)


def test_apple_silicon_plans_on_its_own_class(llama8b) -> None:
    mac = Rig(
        ram_total_bytes=64 * GIB,
        unified_memory=True,
        gpus=(
            Gpu(
                name="Apple M2 Max",
                vendor=Vendor.APPLE,
                memory_total_bytes=48 * GIB,
                bandwidth_gbps=400.0,
                unified=True,
            ),
        ),
    )
    g, layout, s = llama8b.geometry, weights_layout(llama8b, "Q4_K_M"), PlanSettings()
    p = uniform_placement(g, mac, s, "gpu:0")
    t = estimate_decode(p, g, layout, mac, s, simple_speed_model())
    read = bytes_read_per_token(p, g, layout, s, s.prompt_tokens)["gpu:0"]
    assert t.tok_s == pytest.approx(1 / (read / (400e9 * 0.8) + 32e-5), rel=1e-9)
