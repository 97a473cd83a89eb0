"""The rig panel: the detected machine, each figure with its basis, and what-if edits.

The panel owns two rigs: the detected one (set by the window after detection, which
runs off the GUI thread) and the current one the plan is made for. Every edit builds a
new frozen `Rig`; the panel never computes plan figures itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings, QSize, Qt, Signal, Slot
from PySide6.QtGui import QAction, QFont, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QToolButton,
    QTreeWidget,
    QTreeWidgetItem,
    QTreeWidgetItemIterator,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.catalog.gpu_database import GpuDatabase, GpuSpec, load_gpu_database
from rigspark_gui.catalog.rig_file import load_rig, save_rig
from rigspark_gui.core.errors import RigSparkError, validation_message
from rigspark_gui.core.rig import (
    DEFAULT_GPU_RESERVE_BYTES,
    DEFAULT_RAM_RESERVE_BYTES,
    GIB,
    MIB,
    Basis,
    Gpu,
    Provenance,
    Rig,
)
from rigspark_gui.formats.jsonable import fields_of, jsonable
from rigspark_gui.resources import data_file
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.gpu_picker_dialog import GpuPickerDialog

RECENT_KEY = "rig/recent"
MAX_RECENT = 8
RIG_FILE_FILTER = "Rig files (*.json);;All files (*)"
# Mnemonics avoid letters the window already uses (File, View, Help, Model, Quant,
# Backend, Context, Parallel, tabs Paths, KV, Layers, Catalog): Alt+key stays unambiguous.
MNEMONICS = "GUETDOSIR"
# Ceilings for the spin boxes: far above any real machine, low enough to catch a typo.
DETECTED_NAME = "This machine"  # what detection names the rig
MAX_RAM_GIB = 65536.0
MIN_RAM_GIB = 0.5
MAX_RESERVE_MIB = 1 << 20

COL_DEVICE, COL_MEMORY, COL_BANDWIDTH, COL_COMPUTE, COL_RESERVE = range(5)
_HEADERS = ("Device", "Memory", "Bandwidth", "Compute", "Reserve")
_HEADER_TIPS = (
    "GPUs in device order, then the CPU and system RAM",
    "GPU: total memory on the board. CPU: RAM total, and the part a plan may use",
    "Memory bandwidth; decode speed is bound by it",
    "GPU: dense FP16 TFLOPS (bounds prompt processing). CPU: physical cores",
    "Memory kept free on the device: driver and context footprint, display, margin",
)
_CPU_ROW = -1
_HOST_ROW = -2  # a host heading, or a remote host's RAM: nothing to edit
_USER = Provenance(basis=Basis.USER, source="entered in the rig panel")
_PLACEHOLDER = Rig(
    name="Not detected yet",
    ram_total_bytes=0,
    provenance={"ram_total_bytes": Provenance(basis=Basis.UNKNOWN, source="detection has not run")},
)
# Words drivers put in front of the board name; the full name stays in the tooltip.
_NAME_PREFIXES = ("NVIDIA ", "GeForce ", "AMD ", "Radeon ", "Intel(R) ")
# Marketing tails of CPU model strings ("16-Core Processor", "CPU @ 3.60GHz").
_CPU_NOISE = re.compile(r"\s+\d+-Core Processor$|\s+(?:CPU\s+)?@\s*[\d.]+\s*GHz$|\s+Processor$")


def _gib_number(n: int) -> str:
    return f"{n // GIB}" if n % GIB == 0 else f"{n / GIB:.1f}"


def _gib(n: int) -> str:
    return f"{_gib_number(n)} GiB"


def _mib(n: int) -> str:
    return f"{round(n / MIB)} MiB"


def _rate(value: float, unit: str) -> str:
    # Three significant figures at most: 936 GB/s, 51.2 GB/s, 3350 GB/s.
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"


def _short_name(name: str) -> str:
    short = name
    changed = True
    while changed:
        changed = False
        for prefix in _NAME_PREFIXES:
            if short.startswith(prefix) and len(short) > len(prefix):
                short = short[len(prefix) :]
                changed = True
    return short.replace("(TM) ", "").replace("(TM)", "")


def _short_cpu_name(name: str) -> str:
    """'AMD Ryzen 9 5950X 16-Core Processor' -> 'Ryzen 9 5950X'; the tooltip keeps it all."""
    short = _CPU_NOISE.sub("", name.replace("(R)", "").replace("(TM)", ""))
    short = " ".join(short.split())
    for prefix in ("AMD ", "Intel "):
        short = short.removeprefix(prefix)
    return short or name


def _basis_text(prov: Provenance) -> str:
    return str(prov.basis)


def _basis_line(prov: Provenance) -> str:
    return f"Basis: {prov.basis}" + (f" — {prov.source}" if prov.source else "")


def _cell(value: str | None, prov: Provenance) -> str:
    if value is None:
        return "unknown"
    return f"{value} · {_basis_text(prov)}"


def _rig_basis(rig: Rig, field: str) -> Provenance:
    if field in rig.provenance:
        return rig.provenance[field]
    if getattr(rig, field, None) is None:
        return Provenance(basis=Basis.UNKNOWN, source="not reported")
    return Provenance(basis=Basis.USER)


def _reserve_basis(gpu: Gpu) -> tuple[str, str]:
    """Short basis text and its explanation; the default is neither measured nor spec."""
    if "reserve_bytes" in gpu.provenance:
        prov = gpu.provenance["reserve_bytes"]
        return _basis_text(prov), _basis_line(prov)
    if gpu.reserve_bytes == DEFAULT_GPU_RESERVE_BYTES:
        return "default", "Basis: default — assumed driver/context footprint per GPU"
    return "user", "Basis: user"


def _plain(rig: Rig) -> Rig:
    """`rig` without the edited flag and its name, to compare what the rigs describe
    (this machine saved to a file and opened again is no what-if)."""
    return replace(rig, edited=False, name="")


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
    """A what-if GPU with every figure from its database entry, marked `spec`."""
    from_spec = Provenance(basis=Basis.SPEC, source=spec.source)
    provenance = {
        "memory_total_bytes": from_spec,
        "bandwidth_gbps": from_spec,
        "vendor": from_spec,
        "fp16_tflops": from_spec
        if spec.fp16_tflops is not None
        else Provenance(basis=Basis.UNKNOWN, source=f"no sourced figure for {spec.name}"),
    }
    return Gpu(
        name=spec.name,
        vendor=spec.vendor,
        index=index,
        memory_total_bytes=spec.memory_bytes,
        bandwidth_gbps=spec.memory_bandwidth_gbps,
        fp16_tflops=spec.fp16_tflops,
        unified=spec.unified,
        provenance=provenance,
    )


def _load_default_database() -> tuple[GpuDatabase, str | None]:
    try:
        return load_gpu_database(data_file("gpus.json")), None
    except RigSparkError as err:
        return GpuDatabase(), f"GPU database unavailable: {err}"


class RigPanel(QWidget):
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
        self._detected: Rig | None = None
        self._rig = _PLACEHOLDER
        self.picker: GpuPickerDialog | None = None
        self._build()
        self._refresh()
        self._rebuild_recent_menu()
        if database_note:
            self.status_label.setText(database_note)

    # -- public API ------------------------------------------------------------

    def rig(self) -> Rig:
        return self._rig

    def detected_rig(self) -> Rig | None:
        return self._detected

    open_path: Path | None = None  # the rig file the current rig came from, if any

    def is_edited(self) -> bool:
        return self._rig.edited

    def database(self) -> GpuDatabase:
        return self._database

    def set_detected(self, rig: Rig) -> None:
        """Take a fresh detection; it becomes current unless the user has edits."""
        self._detected = replace(rig, edited=False)
        if self._rig.edited:
            # Keep the user's what-if rig; only its comparison with detection changes.
            self._set_current(self._marked(self._rig))
            self.status_label.setText(
                "Detection finished; your edits are kept. "
                "“Reset to detected” uses the new detection."
            )
        else:
            self._set_current(self._detected)
            self.status_label.setText("Detection finished.")

    @Slot(bool)
    def set_detecting(self, running: bool) -> None:
        self.progress_bar.setVisible(running)
        self.redetect_button.setEnabled(not running)
        if running:
            self.status_label.setText("Detecting hardware…")

    def add_gpus(self, spec: GpuSpec, count: int = 1) -> None:
        start = len(self._rig.gpus)
        added = tuple(gpu_from_spec(spec, start + i) for i in range(max(count, 0)))
        if added:
            self._edit(gpus=_reindexed((*self._rig.gpus, *added)))
            self._select_position(start + len(added) - 1)

    def remove_gpu(self, position: int) -> None:
        gpus = list(self._rig.gpus)
        if not 0 <= position < len(gpus):
            return
        removed = gpus.pop(position)
        notes = self._rig.notes
        if not any(g.name == removed.name for g in gpus):
            # Notes about a board no longer in the rig would warn about nothing.
            notes = tuple(n for n in notes if removed.name not in n)
        self._edit(gpus=_reindexed(gpus), notes=notes)
        if gpus:
            self._select_position(min(position, len(gpus) - 1))

    def set_ram_total_bytes(self, total: int) -> None:
        rig = self._rig
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
        self._edit(**updates)

    def set_gpu_reserve_bytes(self, position: int, reserve: int) -> None:
        gpus = list(self._rig.gpus)
        if not 0 <= position < len(gpus) or gpus[position].reserve_bytes == reserve:
            return
        gpu = gpus[position]
        gpus[position] = replace(
            gpu,
            reserve_bytes=max(int(reserve), 0),
            provenance={**gpu.provenance, "reserve_bytes": _USER},
        )
        self._edit(gpus=tuple(gpus))

    def use_rig(self, rig: Rig, where: str) -> None:
        """Make `rig` current (a what-if unless it is this machine), e.g. a report's."""
        self.open_path = None
        self._set_current(self._marked(rig))
        self.status_label.setText(f"Using {where}.")

    def reset_to_detected(self) -> None:
        if self._detected is not None:
            self.open_path = None
            self._set_current(self._detected)
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
        self._set_current(self._marked(rig))
        self._remember_recent(path)
        self.open_path = path
        self.status_label.setText(f"Opened {path.name}.")
        return True

    def save_rig_file(self, path: Path | str) -> bool:
        path = Path(path)
        rig = self._rig
        if rig.name in ("", DETECTED_NAME):
            # a saved rig is a machine of its own: name it after its file
            rig = replace(rig, name=path.stem)
        try:
            save_rig(rig, path)
        except (RigSparkError, OSError) as err:
            dialogs.show_error(self, "Cannot save rig", str(err))
            return False
        self._remember_recent(path)
        self.open_path = path
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

    def sizeHint(self) -> QSize:
        # Wide enough to show every column of the device list without scrolling.
        hint = super().sizeHint()
        header = self.device_tree.header()
        columns = sum(header.sectionSize(c) for c in range(header.count()))
        frame = (
            2 * self.device_tree.frameWidth()
            + self.device_tree.verticalScrollBar().sizeHint().width()
        )
        layout = self.layout()
        margins = layout.contentsMargins() if layout is not None else None
        width = columns + frame + (margins.left() + margins.right() if margins else 0)
        return QSize(max(hint.width(), width), hint.height())

    def selected_position(self) -> int | None:
        """Position of the selected GPU in the rig, or None (nothing or the CPU row)."""
        item = self.device_tree.currentItem()
        if item is None:
            return None
        position = item.data(COL_DEVICE, Qt.ItemDataRole.UserRole)
        if isinstance(position, int) and 0 <= position < len(self._rig.gpus):
            return position
        return None

    # -- construction ----------------------------------------------------------

    def _build(self) -> None:
        title = QLabel("Rig", self)
        bold = QFont(title.font())
        bold.setBold(True)
        title.setFont(bold)
        self.name_label = QLabel(self)
        self.name_label.setTextFormat(Qt.TextFormat.PlainText)  # names come from files
        self.name_label.setToolTip("The rig the plan is made for")
        self.edited_badge = QLabel(self)
        self.edited_badge.setFont(bold)
        # A border and words, not a colour, carry the state.
        self.edited_badge.setStyleSheet(
            "QLabel { border: 1px solid palette(text); border-radius: 3px; padding: 1px 6px; }"
        )
        self.edited_badge.setToolTip(
            "This what-if rig differs from the detected machine; "
            "“Reset to detected” restores the detection"
        )
        header = QHBoxLayout()
        header.addWidget(title)
        header.addWidget(self.name_label, 1)
        header.addWidget(self.edited_badge)

        self.progress_bar = QProgressBar(self)
        self.progress_bar.setRange(0, 0)
        self.progress_bar.setTextVisible(False)
        self.progress_bar.setMaximumHeight(8)
        self.progress_bar.setToolTip("Detecting GPUs, CPU and RAM")
        self.progress_bar.setAccessibleName("Detection in progress")
        self.progress_bar.setVisible(False)

        devices_label = QLabel("Dev&ices:", self)
        self.device_tree = QTreeWidget(self)
        devices_label.setBuddy(self.device_tree)
        self.device_tree.setColumnCount(len(_HEADERS))
        self.device_tree.setHeaderLabels(list(_HEADERS))
        header_item = self.device_tree.headerItem()
        for column, tip in enumerate(_HEADER_TIPS):
            header_item.setToolTip(column, tip)
        self.device_tree.setRootIsDecorated(False)
        self.device_tree.setUniformRowHeights(True)
        self.device_tree.setAlternatingRowColors(True)
        self.device_tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.device_tree.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.device_tree.setAccessibleName("Devices of the rig")
        self.device_tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.device_tree.header().setStretchLastSection(False)
        self.device_tree.currentItemChanged.connect(self._on_device_tree_current_item_changed)
        remove_action = QAction("Remove GPU", self.device_tree)
        remove_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        remove_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        remove_action.triggered.connect(self._on_remove_button_clicked)
        self.device_tree.addAction(remove_action)

        self.notes_label = QLabel(self)
        self.notes_label.setTextFormat(Qt.TextFormat.PlainText)  # names come from files
        self.notes_label.setWordWrap(True)
        self.notes_label.setTextFormat(Qt.TextFormat.PlainText)
        self.notes_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes_label.setToolTip("Warnings from detection and from the GPU database")

        self.add_button = QPushButton("Add &GPU…", self)
        self.add_button.setToolTip("Add GPUs from the spec database to plan for hardware")
        self.add_button.clicked.connect(self._on_add_button_clicked)
        self.remove_button = QPushButton("Remove GP&U", self)
        self.remove_button.setToolTip("Remove the selected GPU from the rig (Delete in the list)")
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        edit_row = QHBoxLayout()
        edit_row.addWidget(self.add_button)
        edit_row.addWidget(self.remove_button)
        edit_row.addStretch(1)

        self.ram_spin = QDoubleSpinBox(self)
        self.ram_spin.setRange(0.0, MAX_RAM_GIB)
        self.ram_spin.setDecimals(1)
        self.ram_spin.setSuffix(" GiB")
        self.ram_spin.setKeyboardTracking(False)
        self.ram_spin.setToolTip(
            "System RAM of the rig. Usable RAM keeps what was in use at detection"
        )
        self.ram_spin.valueChanged.connect(self._on_ram_spin_value_changed)
        ram_label = QLabel("RAM siz&e:", self)
        ram_label.setBuddy(self.ram_spin)

        self.reserve_spin = QSpinBox(self)
        self.reserve_spin.setRange(0, MAX_RESERVE_MIB)
        self.reserve_spin.setSingleStep(128)
        self.reserve_spin.setSuffix(" MiB")
        self.reserve_spin.setKeyboardTracking(False)
        self.reserve_spin.setToolTip(
            "Memory the plan leaves free on the selected GPU: driver and context "
            f"footprint (default {_mib(DEFAULT_GPU_RESERVE_BYTES)}) plus anything else"
        )
        self.reserve_spin.valueChanged.connect(self._on_reserve_spin_value_changed)
        self.reserve_label = QLabel("GPU &reserve:", self)
        self.reserve_label.setBuddy(self.reserve_spin)
        self.reserve_hint = QLabel(
            "Keep the display GPU's memory free: reserve what the desktop uses.", self
        )
        self.reserve_hint.setWordWrap(True)
        hint_font = QFont(self.reserve_hint.font())
        hint_font.setItalic(True)
        self.reserve_hint.setFont(hint_font)

        self.ram_spin.setMinimumWidth(140)
        self.reserve_spin.setMinimumWidth(140)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)
        form.addRow(ram_label, self.ram_spin)
        form.addRow(self.reserve_label, self.reserve_spin)
        form.addRow("", self.reserve_hint)

        self.reset_button = QPushButton("Reset to de&tected", self)
        self.reset_button.setToolTip("Drop every edit and use the detected rig again")
        self.reset_button.clicked.connect(self._on_reset_button_clicked)
        self.redetect_button = QPushButton("Re-&detect", self)
        self.redetect_button.setToolTip("Detect GPUs, CPU and RAM again")
        self.redetect_button.clicked.connect(self._on_redetect_button_clicked)
        detect_row = QHBoxLayout()
        detect_row.addWidget(self.reset_button)
        detect_row.addWidget(self.redetect_button)
        detect_row.addStretch(1)

        self.recent_menu = QMenu("Recent rigs", self)
        self.open_button = QToolButton(self)
        self.open_button.setText("&Open rig…")
        self.open_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.open_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        self.open_button.setMenu(self.recent_menu)
        self.open_button.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.open_button.setToolTip(
            "Open a rig file (JSON). The arrow, or Alt+Down, lists recent rigs"
        )
        self.open_button.clicked.connect(self._on_open_button_clicked)
        recent_action = QAction("Recent rigs", self.open_button)
        recent_action.setShortcut(QKeySequence("Alt+Down"))
        recent_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        recent_action.triggered.connect(self.open_button.showMenu)
        self.open_button.addAction(recent_action)
        self.save_button = QPushButton("&Save rig…", self)
        self.save_button.setToolTip("Save this rig as JSON to plan with it later or elsewhere")
        self.save_button.clicked.connect(self._on_save_button_clicked)
        file_row = QHBoxLayout()
        file_row.addWidget(self.open_button)
        file_row.addWidget(self.save_button)
        file_row.addStretch(1)

        self.status_label = QLabel(self)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)  # names come from files
        self.status_label.setWordWrap(True)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)

        layout = QVBoxLayout(self)
        layout.addLayout(header)
        layout.addWidget(self.progress_bar)
        layout.addWidget(devices_label)
        layout.addWidget(self.device_tree, 1)
        layout.addWidget(self.notes_label)
        layout.addLayout(edit_row)
        layout.addLayout(form)
        layout.addLayout(detect_row)
        layout.addLayout(file_row)
        layout.addWidget(self.status_label)

        # Tab order follows reading order: list, edits, sizes, detection, files.
        chain: list[QWidget] = [
            self.device_tree,
            self.add_button,
            self.remove_button,
            self.ram_spin,
            self.reserve_spin,
            self.reset_button,
            self.redetect_button,
            self.open_button,
            self.save_button,
        ]
        for first, second in pairwise(chain):
            QWidget.setTabOrder(first, second)

    # -- state -----------------------------------------------------------------

    def _marked(self, rig: Rig) -> Rig:
        edited = self._detected is None or _plain(rig) != _plain(self._detected)
        return rig if rig.edited == edited else replace(rig, edited=edited)

    def _edit(self, **updates: Any) -> None:
        """Apply a user edit: validate through the model, then mark it against detection."""
        from rigspark_gui.formats.rig import read_rig  # pydantic: loaded on the first edit

        try:
            rig = read_rig(jsonable({**fields_of(self._rig), **updates}))
        except ValueError as err:
            dialogs.show_error(self, "Invalid rig", validation_message(err))
            self._refresh()
            return
        self.status_label.clear()  # an earlier "Detection finished" no longer describes it
        self._set_current(self._marked(rig))

    def _set_current(self, rig: Rig) -> None:
        if rig == self._rig:
            self._refresh()
            return
        self._rig = rig
        self._refresh()
        self.rig_changed.emit(rig)

    def _refresh(self) -> None:
        rig = self._rig
        position = self.selected_position()
        self.name_label.setText(rig.name or "Unnamed rig")
        self.edited_badge.setVisible(rig.edited)
        self.edited_badge.setText("Edited · what-if" if rig.edited else "")
        self.reset_button.setEnabled(self._detected is not None and rig.edited)

        # Rows of the old rig must not drive the controls while the list is rebuilt.
        self.device_tree.blockSignals(True)
        self.device_tree.clear()
        if rig.hosts:
            self._add_host_groups(rig)
        else:
            for gpu_position, gpu in enumerate(rig.gpus):
                self.device_tree.addTopLevelItem(self._gpu_item(gpu_position, gpu))
            self.device_tree.addTopLevelItem(self._cpu_item(rig))
        self.device_tree.blockSignals(False)

        if rig.notes:
            self.notes_label.setText("\n".join(f"⚠ Warning: {note}" for note in rig.notes))
        self.notes_label.setVisible(bool(rig.notes))

        self.ram_spin.blockSignals(True)
        self.ram_spin.setValue(rig.ram_total_bytes / GIB)
        self.ram_spin.blockSignals(False)
        if position is not None and position < len(rig.gpus):
            self._select_position(position)
        self._sync_selection_controls()

    def _gpu_item(self, position: int, gpu: Gpu) -> QTreeWidgetItem:
        item = QTreeWidgetItem()
        item.setData(COL_DEVICE, Qt.ItemDataRole.UserRole, position)
        unknown = gpu.memory_total_bytes is None or gpu.bandwidth_gbps is None
        flags = [" (display)" if gpu.display_attached else ""]
        label = f"{'⚠ ' if unknown else ''}GPU {gpu.index} · {_short_name(gpu.name)}"
        item.setText(COL_DEVICE, label + "".join(flags))
        details = [gpu.name, f"Vendor: {gpu.vendor}"]
        if gpu.uuid:
            details.append(f"UUID: {gpu.uuid}")
        if gpu.compute_capability:
            details.append(f"Compute capability: {gpu.compute_capability}")
        if gpu.pcie_generation and gpu.pcie_width:
            details.append(f"PCIe: gen {gpu.pcie_generation} x{gpu.pcie_width}")
        if gpu.display_attached:
            details.append("A display is attached: raise its reserve to keep the desktop's memory")
        if gpu.unified:
            details.append("Shares system memory (unified)")
        if unknown:
            details.append("Some figures are unknown; plans for this GPU are less certain")
        item.setToolTip(COL_DEVICE, "\n".join(details))

        memory = gpu.basis_of("memory_total_bytes")
        total = gpu.memory_total_bytes
        item.setText(COL_MEMORY, _cell(_gib(total) if total is not None else None, memory))
        memory_tip = ["Total memory on the board"]
        if total is not None:
            memory_tip.append(f"{total:,} bytes")
        if gpu.memory_free_bytes is not None:
            memory_tip.append(f"Free when detected: {gpu.memory_free_bytes:,} bytes")
        memory_tip.append(
            f"A plan may use {gpu.capacity_bytes:,} bytes ({_gib(gpu.capacity_bytes)}): "
            "free (or total) less reserve"
        )
        memory_tip.append(_basis_line(memory))
        item.setToolTip(COL_MEMORY, "\n".join(memory_tip))

        bandwidth = gpu.basis_of("bandwidth_gbps")
        bw = gpu.bandwidth_gbps
        item.setText(COL_BANDWIDTH, _cell(_rate(bw, "GB/s") if bw else None, bandwidth))
        bw_tip = ["Memory bandwidth; each generated token reads the weights once"]
        if bw:
            bw_tip.append(f"{bw:g} GB/s = {bw * 1e9:,.0f} bytes per second")
        bw_tip.append(_basis_line(bandwidth))
        item.setToolTip(COL_BANDWIDTH, "\n".join(bw_tip))

        compute = gpu.basis_of("fp16_tflops")
        tflops = gpu.fp16_tflops
        item.setText(COL_COMPUTE, _cell(_rate(tflops, "TFLOPS") if tflops else None, compute))
        compute_tip = ["Dense FP16 throughput; bounds prompt processing (prefill)"]
        if tflops:
            compute_tip.append(f"{tflops:g} TFLOPS = {tflops * 1e12:,.0f} FLOP/s")
        compute_tip.append(_basis_line(compute))
        item.setToolTip(COL_COMPUTE, "\n".join(compute_tip))

        basis, basis_line = _reserve_basis(gpu)
        item.setText(COL_RESERVE, f"{_mib(gpu.reserve_bytes)} · {basis}")
        item.setToolTip(
            COL_RESERVE,
            "Kept free on this GPU: driver/context footprint, the desktop if a display "
            f"is attached, any margin\n{gpu.reserve_bytes:,} bytes\n{basis_line}",
        )
        return item

    def _cpu_item(self, rig: Rig) -> QTreeWidgetItem:
        cpu = rig.cpu
        item = QTreeWidgetItem()
        item.setData(COL_DEVICE, Qt.ItemDataRole.UserRole, _CPU_ROW)
        item.setText(COL_DEVICE, f"CPU · {_short_cpu_name(cpu.name)}")
        item.setToolTip(COL_DEVICE, f"{cpu.name}\nThe CPU path and offloaded layers use system RAM")

        total = _rig_basis(rig, "ram_total_bytes")
        usable = rig.ram_usable_bytes
        ram_known = rig.ram_total_bytes > 0 or total.basis is not Basis.UNKNOWN
        ram_text = (
            f"{_gib(rig.ram_total_bytes)} ({_gib_number(usable)} usable)" if ram_known else None
        )
        item.setText(COL_MEMORY, _cell(ram_text, total))
        ram_tip = [
            "System RAM: total, and what a plan may use",
            f"Total: {rig.ram_total_bytes:,} bytes — {_basis_line(total)}",
        ]
        if rig.ram_available_bytes is not None:
            available = _rig_basis(rig, "ram_available_bytes")
            ram_tip.append(f"Usable (available): {usable:,} bytes — {_basis_line(available)}")
        else:
            ram_tip.append(f"Usable: {usable:,} bytes (total less the operating system reserve)")
        item.setToolTip(COL_MEMORY, "\n".join(ram_tip))

        bandwidth = cpu.basis_of("memory_bandwidth_gbps")
        bw = cpu.memory_bandwidth_gbps
        item.setText(COL_BANDWIDTH, _cell(_rate(bw, "GB/s") if bw else None, bandwidth))
        bw_tip = ["RAM bandwidth; bounds decode speed of layers on the CPU"]
        if bw:
            bw_tip.append(f"{bw:g} GB/s = {bw * 1e9:,.0f} bytes per second")
        bw_tip.append(_basis_line(bandwidth))
        item.setToolTip(COL_BANDWIDTH, "\n".join(bw_tip))

        cores = cpu.basis_of("cores")
        item.setText(COL_COMPUTE, _cell(f"{cpu.cores} cores" if cpu.cores else None, cores))
        cores_tip = ["Physical CPU cores"]
        if cpu.threads:
            cores_tip.append(f"{cpu.threads} threads")
        cores_tip.append(_basis_line(cores))
        item.setToolTip(COL_COMPUTE, "\n".join(cores_tip))

        if rig.ram_available_bytes is None:
            default = rig.ram_reserve_bytes == DEFAULT_RAM_RESERVE_BYTES
            item.setText(
                COL_RESERVE, f"{_gib(rig.ram_reserve_bytes)} · {'default' if default else 'user'}"
            )
            item.setToolTip(
                COL_RESERVE,
                "RAM left to the operating system, since available RAM is unknown\n"
                f"{rig.ram_reserve_bytes:,} bytes",
            )
        else:
            item.setText(COL_RESERVE, "—")
            item.setToolTip(COL_RESERVE, "Usable RAM is the available memory: nothing to reserve")
        return item

    def _add_host_groups(self, rig: Rig) -> None:
        """A rig of several machines: each host's devices under it, this machine first."""
        link = rig.link.label
        for host in rig.host_names:
            h = next((x for x in rig.hosts if x.name == host), None)
            if h is None:
                title, tip = "This machine", "Runs llama-server or the serving engine's head"
            else:
                where = f" · {h.address}" if h.address else ""
                title = f"{h.name}{where} · {link}"
                tip = (
                    f"Joined over {link}: {rig.link.gbit_s:g} Gbit/s, round trip "
                    f"{rig.link.round_trip_s * 1e6:g} µs. Its layers cost a network hop per "
                    "token (llama.cpp RPC) or run as a pipeline stage (vLLM, SGLang)."
                )
            group = QTreeWidgetItem([title])
            group.setData(COL_DEVICE, Qt.ItemDataRole.UserRole, _HOST_ROW)
            group.setToolTip(COL_DEVICE, tip)
            font = group.font(COL_DEVICE)
            font.setBold(True)
            group.setFont(COL_DEVICE, font)
            self.device_tree.addTopLevelItem(group)
            for position, gpu in enumerate(rig.gpus):
                if gpu.host == host:
                    group.addChild(self._gpu_item(position, gpu))
            if h is None:
                group.addChild(self._cpu_item(rig))
            elif h.ram_total_bytes:
                ram = QTreeWidgetItem([f"RAM · {_gib(h.ram_total_bytes)}"])
                ram.setData(COL_DEVICE, Qt.ItemDataRole.UserRole, _HOST_ROW)
                group.addChild(ram)
            group.setExpanded(True)

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
            gpu = self._rig.gpus[position]
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
            self.ram_spin.setValue(self._rig.ram_total_bytes / GIB)
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
        stem = "".join(c if c.isalnum() or c in "-_" else "-" for c in self._rig.name) or "rig"
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
