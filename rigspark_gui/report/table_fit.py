"""Column widths for tables Qt's rich-text engine lays out (the PDF, the report viewer).

Qt's table layout takes a column's narrowest width to be one character (its text may
break anywhere), so a wide table squeezed into a page broke "Quant" into "Quan t" and
"Q4_K_M" into "Q4_K / _M" while the columns that could not wrap kept their full width.
Here each column is at least as wide as its longest unbreakable run ("cpu-offload",
"21.0 GiB", "(28–40)"), the columns that can reach their one-line width cheaply get it,
and the long text columns take what is left, as a browser's automatic layout does.
Measuring is the caller's (Qt's font metrics); this module only does the arithmetic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

NBSP = "\u00a0"
# a number and its unit stay on one line: "21.0 GiB", "33 tok/s", "2 GPUs", "8.2 s"
_NUMBER_UNIT = re.compile(r"(?<=\d) (?=[^\W\d_])")
# a leading mark stays with its word: "★ multi-gpu", "✓ fits", "⚠ tight"
_MARK = re.compile(r"^([^\w\s(\[]) ")
# short joiners never start or end a line: "KLD ≈ 0.03", "loss · KLD", "K q8_0 / V"
_JOINED = re.compile(r" ([≈=×/]) ")
_BEFORE = re.compile(r" (?=·)")
# Qt may also break after a hyphen, dash or slash inside a word ("cpu-|offload",
# "5.3–|37.9", "tok/|s"); a word joiner there (drawn as nothing, and left out when the
# PDF's text is copied) keeps the word whole
WORD_JOINER = "\u2060"
_INNER_BREAK = re.compile(r"(?<=\S)([-–/])(?=\S)")

# text, bold, point size -> width in layout pixels
Measure = Callable[[str, bool, float], float]


@dataclass(frozen=True, slots=True)
class TableFit:
    """How to measure text and how wide a table may be (layout pixels)."""

    measure: Measure
    width: float
    # the body's point size first, then the smaller ones a wide table may take
    points: tuple[float, ...] = (9.0, 8.0, 7.0)
    # each cell's padding on one side (the table's cellpadding) and border
    padding: int = 2
    border: int = 1


@dataclass(frozen=True, slots=True)
class Columns:
    """Each column's width (padding included), or None for Qt's own layout; and the
    point size the table is set in, or None for the body's."""

    widths: tuple[int, ...] | None = None
    points: float | None = None


def keep_together(text: str) -> str:
    """`text` with non-breaking spaces where a line break would split what belongs
    together; a line may still break at every other space."""
    text = _NUMBER_UNIT.sub(NBSP, text)
    text = _MARK.sub(lambda m: m.group(1) + NBSP, text)
    text = _JOINED.sub(lambda m: NBSP + m.group(1) + NBSP, text)
    text = _INNER_BREAK.sub(lambda m: m.group(1) + WORD_JOINER, text)
    return _BEFORE.sub(NBSP, text)


def _runs(text: str) -> list[str]:
    """What a line never breaks inside: the text between ordinary spaces."""
    return [r for r in text.split(" ") if r] or [""]


def _widths(
    cells: list[list[tuple[str, bool]]], fit: TableFit, points: float
) -> tuple[list[float], list[float]]:
    """Per column: the longest unbreakable run and the longest one-line text."""
    lows = [
        max(fit.measure(run, bold, points) for text, bold in col for run in _runs(text))
        for col in cells
    ]
    highs = [max(fit.measure(text, bold, points) for text, bold in col) for col in cells]
    return lows, highs


def fit_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], fit: TableFit) -> Columns:
    """Column widths that break no word and fit `fit.width`, in the largest point size
    that allows it. Texts are as drawn (after `keep_together`); headers are bold."""
    cols = len(headers)
    cells = [
        [(headers[c], True), *((r[c], False) for r in rows if c < len(r))] for c in range(cols)
    ]
    # Qt draws a table `sum(widths) + 2 * cols + 2` wide with border 1; +1 each: rounding
    room = fit.width - 2 * fit.border - cols * (2 * fit.border + 2 * fit.padding + 1)
    lows: list[float] = []
    points = fit.points[0]
    for points in fit.points:
        lows, highs = _widths(cells, fit, points)
        if points == fit.points[0] and sum(highs) <= room:
            return Columns()  # every cell on one line: Qt's own layout does that
        if sum(lows) <= room:
            break
    widths = list(lows)
    left = room - sum(lows)
    # cheapest first: every column that can be made one line wide is, while room lasts
    for c in sorted(range(cols), key=lambda c: highs[c] - lows[c]):
        if 0 < highs[c] - widths[c] <= left:
            left -= highs[c] - widths[c]
            widths[c] = highs[c]
    # the columns still wrapping (the long texts) share what is left, by what they lack
    short = {c: highs[c] - widths[c] for c in range(cols) if highs[c] > widths[c]}
    if left > 0 and short:
        total = sum(short.values())
        for c, lack in short.items():
            widths[c] += left * lack / total
    return Columns(
        tuple(math.ceil(w + 2 * fit.padding + 1) for w in widths),
        None if points == fit.points[0] else points,
    )
