"""The rig panel: the detected machine, each figure with its basis, and what-if edits.

The panel shows two rigs: the detected one (set by the window after detection, which
runs off the GUI thread) and the current one the plan is made for. Every edit builds a
new frozen `Rig`; the panel never computes plan figures itself. The rigs, where the
current one came from and its undo history live in its `RigDocument` (rig_document.py);
every edit here is one command on it. The panel also keeps the rig files: open, save and
the recent list. Its controls are laid out in rig_panel_widgets.py and its device rows
drawn by rig_rows.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings, Qt, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QFileDialog,
    QTreeWidgetItem,
    QTreeWidgetItemIterator,
    QWidget,
)

from rigspark_gui.catalog.device_overhead import rig_with_overhead
from rigspark_gui.catalog.gpu_database import GpuDatabase, GpuSpec, load_gpu_database
from rigspark_gui.catalog.rig_file import load_rig, save_rig
from rigspark_gui.core.errors import RigSparkError, validation_message
from rigspark_gui.core.rig import GIB, MIB, Basis, Gpu, Provenance, Rig
from rigspark_gui.formats.jsonable import fields_of, jsonable
from rigspark_gui.resources import data_file
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.gpu_picker_dialog import GpuPickerDialog
from rigspark_gui.ui.rig_document import (
    RigDocument,
    RigOrigin,
    RigState,
    badge_text,
    source_text,
)
from rigspark_gui.ui.rig_panel_widgets import MAX_RESERVE_MIB, RigPanelWidgets
from rigspark_gui.ui.rig_rows import COL_DEVICE, add_device_rows, plain_note

RECENT_KEY = "rig/recent"
MAX_RECENT = 8
RIG_FILE_FILTER = "Rig files (*.json);;All files (*)"
DETECTED_NAME = "This machine"  # what detection names the rig
MIN_RAM_GIB = 0.5

_USER = Provenance(basis=Basis.USER, source="entered in the rig panel")
_PLACEHOLDER = Rig(
    name="Not detected yet",
    ram_total_bytes=0,
    provenance={"ram_total_bytes": Provenance(basis=Basis.UNKNOWN, source="detection has not run")},
)


def _reindexed(gpus: Sequence[Gpu]) -> tuple[Gpu, ...]:
    # A GPU's index is its position on its own host, as CUDA numbers visible devices.
    seen: dict[str, int] = {}
    out = []
    for g in gpus:
        i = seen.get(g.host, 0)
        seen[g.host] = i + 1
        out.append(g if g.index == i else replace(g, index=i))
    return tuple(out)


def gpu_from_spec(spec: GpuSpec, index: int) -> Gpu:
    """A what-if GPU with every figure from its database entry, marked `spec`, and its own
    overhead from data/device_overhead.json by its kind."""
    from_spec = Provenance(basis=Basis.SPEC, source=spec.source)
    provenance = {
        "memory_total_bytes": from_spec,
        "bandwidth_gbps": from_spec,
        "vendor": from_spec,
        "fp16_tflops": from_spec
        if spec.fp16_tflops is not None
        else Provenance(basis=Basis.UNKNOWN, source=f"no sourced figure for {spec.name}"),
    }
    gpu = Gpu(
        name=spec.name,
        vendor=spec.vendor,
        index=index,
        memory_total_bytes=spec.memory_bytes,
        bandwidth_gbps=spec.memory_bandwidth_gbps,
        fp16_tflops=spec.fp16_tflops,
        unified=spec.unified,
        provenance=provenance,
    )
    # its backend's context as its reserve, an Apple chip's working set as its memory
    return rig_with_overhead(Rig(ram_total_bytes=0, gpus=(gpu,))).gpus[0]


def _load_default_database() -> tuple[GpuDatabase, str | None]:
    try:
        return load_gpu_database(data_file("gpus.json")), None
    except RigSparkError as err:
        return GpuDatabase(), f"GPU database unavailable: {err}"


class RigPanel(RigPanelWidgets):
    """Lists the rig's devices with memory, bandwidth and basis; edits make a what-if rig."""

    rig_changed = Signal(object)
    redetect_requested = Signal()

    def __init__(
        self,
        database: GpuDatabase | None = None,
        settings: QSettings | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        database_note: str | None = None
        if database is None:
            database, database_note = _load_default_database()
        self._database = database
        self._settings = settings if settings is not None else QSettings()
        self.document = RigDocument(_PLACEHOLDER, self)
        self.picker: GpuPickerDialog | None = None
        self._connect()
        self._refresh()
        self._rebuild_recent_menu()
        if database_note:
            self.status_label.setText(database_note)

    # -- public API ------------------------------------------------------------

    def rig(self) -> Rig:
        return self.document.rig

    def detected_rig(self) -> Rig | None:
        return self.document.detected

    @property
    def open_path(self) -> Path | None:
        """The rig file the current rig came from (opened, or opened and edited), if any."""
        return self.document.state.path

    def is_edited(self) -> bool:
        """Whether the current rig differs from the detected machine (a what-if)."""
        return self.document.rig.edited

    def database(self) -> GpuDatabase:
        return self._database

    def set_detected(self, rig: Rig) -> None:
        """Take a fresh detection; it becomes current unless the user opened, edited or
        chose another rig."""
        if self.document.detect(rig):
            self.status_label.setText("Detection finished.")
            return
        # The user's rig is kept; only its comparison with detection changes.
        state = self.document.state
        kept = (
            f"the rig from {state.path.name} is kept"
            if state.origin is RigOrigin.FILE and state.path is not None
            else "your edits are kept"
            if state.origin is RigOrigin.EDITED
            else "the rig you chose is kept"
        )
        self.status_label.setText(
            f"Detection finished; {kept}. “Reset to detected” uses the new detection."
        )

    def note(self, text: str) -> None:
        """Say in the panel what just happened to the rig."""
        self.status_label.setText(text)

    @Slot(bool)
    def set_detecting(self, running: bool) -> None:
        self.progress_bar.setVisible(running)
        self.redetect_button.setEnabled(not running)
        if running:
            self.status_label.setText("Detecting hardware…")

    def add_gpus(self, spec: GpuSpec, count: int = 1) -> None:
        rig = self.rig()
        start = len(rig.gpus)
        added = tuple(gpu_from_spec(spec, start + i) for i in range(max(count, 0)))
        if added:
            what = f"{len(added)} × {spec.name}" if len(added) > 1 else spec.name
            self._edit(f"Add {what}", gpus=_reindexed((*rig.gpus, *added)))
            self._select_position(start + len(added) - 1)

    def remove_gpu(self, position: int) -> None:
        gpus = list(self.rig().gpus)
        if not 0 <= position < len(gpus):
            return
        removed = gpus.pop(position)
        notes = self.rig().notes
        if not any(g.name == removed.name for g in gpus):
            # Notes about a board no longer in the rig would warn about nothing.
            notes = tuple(n for n in notes if removed.name not in n)
        self._edit(f"Remove GPU {position}", gpus=_reindexed(gpus), notes=notes)
        if gpus:
            self._select_position(min(position, len(gpus) - 1))

    def set_ram_total_bytes(self, total: int) -> None:
        rig = self.rig()
        total = max(int(total), 0)
        if total == rig.ram_total_bytes:
            return
        provenance = {**rig.provenance, "ram_total_bytes": _USER}
        updates: dict[str, Any] = {"ram_total_bytes": total, "provenance": provenance}
        if rig.ram_available_bytes is not None:
            # Keep what other programs used at detection time in use: going from 64 to
            # 128 GiB and back then returns to the detected figure.
            in_use = rig.ram_total_bytes - rig.ram_available_bytes
            updates["ram_available_bytes"] = max(total - in_use, 0)
            provenance["ram_available_bytes"] = Provenance(
                basis=Basis.USER, source="RAM entered, less the memory in use when detected"
            )
        self._edit(f"RAM {total / GIB:g} GiB", **updates)

    def set_gpu_reserve_bytes(self, position: int, reserve: int) -> None:
        gpus = list(self.rig().gpus)
        if not 0 <= position < len(gpus) or gpus[position].reserve_bytes == reserve:
            return
        gpu = gpus[position]
        gpus[position] = replace(
            gpu,
            reserve_bytes=max(int(reserve), 0),
            provenance={**gpu.provenance, "reserve_bytes": _USER},
        )
        self._edit(f"GPU {position} reserve {round(reserve / MIB)} MiB", gpus=tuple(gpus))

    def use_rig(self, rig: Rig, where: str) -> None:
        """Make `rig` current (a what-if unless it is this machine), e.g. a report's; the
        history of the rig before it is dropped."""
        self.document.start(RigState(rig, RigOrigin.ELSEWHERE, where=where))
        self.status_label.setText(f"Using {where}.")

    def reset_to_detected(self) -> None:
        if self.document.reset_to_detected():
            self.status_label.setText("Back to the detected rig.")

    def open_rig_file(self, path: Path | str) -> bool:
        """Make the rig in `path` current; on error tell the user and change nothing."""
        path = Path(path)
        try:
            rig = load_rig(path, self._database)
        except RigSparkError as err:
            dialogs.show_error(self, "Cannot open rig", str(err))
            if not path.exists():
                self._forget_recent(path)
            return False
        # a new starting point: no undo brings the rig before it back over this one
        self.document.start(RigState(rig, RigOrigin.FILE, path=path))
        self._remember_recent(path)
        self.status_label.setText(f"Opened {path.name}.")
        return True

    def save_rig_file(self, path: Path | str) -> bool:
        path = Path(path)
        rig = self.rig()
        if rig.name in ("", DETECTED_NAME):
            # a saved rig is a machine of its own: name it after its file
            rig = replace(rig, name=path.stem)
        try:
            save_rig(rig, path)
        except (RigSparkError, OSError) as err:
            dialogs.show_error(self, "Cannot save rig", str(err))
            return False
        self._remember_recent(path)
        self.document.saved_as(path)
        self.status_label.setText(f"Saved {path.name}.")
        return True

    def recent_files(self) -> list[Path]:
        raw = self._settings.value(RECENT_KEY, [])
        # INI-backed QSettings hands back a one-item list as a plain string.
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list):
            return []
        return [Path(p) for p in raw if isinstance(p, str) and p][:MAX_RECENT]

    def selected_position(self) -> int | None:
        """Position of the selected GPU in the rig, or None (nothing or the CPU row)."""
        item = self.device_tree.currentItem()
        if item is None:
            return None
        position = item.data(COL_DEVICE, Qt.ItemDataRole.UserRole)
        if isinstance(position, int) and 0 <= position < len(self.rig().gpus):
            return position
        return None

    # -- construction ----------------------------------------------------------

    def _connect(self) -> None:
        """Each control to the slot that turns it into an edit of the rig."""
        self.document.state_changed.connect(self._refresh)
        self.document.rig_changed.connect(self.rig_changed)
        self.device_tree.currentItemChanged.connect(self._on_device_tree_current_item_changed)
        self.remove_action.triggered.connect(self._on_remove_button_clicked)
        self.add_button.clicked.connect(self._on_add_button_clicked)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.ram_spin.valueChanged.connect(self._on_ram_spin_value_changed)
        self.reserve_spin.valueChanged.connect(self._on_reserve_spin_value_changed)
        self.reset_button.clicked.connect(self._on_reset_button_clicked)
        self.redetect_button.clicked.connect(self._on_redetect_button_clicked)
        self.open_button.clicked.connect(self._on_open_button_clicked)
        self.save_button.clicked.connect(self._on_save_button_clicked)

    # -- state -----------------------------------------------------------------

    def _edit(self, text: str, **updates: Any) -> None:
        """Apply a user edit: validate through the model, then push it as one command."""
        from rigspark_gui.formats.rig import read_rig  # pydantic: loaded on the first edit

        try:
            rig = read_rig(jsonable({**fields_of(self.rig()), **updates}))
        except ValueError as err:
            dialogs.show_error(self, "Invalid rig", validation_message(err))
            self._refresh()
            return
        self.status_label.clear()  # an earlier "Detection finished" no longer describes it
        self.document.edit(rig, text)

    def _refresh(self) -> None:
        state = self.document.state
        rig = state.rig
        position = self.selected_position()
        self.name_label.setText(rig.name or "Unnamed rig")
        badge = badge_text(state)
        self.edited_badge.setText(badge)
        self.edited_badge.setVisible(bool(badge))
        source = source_text(state)
        self.source_label.setText(source)
        self.source_label.setToolTip(str(state.path) if state.path is not None else "")
        self.source_label.setVisible(bool(source))
        self.reset_button.setEnabled(
            self.document.detected is not None and state.origin is not RigOrigin.DETECTED
        )

        # Rows of the old rig must not drive the controls while the list is rebuilt.
        self.device_tree.blockSignals(True)
        self.device_tree.clear()
        add_device_rows(self.device_tree, rig)
        self.device_tree.blockSignals(False)

        if rig.notes:
            warnings = (f"⚠ Warning: {plain_note(note)}" for note in rig.notes)
            self.notes_label.setText("\n".join(warnings))
        self.notes_label.setVisible(bool(rig.notes))

        self.ram_spin.blockSignals(True)
        self.ram_spin.setValue(rig.ram_total_bytes / GIB)
        self.ram_spin.blockSignals(False)
        if position is not None and position < len(rig.gpus):
            self._select_position(position)
        self._sync_selection_controls()

    def _select_position(self, position: int) -> None:
        it = QTreeWidgetItemIterator(self.device_tree)
        while it.value() is not None:
            item = it.value()
            if item.data(COL_DEVICE, Qt.ItemDataRole.UserRole) == position:
                self.device_tree.setCurrentItem(item)
                return
            it += 1

    def _sync_selection_controls(self) -> None:
        position = self.selected_position()
        has_gpu = position is not None
        self.remove_button.setEnabled(has_gpu)
        self.reserve_spin.setEnabled(has_gpu)
        label = f"GPU {position}" if position is not None else "GPU"
        self.reserve_label.setText(f"{label} &reserve:")
        self.reserve_spin.blockSignals(True)
        if position is not None:
            gpu = self.rig().gpus[position]
            # a reserve can hold back the whole card, not more
            limit = gpu.memory_total_bytes or gpu.memory_bytes
            self.reserve_spin.setMaximum(limit // MIB if limit else MAX_RESERVE_MIB)
            self.reserve_spin.setValue(round(gpu.reserve_bytes / MIB))
        else:
            self.reserve_spin.setValue(0)
        self.reserve_spin.blockSignals(False)

    # -- recent files ----------------------------------------------------------

    def _remember_recent(self, path: Path) -> None:
        resolved = str(path.resolve())
        recent = [str(p) for p in self.recent_files() if str(p) != resolved]
        self._settings.setValue(RECENT_KEY, [resolved, *recent][:MAX_RECENT])
        self._rebuild_recent_menu()

    def _forget_recent(self, path: Path) -> None:
        resolved = str(path.resolve())
        recent = [str(p) for p in self.recent_files() if str(p) != resolved]
        self._settings.setValue(RECENT_KEY, recent)
        self._rebuild_recent_menu()

    def _rebuild_recent_menu(self) -> None:
        self.recent_menu.clear()
        recent = self.recent_files()
        if not recent:
            empty = self.recent_menu.addAction("No recent rigs")
            empty.setEnabled(False)
            return
        for number, path in enumerate(recent, start=1):
            action = self.recent_menu.addAction(f"&{number} {path.name}")
            action.setToolTip(str(path))
            action.setStatusTip(str(path))
            action.setData(str(path))
            action.triggered.connect(self._on_recent_action_triggered)
        self.recent_menu.addSeparator()
        self.recent_menu.addAction("&Clear recent rigs").triggered.connect(
            self._on_clear_recent_triggered
        )

    def _start_dir(self) -> str:
        recent = self.recent_files()
        return str(recent[0].parent) if recent else ""

    # -- slots -----------------------------------------------------------------

    @Slot(QTreeWidgetItem, QTreeWidgetItem)
    def _on_device_tree_current_item_changed(
        self, current: QTreeWidgetItem | None, previous: QTreeWidgetItem | None
    ) -> None:
        self._sync_selection_controls()

    @Slot()
    def _on_add_button_clicked(self) -> None:
        # open(), not exec(): no nested event loop, so the picker behaves alike in tests.
        self.picker = GpuPickerDialog(self._database, self)
        self.picker.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        picker = self.picker
        # Bound to this dialog, whichever order Qt emits accepted and finished in.
        picker.accepted.connect(lambda: self._add_from_picker(picker))
        picker.finished.connect(self._on_picker_finished)
        picker.open()

    def _add_from_picker(self, picker: GpuPickerDialog) -> None:
        spec = picker.selected_spec()
        if spec is not None:
            self.add_gpus(spec, picker.count())
            suffix = f"{picker.count()} × " if picker.count() > 1 else ""
            self.status_label.setText(f"Added {suffix}{spec.name}.")
        self.device_tree.setFocus()

    @Slot(int)
    def _on_picker_finished(self, result: int) -> None:
        self.picker = None

    @Slot()
    def _on_remove_button_clicked(self) -> None:
        position = self.selected_position()
        if position is not None:
            self.remove_gpu(position)

    @Slot(float)
    def _on_ram_spin_value_changed(self, value: float) -> None:
        if value < MIN_RAM_GIB:
            # no machine plans anything in less; keep the rig and say why
            self.ram_spin.blockSignals(True)
            self.ram_spin.setValue(self.rig().ram_total_bytes / GIB)
            self.ram_spin.blockSignals(False)
            self.status_label.setText(f"RAM must be at least {MIN_RAM_GIB:g} GiB.")
            return
        self.set_ram_total_bytes(round(value * GIB))

    @Slot(int)
    def _on_reserve_spin_value_changed(self, value: int) -> None:
        position = self.selected_position()
        if position is not None:
            self.set_gpu_reserve_bytes(position, value * MIB)

    @Slot()
    def _on_reset_button_clicked(self) -> None:
        self.reset_to_detected()

    @Slot()
    def _on_redetect_button_clicked(self) -> None:
        self.redetect_requested.emit()

    @Slot()
    def _on_open_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open rig", self._start_dir(), RIG_FILE_FILTER)
        if path:
            self.open_rig_file(path)

    @Slot()
    def _on_save_button_clicked(self) -> None:
        stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in self.rig().name) or "rig"
        start = str(Path(self._start_dir()) / f"{stem}.json")
        path, _ = QFileDialog.getSaveFileName(self, "Save rig", start, RIG_FILE_FILTER)
        if path:
            target = Path(path)
            self.save_rig_file(target if target.suffix else target.with_suffix(".json"))

    @Slot()
    def _on_recent_action_triggered(self) -> None:
        action = self.sender()
        if isinstance(action, QAction) and isinstance(action.data(), str):
            self.open_rig_file(action.data())

    @Slot()
    def _on_clear_recent_triggered(self) -> None:
        self._settings.setValue(RECENT_KEY, [])
        self._rebuild_recent_menu()
