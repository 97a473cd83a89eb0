"""Parameter counts as people write them, rounded before the unit is chosen: Gemma 3 1B
(999.9M parameters) reads 1.0B, never "1000M"."""

from __future__ import annotations

import pytest

from rigspark_gui.core.units import param_text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (999.4e6, "999M"),
        (999.5e6, "1.0B"),
        (999.6e6, "1.0B"),
        (999_885_952, "1.0B"),  # Gemma 3 1B
        (1000e6, "1.0B"),
        (1.5e9, "1.5B"),
        (70.6e9, "70.6B"),
        (350e6, "350M"),
        (10e6, "10M"),
        (9.96e6, "10M"),  # not "10.0M"
        (9.94e6, "9.9M"),
        (4.2e6, "4.2M"),
        (999.6e3, "1.0M"),  # not "1000K"
        (999.4e3, "999K"),
        (12e3, "12K"),
        (0, "0"),
    ],
)
def test_the_unit_follows_the_rounded_figure(n: float, text: str) -> None:
    assert param_text(n) == text


def test_no_figure_reaches_a_thousand_of_its_unit() -> None:
    for exponent in range(3, 12):
        for mantissa in range(9990, 10010):
            shown = param_text(mantissa * 10 ** (exponent - 4))
            number = shown.rstrip("KMB")
            assert float(number) < 1000 or shown.endswith("B"), shown
