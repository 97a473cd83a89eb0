"""The Layers tab's picture of a device: one block per placed unit, its width its share
of the device's memory, weights and KV cache in the chart colours, experts that came
from another device's layer drawn apart (hatched). Click selects (Ctrl adds); layers
dragged from the strip (the selection, or the block under the mouse) move to the strip
or list they are dropped on, as on the lane's list."""

from __future__ import annotations

from typing import NamedTuple

from PySide6.QtCore import QMimeData, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QDrag,
    QDragEnterEvent,
    QDropEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
)
from PySide6.QtWidgets import QApplication, QWidget

from rigspark_gui.core.chart_spec import COLOURS
from rigspark_gui.core.placement import INPUT
from rigspark_gui.ui.lane_model import LAYERS_MIME, encode_units


class StripBlock(NamedTuple):
    unit: str
    weights_bytes: int
    kv_bytes: int
    guest_experts: bool  # routed experts of a layer placed on another device


class LayerStrip(QWidget):
    unit_clicked = Signal(str, bool)  # unit id, add to the selection
    units_dropped = Signal(QMimeData)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.blocks: list[StripBlock] = []
        self.capacity_bytes = 0
        self.selected: set[str] = set()
        self._drop_target = False
        self._press: tuple[QPointF, str] | None = None
        self.setAcceptDrops(True)
        self.setMinimumHeight(26)
        self.setToolTip(
            "Each block is a layer sized by its bytes (blue weights, orange KV cache); "
            "hatched blocks are experts of layers placed elsewhere. Click to select, "
            "Ctrl+click to add, drag layers to another device's strip or list to move them."
        )

    def sizeHint(self) -> QSize:
        return QSize(200, 26)

    def set_blocks(self, blocks: list[StripBlock], capacity_bytes: int) -> None:
        if blocks == self.blocks and capacity_bytes == self.capacity_bytes:
            return  # an untouched lane is not repainted
        self.blocks, self.capacity_bytes = blocks, capacity_bytes
        self.update()

    def set_selected(self, units: set[str]) -> None:
        if units != self.selected:
            self.selected = units
            self.update()

    def block_rects(self) -> list[tuple[QRectF, str]]:
        """Where each unit is drawn (for tests and clicks)."""
        return [(rect, b.unit) for rect, b in self._layout()]

    def _layout(self) -> list[tuple[QRectF, StripBlock]]:
        total = max(self.capacity_bytes, sum(b.weights_bytes + b.kv_bytes for b in self.blocks), 1)
        scale = (self.width() - 2) / total
        x, out = 1.0, []
        for b in self.blocks:
            w = max((b.weights_bytes + b.kv_bytes) * scale, 1.0)
            out.append((QRectF(x, 3, w, self.height() - 6), b))
            x += w
        return out

    def paintEvent(self, _event: QPaintEvent) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), self.palette().base())
        weights, kv = QColor(COLOURS["weights"]), QColor(COLOURS["kv"])
        for rect, b in self._layout():
            share = b.weights_bytes / max(b.weights_bytes + b.kv_bytes, 1)
            w_rect = QRectF(rect.x(), rect.y(), rect.width() * share, rect.height())
            if b.guest_experts:
                p.fillRect(w_rect, QBrush(weights, Qt.BrushStyle.BDiagPattern))
            else:
                p.fillRect(w_rect, weights)
            p.fillRect(QRectF(w_rect.right(), rect.y(), rect.width() - w_rect.width(),
                              rect.height()), kv)  # fmt: skip
            if rect.width() >= 3:
                p.setPen(QPen(self.palette().base().color(), 1))
                p.drawLine(rect.topRight(), rect.bottomRight())
            if b.unit in self.selected:
                p.setPen(QPen(self.palette().highlight().color(), 2))
                p.drawRect(rect.adjusted(1, -1, -1, 1))
        if self._drop_target:
            p.setPen(QPen(self.palette().highlight().color(), 2, Qt.PenStyle.DashLine))
            p.drawRect(self.rect().adjusted(1, 1, -1, -1))
        p.end()

    def unit_at(self, x: float) -> str | None:
        for rect, b in self._layout():
            if rect.left() <= x <= rect.right():
                return b.unit
        return None

    def mousePressEvent(self, event: QMouseEvent) -> None:
        unit = self.unit_at(event.position().x())
        self._press = None
        if unit is None:
            return
        add = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
        # as in a list: a press on a selected block may start dragging the whole
        # selection, so the click only narrows the selection when the button is released
        if add or unit not in self.selected:
            self.unit_clicked.emit(unit, add)
        if event.button() == Qt.MouseButton.LeftButton:
            self._press = (event.position(), unit)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        if self._press is None or not event.buttons() & Qt.MouseButton.LeftButton:
            return
        start, unit = self._press
        if (event.position() - start).manhattanLength() < QApplication.startDragDistance():
            return
        self._press = None
        units = self.drag_units(unit)
        if units:
            self.exec_drag(encode_units(units))

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._press is not None:
            unit = self._press[1]
            add = bool(event.modifiers() & Qt.KeyboardModifier.ControlModifier)
            if not add and self.selected != {unit}:
                self.unit_clicked.emit(unit, False)
        self._press = None

    def drag_units(self, pressed: str) -> list[str]:
        """What a drag from `pressed` carries: the selection when the block is part of it,
        else that block alone. Experts drawn here for a layer placed elsewhere stay put, and
        the input embedding never leaves the CPU (as in llama.cpp)."""
        own = [b.unit for b in self.blocks if not b.guest_experts and b.unit != INPUT]
        if pressed not in own:
            return []
        if pressed in self.selected:
            return [u for u in own if u in self.selected]
        return [pressed]

    def exec_drag(self, mime: QMimeData) -> None:
        drag = QDrag(self)
        drag.setMimeData(mime)
        drag.exec(Qt.DropAction.MoveAction)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasFormat(LAYERS_MIME):
            self._drop_target = True
            self.update()
            event.acceptProposedAction()

    def dragLeaveEvent(self, _event: object) -> None:
        self._drop_target = False
        self.update()

    def dropEvent(self, event: QDropEvent) -> None:
        self._drop_target = False
        self.update()
        if event.mimeData().hasFormat(LAYERS_MIME):
            self.units_dropped.emit(event.mimeData())
            event.acceptProposedAction()
