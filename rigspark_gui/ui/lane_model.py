"""One list model per device lane: a thin adapter over the document's placement.

Rows are the units placed on the lane's device, in slot order. A drop hands the unit ids
to the document; rows are never edited here. Deliberately no removeRows / moveRows /
insertRows: after a cross-view move-drop Qt calls removeRows on the source model, and
the document has already moved the units (STYLE.md, the placement editor's trap).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import (
    QAbstractListModel,
    QByteArray,
    QMimeData,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    Signal,
)

from rigspark_gui.core.errors import InvalidPlacementError
from rigspark_gui.core.memory import WeightsLayout
from rigspark_gui.core.placement import CPU, INPUT, OUTPUT, Placement, unit_label
from rigspark_gui.core.units import human_bytes
from rigspark_gui.ui.placement_document import PlacementDocument

LAYERS_MIME = "application/x-rigspark-layers"
UNIT_ROLE = Qt.ItemDataRole.UserRole + 1
BYTES_ROLE = Qt.ItemDataRole.UserRole + 2

_Index = QModelIndex | QPersistentModelIndex


def device_label(device: str) -> str:
    return "CPU" if device == CPU else f"GPU {device.split(':')[1]}"


def encode_units(unit_ids: list[str]) -> QMimeData:
    mime = QMimeData()
    mime.setData(LAYERS_MIME, QByteArray(json.dumps({"units": unit_ids}).encode()))
    return mime


def decode_units(mime: QMimeData) -> list[str]:
    if not mime.hasFormat(LAYERS_MIME):
        return []
    try:
        raw = json.loads(bytes(mime.data(LAYERS_MIME).data()).decode())
        units = raw["units"]
    except (ValueError, KeyError, TypeError):
        return []
    return [u for u in units if isinstance(u, str)] if isinstance(units, list) else []


class _Row:
    __slots__ = ("bytes", "experts_away", "text", "tooltip", "unit")

    def __init__(self, unit: str, text: str, tooltip: str, n_bytes: int, away: bool) -> None:
        self.unit = unit
        self.text = text
        self.tooltip = tooltip
        self.bytes = n_bytes
        self.experts_away = away


class LaneModel(QAbstractListModel):
    drop_refused = Signal(str)

    def __init__(self, document: PlacementDocument, device: str, parent: Any = None) -> None:
        super().__init__(parent)
        self._document = document
        self._device = device
        self._rows: list[_Row] = []
        self._key: tuple[tuple[str, str | None], ...] = ()
        self.last_error = ""

    @property
    def device(self) -> str:
        return self._device

    def unit_ids(self) -> list[str]:
        return [r.unit for r in self._rows]

    def refresh(self, placement: Placement | None, layout: WeightsLayout | None) -> None:
        """Rebuild rows from the placement; untouched lanes keep their rows and selection."""
        if placement is None or layout is None:
            key: tuple[tuple[str, str | None], ...] = ()
        else:
            key = tuple(
                (u.unit, u.experts_device) for u in placement.units if u.device == self._device
            )
        if key == self._key:
            return
        self.beginResetModel()
        self._key = key
        self._rows = [] if placement is None or layout is None else self._build(placement, layout)
        self.endResetModel()

    def _build(self, placement: Placement, layout: WeightsLayout) -> list[_Row]:
        rows = []
        for u in placement.units:
            if u.device != self._device:
                continue
            if u.unit == INPUT:
                n = layout.input_bytes
            elif u.unit == OUTPUT:
                n = layout.output_bytes + (layout.tied_head_bytes if u.device != CPU else 0)
            else:
                n = layout.block_bytes[u.index]
            away = u.experts_device is not None and u.experts_device != u.device
            if away and u.experts_device is not None:
                # what stays on this lane is the layer without its routed experts
                experts = layout.block_expert_bytes[u.index]
                where = device_label(u.experts_device)
                stays = n - experts
                text = (
                    f"{unit_label(u.unit)}  ·  {human_bytes(stays)} here  ·  experts "
                    f"({human_bytes(experts)}) on {where}"
                )
                tip = (
                    f"{u.unit}: {human_bytes(stays)} of attention and shared weights on "
                    f"{device_label(u.device)}; its routed experts ({human_bytes(experts)}) "
                    f"on {where}"
                )
                n = stays
            else:
                text = f"{unit_label(u.unit)}  ·  {human_bytes(n)}"
                tip = f"{u.unit}: {human_bytes(n)} of weights on {device_label(u.device)}"
            rows.append(_Row(u.unit, text, tip, n, away))
        return rows

    # -- read-only model

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        row = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return row.text
        if role == Qt.ItemDataRole.ToolTipRole:
            return row.tooltip
        if role == UNIT_ROLE:
            return row.unit
        if role == BYTES_ROLE:
            return row.bytes
        return None

    def flags(self, index: _Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.ItemIsDropEnabled  # drops land on the lane, not on an item
        f = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
        if self._rows[index.row()].unit != INPUT:  # the embedding never leaves the CPU
            f |= Qt.ItemFlag.ItemIsDragEnabled
        return f

    # -- drag and drop

    def supportedDragActions(self) -> Qt.DropAction:
        return Qt.DropAction.MoveAction

    def supportedDropActions(self) -> Qt.DropAction:
        return Qt.DropAction.MoveAction

    def mimeTypes(self) -> list[str]:
        return [LAYERS_MIME]

    def mimeData(self, indexes: Sequence[QModelIndex]) -> QMimeData:
        rows = sorted({i.row() for i in indexes if i.isValid()})
        return encode_units([self._rows[r].unit for r in rows if self._rows[r].unit != INPUT])

    def canDropMimeData(
        self,
        data: QMimeData,
        action: Qt.DropAction,
        row: int,
        column: int,
        parent: _Index,
    ) -> bool:
        units = decode_units(data)
        if action not in (Qt.DropAction.MoveAction, Qt.DropAction.CopyAction) or not units:
            return False
        here = set(self.unit_ids())
        return any(u not in here for u in units)

    def dropMimeData(
        self,
        data: QMimeData,
        action: Qt.DropAction,
        row: int,
        column: int,
        parent: _Index,
    ) -> bool:
        if not self.canDropMimeData(data, action, row, column, parent):
            return False
        try:
            moved = self._document.move_units(decode_units(data), self._device)
        except InvalidPlacementError as err:
            self.last_error = str(err)
            self.drop_refused.emit(self.last_error)
            return False
        self.last_error = ""
        return moved
