"""Auto respects speed: the best quality reaching the minimum, else the fastest that
fits, with the trade-off said in one sentence and the whole ladder shown."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.core.plan.paths import PathName
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.plan.quant_search import BANDWIDTH_SPREAD, SPEED_BAND
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings
from tests.conftest import LLAMA_31_8B, QUANTS, simple_speed_model, spec_of

SPEC = spec_of(LLAMA_31_8B, "llama-3.1-8b")


def cpu_only(bandwidth: float = 40.0, cores: int = 32) -> Rig:
    return Rig(
        name="24 GB desktop",
        ram_total_bytes=24 * GIB,
        ram_available_bytes=22 * GIB,
        cpu=Cpu(name="Ryzen 9", cores=cores, memory_bandwidth_gbps=bandwidth, features=("avx2",)),
    )


def cpu_path(p):
    return next(x for x in p.paths if x.path is PathName.CPU)


def test_on_a_cpu_auto_takes_the_best_quality_that_reaches_the_minimum() -> None:
    p = plan(SPEC, cpu_only(), PlanSettings(min_tok_s=8.0), simple_speed_model())
    path = cpu_path(p)

    assert path.fits and path.quant != "BF16"
    assert path.throughput.tok_s >= 8.0
    better = [o for o in path.ladder if QUANTS.index(o.quant) < QUANTS.index(path.quant)]
    assert better and all(o.tok_s < 8.0 for o in better)  # every better one is too slow
    assert path.choice.startswith("BF16 fits at") and f"{path.quant} reaches" in path.choice


def test_min_speed_zero_is_the_best_quality_that_fits() -> None:
    p = plan(SPEC, cpu_only(), PlanSettings(min_tok_s=0.0), simple_speed_model())
    assert cpu_path(p).quant == "BF16" and cpu_path(p).choice == ""


def test_when_nothing_reaches_the_minimum_the_fastest_is_taken_and_said() -> None:
    """Unmeasured quality (no floor to keep): the fastest, speeds within the band of it
    a tie that the better quality wins."""
    p = plan(SPEC, cpu_only(bandwidth=5.0), PlanSettings(min_tok_s=50.0), simple_speed_model())
    path = cpu_path(p)
    top = max(o.tok_s for o in path.ladder)
    near = [o.quant for o in path.ladder if o.tok_s >= (1 - SPEED_BAND) * top]
    assert path.quant == near[0]
    assert "no quantization reaches 50 tok/s" in path.choice and "best trade-off" in path.choice
    assert p.recommended is PathName.CPU


def test_the_ladder_lists_every_quantization_that_fits_best_first() -> None:
    p = plan(SPEC, cpu_only(), PlanSettings(), simple_speed_model())
    ladder = cpu_path(p).ladder
    assert [o.quant for o in ladder] == list(QUANTS)  # 24 GB holds them all
    speeds = [o.tok_s for o in ladder]
    assert speeds == sorted(speeds)  # smaller files decode faster here
    assert all(o.required_bytes > 0 for o in ladder)


def test_among_nearly_equal_speeds_the_better_quality_is_the_fastest() -> None:
    """Two cores: every quantized file decodes at about the same compute-bound speed,
    so the fastest plan that fits is the best quality among them."""
    p = plan(SPEC, cpu_only(cores=2), PlanSettings(min_tok_s=50.0), simple_speed_model())
    path = cpu_path(p)
    top = max(o.tok_s for o in path.ladder)
    near = [o.quant for o in path.ladder if o.tok_s >= 0.95 * top]
    assert path.quant == near[0]


def test_a_fixed_quantization_is_kept_whatever_its_speed() -> None:
    p = plan(SPEC, cpu_only(), PlanSettings(quant="BF16", min_tok_s=8.0), simple_speed_model())
    assert cpu_path(p).quant == "BF16" and cpu_path(p).choice == ""


def test_a_fast_gpu_path_wins_over_a_slow_ram_path() -> None:
    gpu = Gpu(name="RTX 4060", vendor=Vendor.NVIDIA, memory_total_bytes=8 * GIB,
              bandwidth_gbps=272.0)  # fmt: skip
    rig = replace(cpu_only(), gpus=(gpu,))
    p = plan(SPEC, rig, PlanSettings(min_tok_s=8.0), simple_speed_model())
    rec = next(x for x in p.paths if x.path is p.recommended)
    assert rec.path is PathName.GPU and rec.throughput.tok_s >= 8.0


@settings(max_examples=25, deadline=None)
@given(
    bw=st.floats(5.0, 200.0),
    min_tok_s=st.floats(0.0, 60.0),
    ram=st.integers(6, 64),
)
def test_the_recommendation_reaches_the_minimum_whenever_some_plan_does(
    bw: float, min_tok_s: float, ram: int
) -> None:
    rig = replace(cpu_only(bw), ram_total_bytes=ram * GIB, ram_available_bytes=(ram - 1) * GIB)
    p = plan(SPEC, rig, PlanSettings(min_tok_s=min_tok_s), simple_speed_model())
    reachable = [
        o for x in p.paths for o in x.ladder if o.tok_s is not None and o.tok_s >= min_tok_s
    ]
    if p.recommended is None:
        assert not any(x.ladder for x in p.paths)
        return
    rec = next(x for x in p.paths if x.path is p.recommended)
    if reachable:
        assert rec.throughput.tok_s >= min_tok_s
        # and no better quality on that path would have reached it
        for o in rec.ladder:
            if QUANTS.index(o.quant) < QUANTS.index(rec.quant):
                assert o.tok_s < min_tok_s
    else:
        # within the band of the fastest at the measured RAM bandwidth (the tie rule also
        # asks it at BANDWIDTH_SPREAD either side where some quantization manages that)
        ties = []
        for k in (1.0, 1 - BANDWIDTH_SPREAD, 1 + BANDWIDTH_SPREAD):
            at = plan(SPEC, replace(rig, cpu=replace(rig.cpu, memory_bandwidth_gbps=bw * k)),
                      PlanSettings(min_tok_s=min_tok_s), simple_speed_model())  # fmt: skip
            speeds = {(x.path, o.quant): o.tok_s or 0.0 for x in at.paths for o in x.ladder}
            top = max(speeds.values())
            ties.append(speeds[(rec.path, rec.quant)] >= (1 - SPEED_BAND) * top)
        assert ties[0]


def test_every_ladder_rung_is_what_fixing_that_quantization_plans(rig2x3090) -> None:
    """The ladder is a preview of plans the user can pick: each rung's memory and speed
    are the fixed-quantization plan's, on every path."""
    model = simple_speed_model()
    auto = plan(SPEC, rig2x3090, PlanSettings(context=32768), model)
    checked = 0
    for path in auto.paths:
        for rung in path.ladder:
            fixed = plan(SPEC, rig2x3090, PlanSettings(context=32768, quant=rung.quant), model)
            same = next(p for p in fixed.paths if p.path is path.path)
            assert same.fits and same.required_bytes == rung.required_bytes, (path.path, rung)
            assert same.throughput.tok_s == rung.tok_s, (path.path, rung)
            checked += 1
    assert checked >= 20


def test_without_ladders_the_plan_is_the_same_choice() -> None:
    """The window plans without ladders (they fill in later): the same choice per path."""
    for s in (PlanSettings(), PlanSettings(min_tok_s=8.0), PlanSettings(min_tok_s=50.0)):
        full = plan(SPEC, cpu_only(), s, simple_speed_model())
        quick = plan(SPEC, cpu_only(), s, simple_speed_model(), ladders=False)
        assert [(p.path, p.quant, p.required_bytes) for p in quick.paths] == [
            (p.path, p.quant, p.required_bytes) for p in full.paths
        ]
        assert quick.recommended == full.recommended
