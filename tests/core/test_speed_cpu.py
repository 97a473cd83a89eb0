"""The CPU side of the speed model: which ISA's fitted costs a CPU gets, the per-ISA
dequantize-and-dot factors, and the share of a measured (rather than a spec) bandwidth."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.placement import CPU, uniform_placement
from rigspark_gui.core.rig import GIB, Basis, Cpu, Provenance, Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import CpuIsa, SpeedModel, cpu_isa, estimate_decode, estimate_prefill
from tests.conftest import simple_speed_model


def _cpu(name: str = "CPU", features: tuple[str, ...] = ()) -> Cpu:
    return Cpu(name=name, cores=2, memory_bandwidth_gbps=200.0, features=features)


@pytest.mark.parametrize(
    ("name", "features", "isa"),
    [
        ("Intel Xeon Platinum 8480+", ("avx2", "avx512", "avx512_vnni", "amx"), CpuIsa.AMX),
        ("Intel Xeon (Ice Lake)", ("avx2", "avx512", "avx512_vnni"), CpuIsa.AVX512_VNNI),
        ("Intel Xeon Gold 6148", ("avx2", "avx512"), CpuIsa.AVX512),
        ("AMD Ryzen 7 5800X", ("avx2",), CpuIsa.AVX2),
        ("Neoverse-V2", ("sve",), CpuIsa.SVE),
        ("AWS Graviton4", (), CpuIsa.SVE),
        ("Apple M2 Max", (), CpuIsa.APPLE),
        ("Cortex-A76", (), CpuIsa.NEON),
        ("AMD Ryzen 9 7950X", (), CpuIsa.AVX2),  # no flags read (not Linux): the safe floor
    ],
)
def test_a_cpu_gets_the_isa_of_its_flags_or_its_name(
    name: str, features: tuple[str, ...], isa: CpuIsa
) -> None:
    assert cpu_isa(_cpu(name, features)) is isa


def test_the_hardware_layer_reports_the_dot_product_extensions(tmp_path) -> None:
    from rigspark_gui.hardware.cpu import cpu_features

    info = tmp_path / "cpuinfo"
    info.write_text("flags\t: avx2 avx512f avx512_vnni avx512_bf16 amx_tile amx_int8\n")
    assert cpu_features(info) == ("avx2", "avx512", "avx512_vnni", "amx")
    info.write_text("processor\t: 0\nFeatures\t: fp asimd asimddp sve sve2 i8mm\n")
    assert cpu_features(info) == ("sve",)
    info.write_text("processor\t: 0\nFeatures\t: fp asimd asimddp\n")
    assert cpu_features(info) == ()


def _decode(cpu: Cpu, model: SpeedModel, quant: str, llama8b) -> float:
    rig = Rig(ram_total_bytes=64 * GIB, cpu=cpu)
    g, s = llama8b.geometry, PlanSettings()
    layout = weights_layout(llama8b, quant)
    t = estimate_decode(uniform_placement(g, rig, s, CPU), g, layout, rig, s, model)
    assert t.tok_s is not None
    return t.tok_s


def test_an_isa_without_fitted_figures_falls_back_to_the_one_below(llama8b) -> None:
    base = simple_speed_model()
    assert base.decode is not None
    only_avx2 = replace(base, decode=replace(base.decode, cpu_core_rate={CpuIsa.AVX2: 4e9}))
    amx = _cpu("Xeon", ("avx2", "avx512", "avx512_vnni", "amx"))
    avx2 = _cpu("Ryzen", ("avx2",))
    assert _decode(amx, only_avx2, "Q4_K_M", llama8b) == pytest.approx(
        _decode(avx2, only_avx2, "Q4_K_M", llama8b)
    )
    faster = replace(
        base,
        decode=replace(base.decode, cpu_core_rate={CpuIsa.AVX2: 4e9, CpuIsa.AVX512_VNNI: 8e9}),
    )
    assert _decode(amx, faster, "Q4_K_M", llama8b) > _decode(avx2, faster, "Q4_K_M", llama8b)


def test_each_isa_has_its_own_cost_per_quantization_family(llama8b) -> None:
    base = simple_speed_model()
    assert base.decode is not None
    slow_kquant = replace(
        base, decode=replace(base.decode, cpu_isa_quant_factor={"avx2:kquant": 0.5})
    )
    avx2, apple = _cpu("Ryzen", ("avx2",)), _cpu("Apple M2")
    # two cores at 200 GB/s: compute-bound, so the ISA's K-quant cost sets the speed
    assert _decode(avx2, slow_kquant, "Q4_K_M", llama8b) == pytest.approx(
        0.5 * _decode(avx2, base, "Q4_K_M", llama8b), rel=0.02
    )
    assert _decode(apple, slow_kquant, "Q4_K_M", llama8b) == pytest.approx(
        _decode(apple, base, "Q4_K_M", llama8b)
    )
    assert _decode(avx2, slow_kquant, "Q8_0", llama8b) == pytest.approx(
        _decode(avx2, base, "Q8_0", llama8b)
    )


def test_a_measured_bandwidth_gets_its_own_efficiency(llama8b) -> None:
    base = simple_speed_model()
    assert base.decode is not None
    model = replace(base, decode=replace(base.decode, cpu_measured_efficiency=1.0))
    spec = Cpu(name="Ryzen", cores=64, memory_bandwidth_gbps=40.0, features=("avx2",))
    measured = replace(
        spec,
        provenance={"memory_bandwidth_gbps": Provenance(basis=Basis.MEASURED, source="probe")},
    )
    # 64 cores: memory-bound, so the speed scales with the share of bandwidth
    ratio = _decode(measured, model, "Q8_0", llama8b) / _decode(spec, model, "Q8_0", llama8b)
    assert ratio == pytest.approx(1.0 / 0.8, rel=0.01)
    # a model fitted without measured rows uses the one efficiency for both
    assert _decode(measured, base, "Q8_0", llama8b) == pytest.approx(
        _decode(spec, base, "Q8_0", llama8b)
    )


def test_the_cpu_prompt_rate_has_its_own_factor_per_isa(llama8b) -> None:
    base = simple_speed_model()
    assert base.prefill is not None
    model = replace(base, prefill=replace(base.prefill, cpu_quant_factor={"avx2:kquant": 0.25}))
    rig = Rig(ram_total_bytes=64 * GIB, cpu=_cpu("Ryzen", ("avx2",)))
    g, s = llama8b.geometry, PlanSettings(prompt_tokens=512)
    layout = weights_layout(llama8b, "Q4_K_M")
    p = uniform_placement(g, rig, s, CPU)
    slow = estimate_prefill(p, g, layout, rig, s, model)
    fast = estimate_prefill(p, g, layout, rig, s, base)
    assert slow.seconds is not None and fast.seconds is not None
    assert slow.seconds > 3 * fast.seconds


def test_a_virtual_machines_vcpus_get_the_fitted_vcpu_factor(llama8b) -> None:
    base = simple_speed_model()
    assert base.decode is not None
    model = replace(base, decode=replace(base.decode, cpu_vcpu_factor=0.5))
    host = _cpu("Xeon", ("avx2", "avx512", "avx512_vnni"))
    vm = replace(host, features=(*host.features, "hypervisor"))
    # two cores at 200 GB/s: compute-bound, so half the work per vCPU halves the speed
    assert _decode(vm, model, "Q4_K_M", llama8b) == pytest.approx(
        0.5 * _decode(host, model, "Q4_K_M", llama8b), rel=0.02
    )
    assert _decode(vm, base, "Q4_K_M", llama8b) == pytest.approx(
        _decode(host, base, "Q4_K_M", llama8b)
    )


def test_measured_compute_cores_replace_the_fitted_vcpu_share(llama8b) -> None:
    """A VM whose vCPUs were timed together: hyperthread pairs (1 core's worth of 2) run
    compute-bound decode at half the speed of two whole cores, whatever the fitted share."""
    base = simple_speed_model()
    assert base.decode is not None
    model = replace(base, decode=replace(base.decode, cpu_vcpu_factor=0.8))
    host = _cpu("Xeon", ("avx2", "avx512", "avx512_vnni"))
    vm = replace(host, features=(*host.features, "hypervisor"))
    whole = replace(vm, compute_cores=2.0)
    pairs = replace(vm, compute_cores=1.0)
    assert _decode(whole, model, "Q4_K_M", llama8b) == pytest.approx(
        _decode(host, model, "Q4_K_M", llama8b)
    )
    assert _decode(pairs, model, "Q4_K_M", llama8b) == pytest.approx(
        0.5 * _decode(whole, model, "Q4_K_M", llama8b), rel=0.02
    )
    # unmeasured, the fitted share stands in
    assert _decode(vm, model, "Q4_K_M", llama8b) == pytest.approx(
        0.8 * _decode(host, model, "Q4_K_M", llama8b), rel=0.02
    )
    # a figure above the cores counted is no more than whole cores
    assert _decode(replace(vm, compute_cores=3.0), model, "Q4_K_M", llama8b) == pytest.approx(
        _decode(whole, model, "Q4_K_M", llama8b)
    )


def test_the_hardware_layer_says_when_it_runs_under_a_hypervisor(tmp_path) -> None:
    from rigspark_gui.hardware.cpu import cpu_features

    info = tmp_path / "cpuinfo"
    info.write_text("flags\t: avx2 avx512f avx512_vnni hypervisor\n")
    assert cpu_features(info) == ("avx2", "avx512", "avx512_vnni", "hypervisor")
