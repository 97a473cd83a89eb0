"""Pick a GPU from the spec database for a what-if rig: type to filter, Enter adds."""

from __future__ import annotations

import re
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, Qt, Slot
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.catalog.gpu_database import GpuDatabase, GpuSpec
from rigspark_gui.core.rig import GIB, Vendor

MAX_GPUS_AT_ONCE = 16
# Keys the search box hands to the list, so the hand never leaves the keyboard row.
_LIST_KEYS = {Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_PageUp, Qt.Key.Key_PageDown}


# Vendors in the order the list shows them; any other after these.
VENDOR_ORDER = (Vendor.NVIDIA, Vendor.AMD, Vendor.INTEL, Vendor.APPLE)
# The maker's name a board's name starts with: left out when sorting, so NVIDIA's
# "Tesla P40" sits among its "NVIDIA …" boards by what follows.
_MAKER = re.compile(r"^(nvidia|amd|intel(\(r\))?|apple)\s+", re.IGNORECASE)
_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[str | int, ...]:
    """A name's sort key with its numbers compared as numbers, the maker's name dropped
    and case ignored: "RTX 3060" < "RTX 3060 Ti" < "RTX 3090" < "RTX 4090", "P4" < "P40"
    < "P100", "M1 Max" < "M2"."""
    parts = _DIGITS.split(_MAKER.sub("", name.strip()).casefold())
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def picker_order(gpus: Sequence[GpuSpec]) -> list[int]:
    """Positions of `gpus` in the order the picker lists them: by vendor (NVIDIA, AMD,
    Intel, Apple, then the rest), then naturally by name (families and generations
    group, numbers ascend), whatever order the database keeps them in."""

    def key(i: int) -> tuple[int, tuple[str | int, ...], str]:
        spec = gpus[i]
        rank = VENDOR_ORDER.index(spec.vendor) if spec.vendor in VENDOR_ORDER else len(VENDOR_ORDER)
        return rank, natural_key(spec.name), spec.name

    return sorted(range(len(gpus)), key=key)


def spec_summary(spec: GpuSpec) -> str:
    """One line a user can choose by: memory, bandwidth and compute from the spec sheet."""
    parts = [f"{spec.memory_bytes / GIB:g} GiB", f"{spec.memory_bandwidth_gbps:g} GB/s"]
    if spec.fp16_tflops is not None:
        parts.append(f"{spec.fp16_tflops:g} TFLOPS FP16")
    if spec.unified:
        parts.append("unified memory")
    return " · ".join(parts)


class GpuPickerDialog(QDialog):
    """A searchable list over the GPU database and how many of the chosen board to add."""

    def __init__(self, database: GpuDatabase, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add GPU")
        self._database = database

        self.search_edit = QLineEdit(self)
        self.search_edit.setPlaceholderText("Type to filter, e.g. 4090 or MI300")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.setToolTip(
            "Every word must appear in the GPU's name or one of its aliases. "
            "Up/Down move through the list, Enter adds the highlighted GPU."
        )
        self.search_edit.installEventFilter(self)

        self.gpu_list = QListWidget(self)
        self.gpu_list.setAlternatingRowColors(True)
        self.gpu_list.setToolTip("GPUs in the spec database; figures are from each entry's source")
        for position in picker_order(database.gpus):
            spec = database.gpus[position]
            item = QListWidgetItem(f"{spec.name}\n    {spec_summary(spec)}")
            item.setData(Qt.ItemDataRole.UserRole, position)
            item.setToolTip(f"{spec.name}\nSource: {spec.source}")
            self.gpu_list.addItem(item)

        self.count_spin = QSpinBox(self)
        self.count_spin.setRange(1, MAX_GPUS_AT_ONCE)
        self.count_spin.setToolTip("How many of this GPU to add to the rig")

        self.match_label = QLabel(self)

        search_label = QLabel("&Search:", self)
        search_label.setBuddy(self.search_edit)
        count_label = QLabel("&Count:", self)
        count_label.setBuddy(self.count_spin)
        form = QFormLayout()
        form.addRow(search_label, self.search_edit)
        form.addRow(count_label, self.count_spin)

        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self
        )
        self._ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self._ok.setText("&Add")
        self._ok.setDefault(True)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.gpu_list, 1)
        layout.addWidget(self.match_label)
        layout.addWidget(self.buttons)
        self.resize(460, 420)

        self.search_edit.textChanged.connect(self._on_search_edit_text_changed)
        self.gpu_list.currentItemChanged.connect(self._on_gpu_list_current_item_changed)
        self.gpu_list.itemActivated.connect(self._on_gpu_list_item_activated)
        self._on_search_edit_text_changed("")
        self.search_edit.setFocus()

    def selected_spec(self) -> GpuSpec | None:
        item = self.gpu_list.currentItem()
        if item is None or item.isHidden():
            return None
        return self._database.gpus[int(item.data(Qt.ItemDataRole.UserRole))]

    def count(self) -> int:
        return self.count_spin.value()

    def visible_names(self) -> list[str]:
        return [
            self._database.gpus[int(item.data(Qt.ItemDataRole.UserRole))].name
            for item in (self.gpu_list.item(row) for row in range(self.gpu_list.count()))
            if item is not None and not item.isHidden()
        ]

    def accept(self) -> None:
        # Enter with nothing matching must not close the dialog as if a GPU was chosen.
        if self.selected_spec() is not None:
            super().accept()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            watched is self.search_edit
            and event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() in _LIST_KEYS
        ):
            self.gpu_list.setFocus()
            self.gpu_list.keyPressEvent(event)
            self.search_edit.setFocus()
            return True
        return super().eventFilter(watched, event)

    @Slot(str)
    def _on_search_edit_text_changed(self, text: str) -> None:
        words = text.lower().split()
        first_visible: QListWidgetItem | None = None
        shown = 0
        for row in range(self.gpu_list.count()):
            item = self.gpu_list.item(row)
            spec = self._database.gpus[int(item.data(Qt.ItemDataRole.UserRole))]
            haystack = " ".join((spec.name, *spec.aliases)).lower()
            hidden = not all(word in haystack for word in words)
            item.setHidden(hidden)
            if not hidden:
                shown += 1
                first_visible = first_visible or item
        current = self.gpu_list.currentItem()
        if first_visible is None:
            self.gpu_list.setCurrentRow(-1)
        elif current is None or current.isHidden():
            self.gpu_list.setCurrentItem(first_visible)
        total = len(self._database.gpus)
        self.match_label.setText(
            f"{shown} of {total} GPUs" if shown else f"No GPU in the database matches “{text}”"
        )
        self._update_ok()

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_gpu_list_current_item_changed(
        self, current: QListWidgetItem | None, previous: QListWidgetItem | None
    ) -> None:
        self._update_ok()

    @Slot(QListWidgetItem)
    def _on_gpu_list_item_activated(self, item: QListWidgetItem) -> None:
        self.accept()

    def _update_ok(self) -> None:
        self._ok.setEnabled(self.selected_spec() is not None)
