"""Serving decode speed against published vLLM runs (validation/serving_speed.py): every
run held out of the 4-bit factor's fit stays within 25 % of what it measured, and the
factor is what its two fitted runs give."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.core.serving.checkpoint import FOUR_BIT_DECODE
from validation.serving_speed import CASES, FITTED, predict

HELD_OUT = [c for c in CASES if (c.model, c.fmt) not in FITTED]


@pytest.mark.parametrize("case", HELD_OUT, ids=lambda c: f"{c.model}-{c.fmt}-{c.gpu}-{c.users}")
def test_held_out_runs_within_25_percent(case) -> None:  # type: ignore[no-untyped-def]
    point, _low, _high = predict(case)
    assert abs(point / case.measured_tok_s - 1) <= 0.25


def test_the_four_bit_factor_is_its_fit() -> None:
    ratios = []
    for c in CASES:
        if (c.model, c.fmt) in FITTED:
            point, _, _ = predict(c)
            ratios.append(c.measured_tok_s / (point / FOUR_BIT_DECODE))
    fitted = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    assert fitted == pytest.approx(FOUR_BIT_DECODE, abs=0.01)
