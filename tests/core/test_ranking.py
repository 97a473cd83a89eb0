"""Catalog ranking: verdicts and order."""

from dataclasses import replace

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.plan.ranking import RankVerdict, rank_models
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings
from tests.conftest import LLAMA_31_8B, spec_of

LLAMA_405B = replace(LLAMA_31_8B, n_layer=126, n_embd=16384, n_head=128, n_ff=53248)


def test_verdicts_and_order(rig2x3090, perf) -> None:
    specs = [spec_of(LLAMA_405B, "big"), spec_of(LLAMA_31_8B, "small")]
    rows = rank_models(specs, rig2x3090, PlanSettings(context=200_000), perf)
    assert [r.model_id for r in rows] == ["small", "big"]
    small, big = rows
    assert small.verdict is RankVerdict.FITS and small.note == "context capped at 131072"
    assert big.verdict is RankVerdict.NO and big.note.startswith("needs ")


def test_cpu_only_models_are_slow(perf) -> None:
    rig = Rig(ram_total_bytes=64 * GIB, cpu=Cpu(memory_bandwidth_gbps=20.0))
    (row,) = rank_models([spec_of(LLAMA_31_8B)], rig, PlanSettings(), perf)
    assert row.verdict is RankVerdict.SLOW and row.path.value == "cpu"


def _rigs() -> dict[str, Rig]:
    def nvidia(i: int, gib: int) -> Gpu:
        return Gpu(
            name=f"GPU {i}", vendor=Vendor.NVIDIA, index=i, memory_total_bytes=gib * GIB,
            bandwidth_gbps=900.0, fp16_tflops=70.0,
        )  # fmt: skip

    cpu = Cpu(name="CPU", cores=16, memory_bandwidth_gbps=60.0, features=("avx2",))
    mac = Gpu(
        name="Apple M2 Ultra", vendor=Vendor.APPLE, index=0, memory_total_bytes=192 * GIB,
        bandwidth_gbps=800.0, fp16_tflops=27.0, unified=True,
    )  # fmt: skip
    return {
        "1x24": Rig(gpus=(nvidia(0, 24),), ram_total_bytes=64 * GIB, cpu=cpu),
        "2x24": Rig(gpus=(nvidia(0, 24), nvidia(1, 24)), ram_total_bytes=64 * GIB, cpu=cpu),
        "3 uneven": Rig(
            gpus=(nvidia(0, 8), nvidia(1, 16), nvidia(2, 80)), ram_total_bytes=256 * GIB, cpu=cpu
        ),
        "unified": Rig(gpus=(mac,), ram_total_bytes=192 * GIB, unified_memory=True, cpu=cpu),
        "cpu only": Rig(ram_total_bytes=128 * GIB, cpu=cpu),
    }


@pytest.mark.parametrize("rig_name", list(_rigs()))
@pytest.mark.parametrize(
    ("kv", "min_tok_s"),
    [
        (KvCacheType.F16, 8.0),
        (KvCacheType.Q4_0, 8.0),
        (KvCacheType.F16, 0.0),
        (KvCacheType.F16, 60.0),
    ],
)
def test_ranking_agrees_with_the_full_plan(
    rig_name: str, kv: KvCacheType, min_tok_s: float, perf
) -> None:
    """Ranking plans no further than it must; its answer is still the plan's, whatever
    the minimum speed Auto must reach."""
    rig = _rigs()[rig_name]
    s = PlanSettings(context=32768, kv_k=kv, kv_v=kv, flash_attn=True, min_tok_s=min_tok_s)
    specs = list(load_catalog().specs())
    ranked = {r.model_id: r for r in rank_models(specs, rig, s, perf)}
    for spec in specs:
        ctx = min(s.context, spec.geometry.context_length)
        row = ranked[spec.id]
        try:
            full = plan(spec, rig, replace(s, context=ctx), perf, ladders=False)
        except InvalidSettingsError as refused:  # llama.cpp refuses these settings
            assert row.verdict is RankVerdict.NO and row.note == str(refused), spec.id
            continue
        best = next((p for p in full.paths if p.path is full.recommended), None)
        if best is None:
            assert row.verdict is RankVerdict.NO, spec.id
            continue
        assert (row.path, row.quant, row.required_bytes) == (
            best.path,
            best.quant,
            best.required_bytes,
        ), spec.id
        assert (row.tok_s, row.low_tok_s, row.high_tok_s) == (
            best.throughput.tok_s,
            best.throughput.low_tok_s,
            best.throughput.high_tok_s,
        ), spec.id
