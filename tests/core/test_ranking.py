"""Catalog ranking: verdicts and order."""

from rigspark_gui.core.ranking import Verdict, rank_models
from rigspark_gui.core.rig import GIB, Cpu, Rig
from rigspark_gui.core.settings import PlanSettings
from tests.conftest import LLAMA_31_8B, spec_of

LLAMA_405B = LLAMA_31_8B.model_copy(
    update={"n_layer": 126, "n_embd": 16384, "n_head": 128, "n_ff": 53248}
)


def test_verdicts_and_order(rig2x3090, perf) -> None:
    specs = [spec_of(LLAMA_405B, "big"), spec_of(LLAMA_31_8B, "small")]
    rows = rank_models(specs, rig2x3090, PlanSettings(context=200_000), perf)
    assert [r.model_id for r in rows] == ["small", "big"]
    small, big = rows
    assert small.verdict is Verdict.FITS and small.note == "context capped at 131072"
    assert big.verdict is Verdict.NO and big.note.startswith("needs ")


def test_cpu_only_models_are_slow(perf) -> None:
    rig = Rig(ram_total_bytes=64 * GIB, cpu=Cpu(memory_bandwidth_gbps=20.0))
    (row,) = rank_models([spec_of(LLAMA_31_8B)], rig, PlanSettings(), perf)
    assert row.verdict is Verdict.SLOW and row.path.value == "cpu"
