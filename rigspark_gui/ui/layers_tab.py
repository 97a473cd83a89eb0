"""The Layers tab: a lane per device, layers dragged between lanes, live loads and speed.

Presentation only: loads come from `device_loads`, speed from `estimate_decode` /
`estimate_prefill`, commands from `core.launch`, whole placements from
`core.placement_strategies`; edits go through the `PlacementDocument`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from PySide6.QtCore import QItemSelectionModel, QModelIndex, QPoint, Qt, Slot
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListView,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
    QWidgetAction,
)

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.launch import Engine, LaunchCommand, launch_command
from rigspark_gui.core.memory import (
    RepackBytes,
    WeightsLayout,
    kv_bytes_per_layer,
    repack_for,
    weights_layout,
)
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.placement import (
    CPU,
    INPUT,
    OUTPUT,
    DeviceLoad,
    Placement,
    Verdict,
    device_loads,
    even_split,
    fill_fastest_first,
    fit_by_ngl,
    rig_devices,
    uniform_placement,
)
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel, estimate_decode, estimate_prefill
from rigspark_gui.core.units import gib, seconds_text, speed_text
from rigspark_gui.ui.capacity_bar import SEGMENTS, CapacityBar
from rigspark_gui.ui.lane_model import UNIT_ROLE, LaneModel, device_label
from rigspark_gui.ui.layer_strip import LayerStrip, StripBlock
from rigspark_gui.ui.placement_document import PlacementDocument


class _Lane(QFrame):
    """Header, capacity bar and list of one device."""

    def __init__(self, model: LaneModel, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.model = model
        self.header = QLabel(title, self)
        self.header.setTextFormat(Qt.TextFormat.PlainText)  # device names come from drivers
        self.header.setWordWrap(True)
        font = self.header.font()
        font.setBold(True)
        self.header.setFont(font)
        self.bar = CapacityBar(self)
        self.strip = LayerStrip(self)
        self.strip.unit_clicked.connect(self._on_strip_clicked)
        self.strip.units_dropped.connect(
            lambda mime: model.dropMimeData(mime, Qt.DropAction.MoveAction, -1, 0, QModelIndex())
        )
        self.view = QListView(self)
        self.view.setModel(model)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.setSelectionRectVisible(True)
        self.view.setDragEnabled(True)
        self.view.setAcceptDrops(True)
        self.view.setDropIndicatorShown(True)
        self.view.setDragDropMode(QAbstractItemView.DragDropMode.DragDrop)
        self.view.setDefaultDropAction(Qt.DropAction.MoveAction)
        self.view.setUniformItemSizes(True)  # 127 rows lay out without measuring each
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.setAccessibleName(f"{title} layers")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.header)
        lay.addWidget(self.bar)
        lay.addWidget(self.strip)
        lay.addWidget(self.view, 1)
        sel = self.view.selectionModel()
        if sel is not None:
            sel.selectionChanged.connect(
                lambda *_: self.strip.set_selected(set(self.selected_units()))
            )

    def _on_strip_clicked(self, unit: str, add: bool) -> None:
        """A click on the picture selects the layer in the list (keyboard users use that)."""
        ids = self.model.unit_ids()
        if unit not in ids:
            return
        index = self.model.index(ids.index(unit))
        flag = QItemSelectionModel.SelectionFlag
        mode = flag.Toggle if add else flag.ClearAndSelect
        sel = self.view.selectionModel()
        if sel is not None:
            sel.select(index, mode)
            self.view.scrollTo(index)

    def selected_units(self) -> list[str]:
        sel = self.view.selectionModel()
        if sel is None:
            return []
        return [
            str(i.data(UNIT_ROLE)) for i in sorted(sel.selectedIndexes(), key=lambda i: i.row())
        ]


class LayersTab(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._document = PlacementDocument(self)
        self._spec: ModelSpec | None = None
        self._rig: Rig | None = None
        self._settings: PlanSettings | None = None
        self._perf: SpeedModel | None = None
        self._start: Placement | None = None  # the plan's placement the user started from
        self._quant = ""
        self._layout: WeightsLayout | None = None
        self._repack: RepackBytes | None = None
        self._kv_layers: tuple[int, ...] = ()
        self._lanes: dict[str, _Lane] = {}
        self._host_boxes: list[QGroupBox] = []
        self._loads: tuple[DeviceLoad, ...] = ()
        self._move_actions: dict[str, QAction] = {}

        self._build_actions()
        self._toolbar = self._build_toolbar()
        self.summary = QLabel("No model", self)
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message = QLabel("", self)
        self.message.setWordWrap(True)
        legend = QLabel(
            "  ".join(f'<span style="color:{c.name()}">■</span> {n}' for n, c in SEGMENTS)
            + "  — against each device's memory",
            self,
        )
        self._lanes_box = QHBoxLayout()
        self._lanes_box.setSpacing(8)

        self.engine_combo = QComboBox(self)
        for e in Engine:
            self.engine_combo.addItem(e.label, e.value)
        self.engine_combo.setAccessibleName("launch engine")
        self.command_text = QPlainTextEdit(self)
        self.command_text.setReadOnly(True)
        self.command_text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.command_text.setMaximumHeight(90)
        self.command_text.setAccessibleName("launch command")
        self.copy_button = QPushButton("Copy", self)
        self.command_notes = QLabel("", self)
        self.command_notes.setWordWrap(True)

        launch_row = QHBoxLayout()
        launch_row.addWidget(QLabel("Launch with", self))
        launch_row.addWidget(self.engine_combo)
        launch_row.addStretch(1)
        launch_row.addWidget(self.copy_button)

        root = QVBoxLayout(self)
        root.addWidget(self._toolbar)
        root.addWidget(self.summary)
        root.addWidget(legend)
        root.addLayout(self._lanes_box, 1)
        root.addWidget(self.message)
        root.addLayout(launch_row)
        root.addWidget(self.command_text)
        root.addWidget(self.command_notes)

        self._document.placement_changed.connect(self._on_document_placement_changed)
        self.engine_combo.currentIndexChanged.connect(self._on_engine_combo_changed)
        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        self._update_enabled()

    # ------------------------------------------------------------------ public

    @property
    def document(self) -> PlacementDocument:
        return self._document

    def set_context(
        self,
        spec: ModelSpec,
        rig: Rig,
        settings: PlanSettings,
        perf: SpeedModel,
        quant: str,
        start: Placement | None = None,
    ) -> None:
        """Show the plan's placement (`start`; llama.cpp's own when None). A hand edit
        survives a change that leaves its model, rig and quantization as they were (the
        context, KV types, engine ... only change its loads and speed), and says so."""
        same = (
            self._spec is not None
            and self._spec.id == spec.id
            and self._rig == rig
            and self._quant == quant
        )
        keep = same and self.edited_placement() is not None
        self._spec, self._rig, self._settings, self._perf = spec, rig, settings, perf
        self._quant = quant
        self._layout = weights_layout(spec, quant)
        self._repack = repack_for(spec, quant, rig.cpu.features)
        self._kv_layers = kv_bytes_per_layer(spec.geometry, settings)
        if keep:
            current = self._document.placement
            assert current is not None
            self._document.adjust(replace(current, max_context=settings.context))
            self.message.setText("Your hand placement is kept under the new settings.")
            return
        self._start = start if start is not None else self._auto_placement()
        self._rebuild_lanes(rig_devices(rig))
        for lane in self._lanes.values():
            lane.setEnabled(True)
        self._toolbar.setEnabled(True)
        self.message.clear()
        self._document.reset(self._start)

    def show_unplaceable(self, why: str) -> None:
        """A plan without a layer placement (serving engines shard every layer)."""
        self.summary.setText(why)
        self.message.clear()
        for lane in self._lanes.values():
            lane.setEnabled(False)
        self._toolbar.setEnabled(False)
        self.command_text.setPlainText("")
        self.command_notes.clear()

    def restore_placement(self, placement: Placement) -> bool:
        """Put a saved hand placement back on screen as one undoable edit; False when it
        is not a placement of this model on these devices."""
        current = self._document.placement
        if current is None:
            return False
        same_units = [u.unit for u in placement.units] == [u.unit for u in current.units]
        if not same_units or not set(placement.devices) <= set(current.devices):
            return False
        restored = replace(placement, max_context=current.max_context, devices=current.devices)
        self._document.replace(restored, "Restore the saved hand placement")
        return True

    def edited_placement(self) -> Placement | None:
        """The placement on screen when the user has changed it from the plan's, else
        None (surfaces that show a placement use this one then)."""
        current = self._document.placement
        start = self._start
        if current is None or start is None or current.units == start.units:
            return None
        return current

    def lane(self, device: str) -> _Lane:
        return self._lanes[device]

    def lane_model(self, device: str) -> LaneModel:
        return self._lanes[device].model

    def move_action(self, device: str) -> QAction:
        return self._move_actions[device]

    def selected_units(self) -> list[str]:
        return [u for lane in self._lanes.values() for u in lane.selected_units()]

    # ------------------------------------------------------------------ building

    def _action(self, text: str, tip: str, slot: object) -> QAction:
        a = QAction(text, self)
        a.setToolTip(tip)
        a.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        a.triggered.connect(slot)
        self.addAction(a)
        return a

    def _build_actions(self) -> None:
        self.auto_action = self._action(
            "Auto-place",
            "llama.cpp's rule: split by free memory, as many layers offloaded as fit (-ngl)",
            self._on_auto_action_triggered,
        )
        self.fastest_action = self._action(
            "Fill fastest first",
            "As many layers as fit on the highest-bandwidth GPU, then the next, rest on the CPU",
            self._on_fastest_action_triggered,
        )
        self.even_action = self._action(
            "Even split", "Every layer on a GPU, the same count on each", self._on_even_triggered
        )
        self.cpu_action = self._action(
            "All on CPU", "Run the whole model on the CPU", self._on_cpu_action_triggered
        )
        stack = self._document.undo_stack
        # plain "Undo"/"Redo" on the buttons (the edit they undo is in the tooltip), so
        # the toolbar does not widen with every command's name
        self.undo_action = QAction("Undo", self)
        self.undo_action.triggered.connect(stack.undo)
        stack.canUndoChanged.connect(self.undo_action.setEnabled)
        stack.undoTextChanged.connect(lambda t: self.undo_action.setToolTip(f"Undo {t}"))
        self.undo_action.setEnabled(False)
        self.undo_action.setShortcut(QKeySequence("Ctrl+Z"))
        self.redo_action = QAction("Redo", self)
        self.redo_action.triggered.connect(stack.redo)
        stack.canRedoChanged.connect(self.redo_action.setEnabled)
        stack.redoTextChanged.connect(lambda t: self.redo_action.setToolTip(f"Redo {t}"))
        self.redo_action.setEnabled(False)
        self.redo_action.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
        for a in (self.undo_action, self.redo_action):
            a.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            self.addAction(a)
        self.experts_cpu_action = self._action(
            "Experts of selection to CPU",
            "Keep attention on the GPU, run the routed experts of the selected layers on the CPU",
            self._on_experts_cpu_triggered,
        )
        self.experts_back_action = self._action(
            "Experts back with layers",
            "Put the experts of the selected layers back on their layer's device",
            self._on_experts_back_triggered,
        )
        self.first_n_action = self._action(
            "First N layers' experts to CPU",
            "Like llama.cpp's --n-cpu-moe N",
            self._on_first_n_triggered,
        )
        self.move_menu = QMenu("Move selection to", self)

    def _build_toolbar(self) -> QToolBar:
        tb = QToolBar(self)
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for a in (self.auto_action, self.fastest_action, self.even_action, self.cpu_action):
            tb.addAction(a)
        tb.addSeparator()
        tb.addAction(self.undo_action)
        tb.addAction(self.redo_action)
        tb.addSeparator()
        move = QToolButton(tb)
        move.setText("Move selection to ▸")
        move.setMenu(self.move_menu)
        move.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        tb.addWidget(move)
        tb.addSeparator()
        # the MoE tools in one menu, so the toolbar fits at 1024 px and the N field is
        # never pushed into the overflow where it cannot be set
        experts_menu = QMenu("Experts", self)
        experts_menu.addAction(self.experts_cpu_action)
        experts_menu.addAction(self.experts_back_action)
        experts_menu.addSeparator()
        self.first_n_spin = QSpinBox(experts_menu)
        self.first_n_spin.setPrefix("N = ")
        self.first_n_spin.setAccessibleName("number of layers whose experts go to the CPU")
        spin_action = QWidgetAction(experts_menu)
        spin_action.setDefaultWidget(self.first_n_spin)
        experts_menu.addAction(spin_action)
        experts_menu.addAction(self.first_n_action)
        self.experts_button = QToolButton(tb)
        self.experts_button.setText("Experts ▸")
        self.experts_button.setToolTip("Mixture-of-experts tools: run experts on the CPU")
        self.experts_button.setMenu(experts_menu)
        self.experts_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        experts_action = tb.addWidget(self.experts_button)
        self.experts_menu = experts_menu
        # hiding the button's action hides the MoE tools for dense models
        self._moe_widgets = [experts_action]
        return tb

    def _rebuild_lanes(self, devices: Sequence[str]) -> None:
        if list(self._lanes) == list(devices):
            self._retitle_lanes()
            return
        for lane in self._lanes.values():
            self._lanes_box.removeWidget(lane)
            lane.deleteLater()
        for box in self._host_boxes:
            self._lanes_box.removeWidget(box)
            box.deleteLater()
        self._host_boxes = []
        self._lanes.clear()
        for a in self._move_actions.values():
            self.removeAction(a)
        self._move_actions.clear()
        self.move_menu.clear()
        # GPUs first, left to right, the CPU last: the order layers flow through them
        ordered = [d for d in devices if d != CPU] + [d for d in devices if d == CPU]
        groups = self._host_groups(ordered)
        for host, members in groups:
            target = self._lanes_box
            if len(groups) > 1:
                # a rig of several machines: each host's lanes under its name
                box = QGroupBox(self._host_title(host), self)
                target = QHBoxLayout(box)
                target.setContentsMargins(4, 4, 4, 4)
                self._lanes_box.addWidget(box, len(members))
                self._host_boxes.append(box)
            for d in members:
                model = LaneModel(self._document, d, self)
                model.drop_refused.connect(self._on_lane_drop_refused)
                lane = _Lane(model, "", self)
                lane.view.customContextMenuRequested.connect(self._on_view_context_menu)
                target.addWidget(lane, 1)
                self._lanes[d] = lane
        for i, d in enumerate(ordered):
            action = self._action(
                f"{device_label(d)}",
                f"Move the selected layers to {device_label(d)}",
                lambda _=False, dev=d: self._move_selection(dev),
            )
            action.setShortcut(QKeySequence(f"Alt+{i + 1}"))
            self.move_menu.addAction(action)
            self._move_actions[d] = action
        self._retitle_lanes()

    def _host_groups(self, ordered: Sequence[str]) -> list[tuple[str, list[str]]]:
        """Runs of lanes on one host ('' = this machine), in the order given."""
        groups: list[tuple[str, list[str]]] = []
        for d in ordered:
            host = "" if d == CPU or self._rig is None else self._rig.gpus[int(d[4:])].host
            if not groups or groups[-1][0] != host:
                groups.append((host, []))
            groups[-1][1].append(d)
        return groups

    def _host_title(self, host: str) -> str:
        rig = self._rig
        if not host or rig is None:
            return "This machine (llama-server)"
        h = next((x for x in rig.hosts if x.name == host), None)
        where = f" ({h.address})" if h is not None and h.address else ""
        return f"{host}{where}: rpc-server over {rig.link.label}"

    def _retitle_lanes(self) -> None:
        if self._rig is None:
            return
        for d, lane in self._lanes.items():
            if d == CPU:
                name = self._rig.cpu.name
            else:
                gpu = self._rig.gpus[int(d.split(":")[1])]
                # another host numbers its GPUs from 0: say which one it is there
                name = f"{gpu.name} (GPU {gpu.index} on {gpu.host})" if gpu.host else gpu.name
            lane.header.setText(f"{device_label(d)} — {name}")
            self._move_actions[d].setText(f"{device_label(d)} ({name})")

    # ------------------------------------------------------------------ strategies

    def _auto_placement(self) -> Placement | None:
        if self._spec is None or self._rig is None or self._settings is None:
            return None
        assert self._layout is not None
        return fit_by_ngl(
            self._spec.geometry, self._layout, self._rig, self._settings, self._kv_layers
        )

    def _replace(self, placement: Placement | None, text: str) -> None:
        if placement is not None:
            self._document.replace(placement, text)

    @Slot()
    def _on_auto_action_triggered(self) -> None:
        self._replace(self._auto_placement(), "Auto-place")

    @Slot()
    def _on_fastest_action_triggered(self) -> None:
        if self._spec and self._rig and self._settings and self._layout:
            p = fill_fastest_first(
                self._spec.geometry, self._layout, self._rig, self._settings, self._kv_layers
            )
            self._replace(p, "Fill fastest first")

    @Slot()
    def _on_even_triggered(self) -> None:
        if self._spec and self._rig and self._settings:
            self._replace(even_split(self._spec.geometry, self._rig, self._settings), "Even split")

    @Slot()
    def _on_cpu_action_triggered(self) -> None:
        if self._spec and self._rig and self._settings:
            p = uniform_placement(self._spec.geometry, self._rig, self._settings, CPU)
            self._replace(p, "All on CPU")

    # ------------------------------------------------------------------ edits

    def _run_edit(self, edit: object) -> None:
        try:
            assert callable(edit)
            edit()
        except RigSparkError as err:
            self.message.setText(f"⚠ {err}")
        else:
            self.message.clear()

    def _move_selection(self, device: str) -> None:
        units = self.selected_units()
        if not units:
            self.message.setText("Select layers first (click, Shift/Ctrl-click or drag a box)")
            return
        self._run_edit(lambda: self._document.move_units(units, device))

    def _selected_blocks(self) -> list[str]:
        return [u for u in self.selected_units() if u not in (INPUT, OUTPUT)]

    @Slot()
    def _on_experts_cpu_triggered(self) -> None:
        blocks = self._selected_blocks()
        if blocks:
            self._run_edit(lambda: self._document.move_experts(blocks, CPU))

    @Slot()
    def _on_experts_back_triggered(self) -> None:
        blocks = self._selected_blocks()
        if blocks:
            self._run_edit(lambda: self._document.move_experts(blocks, None))

    @Slot()
    def _on_first_n_triggered(self) -> None:
        if self._spec is None:
            return
        g = self._spec.geometry
        n = self.first_n_spin.value()
        blocks = [f"blk.{il}" for il in range(min(n, g.n_layer)) if g.is_moe_layer(il)]
        if blocks:
            self._run_edit(lambda: self._document.move_experts(blocks, CPU))

    @Slot(str)
    def _on_lane_drop_refused(self, why: str) -> None:
        self.message.setText(f"⚠ {why}")

    @Slot(QPoint)
    def _on_view_context_menu(self, pos: QPoint) -> None:
        view = self.sender()
        if not isinstance(view, QListView):
            return
        menu = QMenu(self)
        for a in self._move_actions.values():
            menu.addAction(a)
        if self._is_moe():
            menu.addSeparator()
            menu.addAction(self.experts_cpu_action)
            menu.addAction(self.experts_back_action)
        menu.exec(view.viewport().mapToGlobal(pos))

    # ------------------------------------------------------------------ refresh

    def _is_moe(self) -> bool:
        return self._spec is not None and self._spec.geometry.is_moe

    def _update_enabled(self) -> None:
        ready = self._document.placement is not None
        for a in (self.auto_action, self.fastest_action, self.even_action, self.cpu_action):
            a.setEnabled(ready)
        gpus = self._rig is not None and bool(self._rig.gpus)
        self.fastest_action.setEnabled(ready and gpus)
        self.even_action.setEnabled(ready and gpus)
        moe = self._is_moe()
        for w in self._moe_widgets:
            w.setVisible(moe)
        for a in (self.experts_cpu_action, self.experts_back_action, self.first_n_action):
            a.setEnabled(ready and moe)
        if self._spec is not None:
            self.first_n_spin.setRange(0, self._spec.geometry.n_layer)

    @Slot()
    def _on_document_placement_changed(self) -> None:
        p = self._document.placement
        ok = (
            p is not None
            and self._spec is not None
            and self._rig is not None
            and self._settings is not None
            and self._layout is not None
        )
        if not ok:
            self._loads = ()
            for lane in self._lanes.values():
                lane.model.refresh(None, None)
                lane.bar.set_load(None)
            self.summary.setText("No model")
            self._show_command()
            self._update_enabled()
            return
        assert p is not None and self._spec and self._rig and self._settings and self._layout
        g = self._spec.geometry
        self._loads = device_loads(
            p, g, self._layout, self._rig, self._settings, self._kv_layers, cpu_repack=self._repack
        )
        by_device = {x.device: x for x in self._loads}
        strips = self._strip_blocks(p)
        for d, lane in self._lanes.items():
            lane.model.refresh(p, self._layout)
            lane.bar.set_load(by_device.get(d))
            load = by_device.get(d)
            lane.strip.set_blocks(strips.get(d, []), load.capacity_bytes if load else 0)
        self.summary.setText(self._summary_text(p))
        self._show_command()
        self._update_enabled()

    def _strip_blocks(self, p: Placement) -> dict[str, list[StripBlock]]:
        """Each device's blocks, in one pass: its units (a layer whose experts left,
        without them; KV drawn with its layer) and the experts of other devices' layers
        it runs."""
        layout = self._layout
        assert layout is not None
        kv_layers = self._kv_layers
        out: dict[str, list[StripBlock]] = {}
        for u in p.units:
            here = out.setdefault(u.device, [])
            if u.unit == INPUT or u.unit == OUTPUT:
                n = layout.input_bytes if u.unit == INPUT else layout.output_bytes
                here.append(StripBlock(u.unit, n, 0, False))
                continue
            experts = layout.block_expert_bytes[u.index]
            away = u.experts_device is not None and u.experts_device != u.device
            kv = kv_layers[u.index] if u.index < len(kv_layers) else 0
            weights = layout.block_bytes[u.index] - (experts if away else 0)
            here.append(StripBlock(u.unit, weights, kv, False))
            if away and u.experts_device is not None:
                out.setdefault(u.experts_device, []).append(StripBlock(u.unit, experts, 0, True))
        return out

    def _summary_text(self, p: Placement) -> str:
        assert self._spec and self._rig and self._settings and self._layout and self._perf
        g, s = self._spec.geometry, self._settings
        decode = estimate_decode(p, g, self._layout, self._rig, s, self._perf)
        prefill = estimate_prefill(p, g, self._layout, self._rig, s, self._perf)
        parts = [f"Decode {speed_text(decode.tok_s, decode.low_tok_s, decode.high_tok_s)}"]
        if prefill.known and prefill.seconds is not None:
            parts.append(
                f"prefill of {prefill.prompt_tokens} tokens "
                f"{seconds_text(prefill.seconds, prefill.low_seconds, prefill.high_seconds)}"
            )
        else:
            parts.append(f"prefill {prefill.basis}")
        if decode.limiting_device is not None:
            parts.append(f"limited by {device_label(decode.limiting_device)}")
        over = [x for x in self._loads if x.verdict is Verdict.OVER]
        if over:
            worst = max(over, key=lambda x: x.over_bytes)
            parts.append(
                f"✗ does not fit: {device_label(worst.device)} over by {gib(worst.over_bytes, 2)}"
            )
        else:
            parts.append("✓ the whole placement fits")
        self.summary.setToolTip(f"{decode.basis}\n{prefill.basis}")
        return "  ·  ".join(parts)

    def _current_command(self) -> LaunchCommand | None:
        p = self._document.placement
        if p is None or self._spec is None or self._rig is None or self._settings is None:
            return None
        engine = Engine(self.engine_combo.currentData())
        need = None
        totals = {x.device: x.total_bytes for x in self._loads}
        fractions = [
            totals.get(f"gpu:{i}", 0) / gpu.memory_total_bytes
            for i, gpu in enumerate(self._rig.gpus)
            if gpu.memory_total_bytes
        ]
        if fractions:
            need = max(fractions)
        return launch_command(
            engine,
            p,
            self._spec,
            self._quant,
            self._settings,
            self._rig,
            gpu_fraction_needed=need,
        )

    def _show_command(self) -> None:
        cmd = self._current_command()
        if cmd is None:
            self.command_text.setPlainText("")
            self.command_notes.setText("")
            self.copy_button.setEnabled(False)
            return
        self.command_text.setPlainText(cmd.text)
        notes = [f"⚠ {cmd.explanation}"] if not cmd.supported else []
        notes += [f"• {n}" for n in cmd.notes]
        self.command_notes.setText("\n".join(notes))
        self.copy_button.setEnabled(cmd.supported)

    @Slot(int)
    def _on_engine_combo_changed(self, _index: int) -> None:
        self._show_command()

    @Slot()
    def _on_copy_button_clicked(self) -> None:
        clipboard = QGuiApplication.clipboard()
        clipboard.setText(self.command_text.toPlainText())
        self.message.setText(f"Copied the {self.engine_combo.currentText()} command.")
