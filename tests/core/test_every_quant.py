"""Every llama-quantize type plans on every catalog model, and Auto never recommends a
type that another smaller one beats on measured quality."""

from __future__ import annotations

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.model.quant_recipe import LLAMA_QUANTIZE_TYPES
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings


@pytest.fixture(scope="module")
def specs():
    return [s for s in load_catalog().specs() if s.quants != ("MXFP4",)]


def test_every_type_is_offered_and_sized_on_every_catalog_model(specs) -> None:
    for spec in specs:
        missing = [t for t in LLAMA_QUANTIZE_TYPES if t not in spec.available_quants]
        assert missing == [], spec.id
        sizes = {t: weights_layout(spec, t).total_bytes for t in ("Q8_0", "Q4_K_M", "IQ2_XS")}
        assert sizes["Q8_0"] > sizes["Q4_K_M"] > sizes["IQ2_XS"] > 0, spec.id


def _rig(gpus: int, gib: int) -> Rig:
    return Rig(
        name="t",
        gpus=tuple(
            Gpu(
                name="NVIDIA GeForce RTX 3090",
                vendor=Vendor.NVIDIA,
                index=i,
                memory_total_bytes=gib * GIB,
                bandwidth_gbps=936.2,
                fp16_tflops=71.0,
            )
            for i in range(gpus)
        ),
        ram_total_bytes=64 * GIB,
        cpu=Cpu(name="CPU", cores=16, memory_bandwidth_gbps=51.2),
    )


@pytest.mark.parametrize("model_id", ["llama-3.3-70b-instruct", "qwen3-30b-a3b", "phi-4"])
@pytest.mark.parametrize("gpus", [0, 1, 2])
def test_auto_never_recommends_a_dominated_type(specs, model_id: str, gpus: int) -> None:
    spec = next(s for s in specs if s.id == model_id)
    perf = load_perf()
    for context in (4096, 32768):
        for min_speed in (0.0, 8.0):
            s = PlanSettings(context=context, min_tok_s=min_speed)
            p = plan(spec, _rig(gpus, 24), s, perf, ladders=False)
            for path in p.paths:
                if path.fits:
                    assert path.quant not in spec.dominated, (path.path, path.quant)


def test_a_fixed_dominated_type_is_still_planned(specs) -> None:
    spec = next(s for s in specs if s.id == "llama-3.1-8b-instruct")
    p = plan(spec, _rig(1, 24), PlanSettings(quant="Q4_0"), load_perf(), ladders=False)
    assert {x.quant for x in p.paths} == {"Q4_0"}


@pytest.mark.parametrize(
    "model_id",
    ["llama-3.1-8b-instruct", "qwen3-30b-a3b", "deepseek-v2-lite-chat", "gemma-3-4b-it",
     "phi-3.5-mini-instruct", "mixtral-8x7b-instruct-v0.1", "llama-3.2-1b-instruct"],
)  # fmt: skip
def test_the_size_floor_never_exceeds_the_real_size(specs, model_id: str) -> None:
    """The planner skips a quantization whose floor cannot fit without synthesizing it:
    the floor must stay under the synthesized weights for every type."""
    from rigspark_gui.core.memory import weights_floor

    spec = next(s for s in specs if s.id == model_id)
    for q in spec.available_quants:
        layout = weights_layout(spec, q)
        assert weights_floor(spec, q) <= layout.total_bytes, q
        assert weights_floor(spec, q, True) <= layout.total_bytes - layout.input_bytes, q
