"""The rig panel's controls and their layout, with no behaviour of their own.

`RigPanelWidgets` builds what the panel shows: its title and what-if badge, the device
list, the GPU add/remove buttons, the RAM and GPU reserve fields, the detection buttons
and the rig file buttons, in reading order for the keyboard. `RigPanel` (rig_panel.py)
derives from it and connects the controls to the rig they edit.
"""

from __future__ import annotations

from itertools import pairwise

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QAction, QFont, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
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
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.core.rig import DEFAULT_GPU_RESERVE_BYTES
from rigspark_gui.ui.rig_rows import HEADER_TIPS, HEADERS, mib_text

# Mnemonics avoid letters the window already uses (File, View, Help, Model, Quant,
# Backend, Context, Parallel, tabs Paths, KV, Layers, Catalog): Alt+key stays unambiguous.
MNEMONICS = "GUETDOSIR"
# Ceilings for the spin boxes: far above any real machine, low enough to catch a typo.
MAX_RAM_GIB = 65536.0
MAX_RESERVE_MIB = 1 << 20


class RigPanelWidgets(QWidget):
    """The rig panel's labels, device list, fields and buttons, laid out; no behaviour."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
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
            "This what-if rig differs from the detected machine; Edit ▸ Undo takes an "
            "edit back, “Reset to detected” restores the detection"
        )
        header = QHBoxLayout()
        header.addWidget(title)
        header.addWidget(self.name_label, 1)
        header.addWidget(self.edited_badge)
        # where the rig comes from: this computer, a file (its path in the tooltip), a report
        self.source_label = QLabel(self)
        self.source_label.setTextFormat(Qt.TextFormat.PlainText)  # file names
        source_font = QFont(self.source_label.font())
        source_font.setItalic(True)
        self.source_label.setFont(source_font)
        self.source_label.setVisible(False)

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
        self.device_tree.setColumnCount(len(HEADERS))
        self.device_tree.setHeaderLabels(list(HEADERS))
        header_item = self.device_tree.headerItem()
        for column, tip in enumerate(HEADER_TIPS):
            header_item.setToolTip(column, tip)
        self.device_tree.setRootIsDecorated(False)
        self.device_tree.setUniformRowHeights(True)
        self.device_tree.setAlternatingRowColors(True)
        self.device_tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.device_tree.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.device_tree.setAccessibleName("Devices of the rig")
        self.device_tree.header().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.device_tree.header().setStretchLastSection(False)
        self.remove_action = QAction("Remove GPU", self.device_tree)
        self.remove_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        self.remove_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self.device_tree.addAction(self.remove_action)

        self.notes_label = QLabel(self)
        self.notes_label.setTextFormat(Qt.TextFormat.PlainText)  # names come from files
        self.notes_label.setWordWrap(True)
        self.notes_label.setTextFormat(Qt.TextFormat.PlainText)
        self.notes_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.notes_label.setToolTip("Warnings from detection and from the GPU database")

        self.add_button = QPushButton("Add &GPU…", self)
        self.add_button.setToolTip("Add GPUs from the spec database to plan for hardware")
        self.remove_button = QPushButton("Remove GP&U", self)
        self.remove_button.setToolTip("Remove the selected GPU from the rig (Delete in the list)")
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
        ram_label = QLabel("RAM siz&e:", self)
        ram_label.setBuddy(self.ram_spin)

        self.reserve_spin = QSpinBox(self)
        self.reserve_spin.setRange(0, MAX_RESERVE_MIB)
        self.reserve_spin.setSingleStep(128)
        self.reserve_spin.setSuffix(" MiB")
        self.reserve_spin.setKeyboardTracking(False)
        self.reserve_spin.setToolTip(
            "Memory the plan leaves free on the selected GPU: its backend's context (the "
            "Overhead column says how much and why; "
            f"{mib_text(DEFAULT_GPU_RESERVE_BYTES)} where unknown) plus anything else"
        )
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
        self.redetect_button = QPushButton("Re-&detect", self)
        self.redetect_button.setToolTip("Detect GPUs, CPU and RAM again")
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
        recent_action = QAction("Recent rigs", self.open_button)
        recent_action.setShortcut(QKeySequence("Alt+Down"))
        recent_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        recent_action.triggered.connect(self.open_button.showMenu)
        self.open_button.addAction(recent_action)
        self.save_button = QPushButton("&Save rig…", self)
        self.save_button.setToolTip("Save this rig as JSON to plan with it later or elsewhere")
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
        layout.addWidget(self.source_label)
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
