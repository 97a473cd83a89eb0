"""A chart's place in the window before the chart exists.

The chart widgets are pyqtgraph (and with it numpy): importing them is about half of the
window's start-up. A slot takes the chart's space in the layout from the start, paints
the plot's background, and builds the chart on the event-loop turn after the slot is
first painted, so the window appears first and the chart fills its place without
moving anything. Asking for the chart (`chart()`) builds it at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from PySide6.QtCore import QTimer
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QVBoxLayout, QWidget

W = TypeVar("W", bound=QWidget)


class ChartSlot(QWidget, Generic[W]):
    def __init__(
        self,
        make: Callable[[], W],
        on_ready: Callable[[W], None] | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._make = make
        self._on_ready = on_ready
        self._chart: W | None = None
        self._scheduled = False
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)

    @property
    def ready(self) -> bool:
        return self._chart is not None

    def chart(self) -> W:
        if self._chart is None:
            chart = self._make()
            self._chart = chart
            self._layout.addWidget(chart)
            if self.isVisible():
                chart.show()  # now, not on the next turn of the event loop
                self._layout.activate()
            if self._on_ready is not None:
                self._on_ready(chart)
        return self._chart

    def paintEvent(self, event: QPaintEvent) -> None:
        if self._chart is None:
            p = QPainter(self)
            p.fillRect(self.rect(), self.palette().base())
            p.end()
            if not self._scheduled:
                self._scheduled = True
                QTimer.singleShot(0, self.chart)
        super().paintEvent(event)
