"""Auto's speed tie when nothing reaches the minimum: the best quality whose speed is
within the band of the fastest at the measured RAM bandwidth and at BANDWIDTH_SPREAD
either side; where none manages all three, the measured bandwidth alone decides."""

from __future__ import annotations

from types import SimpleNamespace

from rigspark_gui.core.plan.quant_search import _fastest


def _timed(quant: str, tok_s: float):  # type: ignore[no-untyped-def]
    return (SimpleNamespace(quant=quant), SimpleNamespace(tok_s=tok_s))


FITTING = [_timed("Q6_K", 3.0), _timed("Q5_K_M", 3.4), _timed("Q4_K_M", 4.0)]  # best first


def test_a_tie_must_hold_at_every_bandwidth_the_measurement_allows() -> None:
    # at the measured bandwidth Q6_K is within 25 % of Q4_K_M (3.0 of 4.0), but 30 %
    # lower it is not (2.0 of 3.0): Q5_K_M ties at all three
    spread = [[2.0, 3.9], [2.4, 4.0], [3.0, 4.1]]
    assert _fastest(FITTING, spread)[0].quant == "Q5_K_M"


def test_where_nothing_ties_everywhere_the_measured_bandwidth_decides() -> None:
    spread = [[1.0, 3.9], [1.0, 4.0], [3.0, 1.0]]
    assert _fastest(FITTING, spread)[0].quant == "Q6_K"
    assert _fastest(FITTING)[0].quant == "Q6_K"  # no spread known: the measured one only


def test_outside_the_band_the_fastest_wins() -> None:
    fitting = [_timed("Q6_K", 2.0), _timed("Q4_K_M", 4.0)]
    assert _fastest(fitting, [[1.5, 2.5], [3.0, 5.0]])[0].quant == "Q4_K_M"
