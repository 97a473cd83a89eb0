"""Auto as an expert would sign it, on the catalog's own models and quality data: when no
quantization reaches the minimum speed, the fastest no worse than "moderate loss" (speeds
within the band a tie kept at the better quality), said in one sentence; smaller models
that reach the speed, same family first; and the same answer when the measured RAM
bandwidth moves by ±30 %."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.plan import Plan, plan, smaller_models
from rigspark_gui.core.plan.quant_search import (
    BANDWIDTH_SPREAD,
    QUALITY_FLOOR,
    SPEED_BAND,
    above_floor,
)
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings, engine_default_settings

GB = 1_000_000_000
CPU = Cpu(name="2-vCPU x86 VM", cores=2, memory_bandwidth_gbps=28.0, features=("avx2", "avx512"))


def _gpu(name: str, vram_gib: int, bandwidth: float, tflops: float, index: int = 0) -> Gpu:
    return Gpu(
        name=name,
        vendor=Vendor.NVIDIA,
        index=index,
        memory_total_bytes=vram_gib * GIB,
        bandwidth_gbps=bandwidth,
        fp16_tflops=tflops,
    )


RIGS = {
    "cpu-only 24 GB": Rig(
        name="cpu", ram_total_bytes=24 * GB, ram_available_bytes=22 * GB, cpu=CPU
    ),
    "8 GB GPU": Rig(
        name="8 GB",
        gpus=(_gpu("NVIDIA GeForce RTX 4060", 8, 272.0, 15.1),),
        ram_total_bytes=32 * GIB,
        ram_available_bytes=28 * GIB,
        cpu=replace(CPU, cores=8, memory_bandwidth_gbps=60.0),
    ),
    "24 GB GPU": Rig(
        name="24 GB",
        gpus=(_gpu("NVIDIA GeForce RTX 3090", 24, 936.2, 71.0),),
        ram_total_bytes=64 * GIB,
        ram_available_bytes=60 * GIB,
        cpu=replace(CPU, cores=16, memory_bandwidth_gbps=60.0),
    ),
    "2x24 GB GPUs": Rig(
        name="2x24 GB",
        gpus=(
            _gpu("NVIDIA GeForce RTX 3090", 24, 936.2, 71.0),
            _gpu("NVIDIA GeForce RTX 3090", 24, 936.2, 71.0, 1),
        ),
        ram_total_bytes=64 * GIB,
        ram_available_bytes=60 * GIB,
        cpu=replace(CPU, cores=16, memory_bandwidth_gbps=60.0),
    ),
}
# a model and minimum speed that no quantization reaches on each rig
SLOW = {
    "cpu-only 24 GB": ("llama-3.1-8b-instruct", 8.0),
    "8 GB GPU": ("qwen3-32b", 8.0),
    "24 GB GPU": ("llama-3.1-70b-instruct", 8.0),
    "2x24 GB GPUs": ("llama-3.1-70b-instruct", 40.0),
}


@cache
def _catalog() -> tuple[ModelSpec, ...]:
    return load_catalog(updates=False).specs()


def _spec(model_id: str) -> ModelSpec:
    return next(m for m in _catalog() if m.id == model_id)


@cache
def _perf():
    return load_perf()


def _settings(min_tok_s: float) -> PlanSettings:
    return replace(engine_default_settings(context=8192), min_tok_s=min_tok_s)


def _recommended(p: Plan):
    return next(x for x in p.paths if x.path is p.recommended)


@pytest.mark.parametrize("rig_name", list(RIGS))
def test_nothing_fast_enough_keeps_the_quality_floor(rig_name: str) -> None:
    model_id, min_tok_s = SLOW[rig_name]
    spec, rig = _spec(model_id), RIGS[rig_name]
    p = plan(spec, rig, _settings(min_tok_s), _perf())
    rec = _recommended(p)
    assert rec.throughput.tok_s is not None and rec.throughput.tok_s < min_tok_s
    kept = [o for o in rec.ladder if above_floor(spec, o.quant)]
    assert kept, "something above the floor fits on every one of these rigs"
    # no worse than moderate loss, and no quantization above the floor is faster by more
    # than the band at the measured RAM bandwidth (nor, where one ties at every bandwidth
    # BANDWIDTH_SPREAD either side, at those)
    assert above_floor(spec, rec.quant), (rec.quant, rec.quality)
    order = [o.quant for o in kept]  # best quality first
    ties: dict[str, list[bool]] = {q: [] for q in order}
    for k in (1.0, 1 - BANDWIDTH_SPREAD, 1 + BANDWIDTH_SPREAD):
        bw = rig.cpu.memory_bandwidth_gbps
        assert bw is not None
        scaled = replace(rig, cpu=replace(rig.cpu, memory_bandwidth_gbps=bw * k))
        same = next(x for x in plan(spec, scaled, _settings(min_tok_s), _perf()).paths
                    if x.path is rec.path)  # fmt: skip
        speeds = {o.quant: o.tok_s or 0.0 for o in same.ladder if above_floor(spec, o.quant)}
        for q in order:
            ties[q].append(speeds[q] >= (1 - SPEED_BAND) * max(speeds.values()))
    everywhere = [q for q in order if all(ties[q])]
    # the best quality tied at every bandwidth, else the best tied at the measured one
    assert rec.quant == (everywhere or [q for q in order if ties[q][0]])[0]
    # the trade-off in one sentence
    assert rec.choice.count(". ") == 0 and "best trade-off" in rec.choice
    assert rec.quant in rec.choice


@pytest.mark.parametrize("rig_name", list(RIGS))
def test_smaller_models_reach_the_minimum_same_family_first(rig_name: str) -> None:
    model_id, min_tok_s = SLOW[rig_name]
    spec, rig = _spec(model_id), RIGS[rig_name]
    ideas = smaller_models(spec, rig, _settings(min_tok_s), _perf(), _catalog())
    assert ideas, rig_name
    for idea in ideas:
        smaller = _spec(idea.model_id)
        assert idea.tok_s is not None and idea.tok_s >= min_tok_s
        assert above_floor(smaller, idea.quant)
        assert smaller.geometry.n_embd * smaller.geometry.n_layer <= (
            spec.geometry.n_embd * spec.geometry.n_layer
        )
    line = spec.family.split()[0]
    families = [_spec(i.model_id).family.split()[0] == line for i in ideas]
    assert families == sorted(families, reverse=True)  # the same family first


def test_a_model_fast_enough_suggests_no_smaller_one() -> None:
    rig = RIGS["24 GB GPU"]
    spec = _spec("llama-3.1-8b-instruct")
    assert smaller_models(spec, rig, _settings(8.0), _perf(), _catalog()) == ()


def test_llama_8b_on_a_cpu_only_24gb_rig() -> None:
    """The case this rule was made for: Q4_K_M-class quality, not a 2-bit file."""
    spec, rig = _spec("llama-3.1-8b-instruct"), RIGS["cpu-only 24 GB"]
    rec = _recommended(plan(spec, rig, _settings(8.0), _perf()))
    assert rec.quality is not None and above_floor(spec, rec.quant)
    assert QUALITY_FLOOR in ("moderate loss",)
    ideas = smaller_models(spec, rig, _settings(8.0), _perf(), _catalog())
    assert ideas[0].model_id.startswith("llama-3.2-")


BASE = {}


def _answer(rig: Rig, factor: float) -> tuple[str | None, str | None, str]:
    bw = CPU.memory_bandwidth_gbps
    assert bw is not None
    changed = replace(rig, cpu=replace(rig.cpu, memory_bandwidth_gbps=bw * factor))
    spec = _spec("llama-3.1-8b-instruct")
    p = plan(spec, changed, _settings(8.0), _perf())
    rec = _recommended(p)
    return rec.path.value, rec.quant, rec.choice.split(" at ")[0]


@settings(max_examples=12, deadline=None)
@given(factor=st.floats(0.7, 1.3))
def test_the_same_answer_under_bandwidth_noise(factor: float) -> None:
    """The RAM bandwidth measured on a busy machine moves by up to ±30 %: the
    recommendation on a CPU-only rig stays the same."""
    rig = RIGS["cpu-only 24 GB"]
    if "base" not in BASE:
        BASE["base"] = _answer(rig, 1.0)
    assert _answer(rig, factor)[:2] == BASE["base"][:2]


def test_the_sentence_says_when_only_quantizations_below_the_floor_are_fast() -> None:
    from types import SimpleNamespace

    from rigspark_gui.core.plan.quant_search import _choice

    spec = _spec("llama-3.1-8b-instruct")
    assert above_floor(spec, "Q4_K_M") and not above_floor(spec, "IQ2_S")

    def timed(quant: str, tok_s: float):  # type: ignore[no-untyped-def]
        return (SimpleNamespace(quant=quant), SimpleNamespace(tok_s=tok_s))

    fitting = [timed("Q4_K_M", 3.0), timed("IQ2_S", 10.3)]
    said = _choice(spec, fitting, fitting[0], 8.0)  # type: ignore[arg-type]
    assert said.startswith("only quantizations below the moderate loss floor reach 8 tok/s")
    assert "IQ2_S" in said and "10.3 tok/s" in said and "no quantization reaches" not in said
    alone = _choice(spec, fitting[:1], fitting[0], 8.0)  # type: ignore[arg-type]
    assert alone.startswith("no quantization reaches 8 tok/s here")
