"""The Quant menu: Auto, then every quantization of the model grouped by bits, each with
its quality cost, its size for this model (measured when the menu opens, so picking a
model stays instant) and, greyed, the ones Auto never picks with why."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QWidget

from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.units import gib

_BITS = re.compile(r"^(?:UD-)?I?Q(\d)|^TQ(\d)")


def bits_group(quant: str) -> str:
    q = quant.upper()
    if q in ("F32", "F16", "BF16"):
        return "16/32-bit"
    if q.startswith("MXFP4"):
        return "4-bit"
    m = _BITS.match(q)
    return f"{m.group(1) or m.group(2)}-bit" if m else "other"


class QuantCombo(QComboBox):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._items = QStandardItemModel(self)
        self.setModel(self._items)
        self._spec: ModelSpec | None = None
        self._sized: str | None = None  # the model whose sizes are filled in

    def set_model(self, spec: ModelSpec) -> None:
        rows = []
        group = None
        for q in spec.available_quants:
            g = bits_group(q)
            if g != group:
                header = QStandardItem(f"— {g} —")
                header.setFlags(Qt.ItemFlag.NoItemFlags)
                rows.append(header)
                group = g
            rows.append(self._item(spec, q, None))
        self._fill(spec, "The best quality that fits and reaches the minimum speed", rows)

    def set_formats(self, spec: ModelSpec, engine: str) -> None:
        """A serving engine's choices: checkpoint formats, each with its size."""
        from rigspark_gui.core.serving import FORMATS, checkpoint_bytes

        rows = []
        for f in FORMATS.values():
            if f.experts_only and not spec.geometry.is_moe:
                continue  # a format of experts: a dense model has none
            size = checkpoint_bytes(spec.geometry, f.name)
            item = QStandardItem(f"{f.label}  ·  {gib(size)}")
            item.setData(f.name, Qt.ItemDataRole.UserRole)
            item.setToolTip(f"{engine} loads a Hugging Face checkpoint: {f.words}")
            rows.append(item)
        # no GGUF sizes to fill in for a checkpoint
        self._fill(None, "The best checkpoint format that leaves room for one full request", rows)

    def _fill(self, spec: ModelSpec | None, auto_tip: str, rows: list[QStandardItem]) -> None:
        """Auto, then `rows`, inserted at once (the view hears of them once, not per row);
        `spec` is the model whose GGUF sizes the menu fills in when it opens."""
        self._spec, self._sized = spec, None
        self.blockSignals(True)
        self._items.clear()
        auto = QStandardItem("Auto")
        auto.setData("", Qt.ItemDataRole.UserRole)
        auto.setToolTip(auto_tip)
        self._items.invisibleRootItem().appendRows([auto, *rows])
        self.blockSignals(False)

    def _item(self, spec: ModelSpec, q: str, size: int | None) -> QStandardItem:
        quality = spec.quality.get(q)
        words = quality.words if quality is not None else ""
        text = "  ·  ".join(x for x in (q, gib(size) if size else "", words) if x)
        item = QStandardItem(text)
        item.setData(q, Qt.ItemDataRole.UserRole)
        tips = []
        if quality is not None:
            tips.append(f"{quality.label}\n{quality.basis}")
            if quality.imatrix_required:
                tips.append("needs an importance matrix (llama-quantize refuses it without one)")
        by = spec.dominated.get(q)
        if by is not None:
            item.setForeground(QBrush(QColor("#8a8a8a")))
            why = f"{by} is no larger and better" if by else "its quality here is not measured"
            tips.append(
                f"Auto never picks {q}: {why}. Kept for hardware that wants it (Q4_0 is "
                "repacked for fast CPU kernels on ARM and x86)."
            )
        item.setToolTip("\n".join(tips) or q)
        return item

    def showPopup(self) -> None:
        self._fill_sizes()
        super().showPopup()

    def _fill_sizes(self) -> None:
        """Each quantization's weight size for this model: synthesized on first opening."""
        spec = self._spec
        if spec is None or self._sized == spec.id:
            return
        from rigspark_gui.core.memory import weights_layout

        for row in range(self._items.rowCount()):
            item = self._items.item(row)
            q = item.data(Qt.ItemDataRole.UserRole)
            if q:
                size = weights_layout(spec, q).total_bytes
                fresh = self._item(spec, q, size)
                item.setText(fresh.text())
        self._sized = spec.id
