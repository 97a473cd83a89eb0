"""One verdict vocabulary — fits / tight / does not fit — with the margin kept free
visible: the chart, the Paths table, the report and the CLI text say the same."""

from __future__ import annotations

import pytest

from rigspark_gui.core.chart_spec import fit_chart
from rigspark_gui.core.placement import HEADROOM
from rigspark_gui.core.plan.paths import TIGHT_SHARE, Reason, Verdict
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Cpu, Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.report.text import format_plan
from tests.conftest import LLAMA_31_8B, simple_speed_model, spec_of

STATUS = {Verdict.FITS: "fits", Verdict.TIGHT: "tight", Verdict.NO: "over"}


def cpu_rig(ram_gib: float) -> Rig:
    return Rig(ram_total_bytes=int(ram_gib * GIB), ram_available_bytes=int(ram_gib * GIB),
               cpu=Cpu(cores=8, memory_bandwidth_gbps=50.0))  # fmt: skip


@pytest.mark.parametrize("ram_gib", [4.0, 5.45, 5.8, 6.3, 9.0, 40.0])
def test_chart_table_and_text_say_the_same(ram_gib: float) -> None:
    spec = spec_of(LLAMA_31_8B)
    p = plan(spec, cpu_rig(ram_gib), PlanSettings(quant="Q4_K_M"), simple_speed_model())
    path = p.paths[0]
    row = fit_chart(p).rows[0]
    assert row.status == STATUS[path.verdict]
    text = format_plan(p)
    assert f"cpu                    {path.verdict.value}" in text
    spare = path.usable_bytes - path.required_bytes
    if path.fits:
        assert (path.verdict is Verdict.TIGHT) == (spare < TIGHT_SHARE * path.usable_bytes)


def test_a_bar_short_of_the_line_that_does_not_fit_shows_the_margin() -> None:
    """The user's case: the bar ends before the limit line yet does not fit — the 5 %
    kept free is drawn and named."""
    spec = spec_of(LLAMA_31_8B)
    s = PlanSettings(quant="Q4_K_M")
    need = plan(spec, cpu_rig(40), s, simple_speed_model()).paths[0].required_bytes
    ram = (need / (1 - HEADROOM / 2)) / GIB  # more than needed, less than needed + margin
    p = plan(spec, cpu_rig(ram), s, simple_speed_model())
    path, row = p.paths[0], fit_chart(p).rows[0]
    end = sum(seg.width_gib for seg in row.segments if seg.role != "shortfall")
    assert not path.fits and path.verdict is Verdict.NO
    assert row.margin_gib < end <= row.capacity_gib
    assert "5% is kept free" in row.annotation


def test_reasons_are_said_in_words() -> None:
    assert Reason.RAM.words == "system RAM" and Reason.VRAM.words == "GPU memory"
    spec = spec_of(LLAMA_31_8B)
    p = plan(spec, cpu_rig(2), PlanSettings(), simple_speed_model())
    assert "ram-bound" not in format_plan(p)
