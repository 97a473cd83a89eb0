"""Sizing helpers that make widgets fit what they show.

`fit_widths` is the arithmetic (no Qt): columns at their natural width when the room
allows, else each gives up width in proportion to what it can spare down to its widest
word. `ColumnFit` applies it to a table whenever the table or its text changes size, and
lets the rows grow to the wrapped lines, so a table never scrolls sideways while its
words fit. `TextHeightFit` sizes a read-only text box to its whole text, up to a cap with
a scroll bar beyond.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from PySide6.QtCore import QEvent, QObject, QSize, Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QAbstractItemView, QLayout, QPlainTextEdit, QTableView, QWidget

CELL_PADDING_PX = 14  # a cell's margins and its focus frame
ROW_PADDING_PX = 6  # air above and below a row's lines


def fit_widths(natural: Sequence[int], least: Sequence[int], room: int) -> list[int]:
    """Column widths that fit `room`: the natural ones when they fit; else each column
    gives up width in proportion to what it can spare (natural less least), never below
    its least. When even the least widths do not fit, those."""
    least = [min(lo, n) for lo, n in zip(least, natural, strict=True)]
    over = sum(natural) - room
    if over <= 0:
        return list(natural)
    spare = [n - lo for n, lo in zip(natural, least, strict=True)]
    can = sum(spare)
    if can <= 0:
        return list(least)
    share = min(1.0, over / can)
    return [n - math.ceil(s * share) for n, s in zip(natural, spare, strict=True)]


def widest_word_px(metrics: QFontMetrics, text: str) -> int:
    """The widest piece a wrapped cell can be broken into (lines, then words)."""
    words = [w for line in text.splitlines() for w in line.split()]
    return max((metrics.horizontalAdvance(w) for w in words), default=0)


def widest_line_px(metrics: QFontMetrics, text: str) -> int:
    return max((metrics.horizontalAdvance(line) for line in text.splitlines()), default=0)


class ColumnFit(QObject):
    """Keeps a table's columns inside its viewport: call `refit()` after changing its
    text; it refits by itself when the table is resized. Wrapping (`wrap`): a cell may
    break at its spaces, down to its widest word, except in the `keep` columns. Without
    wrapping, only the `shrink` columns give up width, down to their least width in
    pixels, and elide their text. `fitted` follows each refit."""

    fitted = Signal()

    def __init__(
        self,
        view: QTableView,
        keep: Sequence[int] = (),
        *,
        wrap: bool = True,
        shrink: Mapping[int, int] | None = None,
    ) -> None:
        super().__init__(view)
        self._view = view
        self._keep = frozenset(keep)
        self._wrap = wrap
        self._shrink = dict(shrink or {})
        self._room = -1
        view.setWordWrap(wrap)
        view.setTextElideMode(Qt.TextElideMode.ElideRight)
        view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        view.viewport().installEventFilter(self)

    def refit(self) -> None:
        view = self._view
        model = view.model()
        header = view.horizontalHeader()
        n = header.count()
        if model is None or n == 0:
            return
        view.resizeColumnsToContents()
        natural = [header.sectionSize(c) for c in range(n)]
        cell = QFontMetrics(view.font())
        head = QFontMetrics(header.font())
        least = []
        for c in range(n):
            if not self._wrap:
                least.append(self._shrink.get(c, natural[c]))
                continue
            if c in self._keep or header.isSectionHidden(c):
                least.append(natural[c])
                continue
            title = str(model.headerData(c, Qt.Orientation.Horizontal) or "")
            words = [
                widest_word_px(cell, str(model.index(r, c).data() or ""))
                for r in range(model.rowCount())
                if not view.isRowHidden(r)
            ]
            least.append(
                max([widest_line_px(head, title), *words, header.minimumSectionSize()])
                + CELL_PADDING_PX
            )
        room = view.viewport().width()
        self._room = room
        for c, w in enumerate(fit_widths(natural, least, room)):
            if not header.isSectionHidden(c):
                header.resizeSection(c, w)
        if self._wrap:
            view.resizeRowsToContents()
            rows = view.verticalHeader()
            for r in range(model.rowCount()):
                if not view.isRowHidden(r):
                    rows.resizeSection(r, rows.sectionSize(r) + ROW_PADDING_PX)
        self.fitted.emit()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            event.type() == QEvent.Type.Resize
            and watched is self._view.viewport()
            and self._view.viewport().width() != self._room
        ):
            self.refit()
        return False


def _others_px(layout: QLayout, widget: QWidget) -> int:
    """The least height a vertical layout needs for everything but `widget`: each
    item's minimum, or for a widget with wrapped text the height it takes at the
    layout's width."""
    parent = layout.parentWidget()
    width = layout.geometry().width() or (parent.width() if parent is not None else 0)
    total, shown = 0, 0
    for i in range(layout.count()):
        item = layout.itemAt(i)
        if item is None or item.widget() is widget or item.isEmpty():
            continue
        height = item.minimumSize().height()
        if item.widget() is not None and item.hasHeightForWidth():  # a wrapped label
            height = max(height, item.heightForWidth(width))
        total += height
        shown += 1
    m = layout.contentsMargins()
    return total + max(layout.spacing(), 0) * shown + m.top() + m.bottom()


class FittedTextEdit(QPlainTextEdit):
    """A text box as tall as its text, wrapped lines included, up to `max_lines`. In a
    window too short for that and for its neighbours' own minimum heights it gives way,
    down to `min_lines`. A scroll bar shows the rest."""

    def __init__(
        self, parent: QWidget | None = None, *, min_lines: int = 4, max_lines: int = 14
    ) -> None:
        super().__init__(parent)
        self._min, self._max = min_lines, max_lines
        self._least_px = 0  # the minimum height last asked of the parent's layout
        self.document().documentLayout().documentSizeChanged.connect(self._on_size_changed)
        if parent is not None:
            parent.installEventFilter(self)
        self._on_size_changed()

    def lines(self) -> int:
        """Its text's lines as laid out at its width (the plain-text layout measures its
        height in lines)."""
        return max(1, math.ceil(self.document().documentLayout().documentSize().height()))

    def height_for(self, lines: int) -> int:
        margins = self.contentsMargins()
        return math.ceil(
            lines * self.fontMetrics().lineSpacing()
            + 2 * self.document().documentMargin()
            + margins.top()
            + margins.bottom()
            + 2 * self.frameWidth()
        )

    def _least(self) -> int:
        """Its whole text up to `max_lines`, less what the parent cannot spare once the
        rest of its layout has its minimum height; never under `min_lines`."""
        whole = self.height_for(min(self.lines(), self._max))
        floor = min(whole, self.height_for(self._min))
        parent = self.parentWidget()
        layout = parent.layout() if parent is not None else None
        if parent is None or layout is None or not parent.isVisible():
            return whole
        return max(floor, min(whole, parent.height() - _others_px(layout, self)))

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self.height_for(min(self.lines(), self._max)))

    def minimumSizeHint(self) -> QSize:
        return QSize(super().minimumSizeHint().width(), self._least_px or self._least())

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kinds = (QEvent.Type.Resize, QEvent.Type.LayoutRequest, QEvent.Type.Show)
        if watched is self.parentWidget() and event.type() in kinds:
            self._on_size_changed()  # the room, or the neighbours' minimums, changed
        return False

    def _on_size_changed(self, *_args: object) -> None:
        self.setMaximumHeight(self.height_for(min(self.lines(), self._max)))
        least = self._least()
        if least != self._least_px:
            self._least_px = least
            self.updateGeometry()
