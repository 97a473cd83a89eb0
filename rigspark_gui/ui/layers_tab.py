"""The Layers tab: a lane per device, layers dragged between lanes, live loads and speed.

Presentation only: loads come from `device_loads`, the summary, strips and launch
command from `layers_readout`, whole placements from the placement strategies; edits go
through the `PlacementDocument`. Lanes are `device_lane.DeviceLane`s, the toolbar and its
actions come from `layers_toolbar`.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace

from PySide6.QtCore import QPoint, Qt, Signal, Slot
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListView,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.fit import UserFlags, llama_fit
from rigspark_gui.core.launch import (
    Engine,
    LaunchCommand,
    apply_llama_args,
    parse_llama_args,
    placement_gpus,
    split_projector_flags,
)
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
    even_split,
    fill_fastest_first,
    rig_devices,
    uniform_placement,
    with_cpu_moe,
)
from rigspark_gui.core.plan import auto_placement
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.capacity_bar import segment_legend
from rigspark_gui.ui.device_lane import DeviceLane, device_name, host_groups, host_title
from rigspark_gui.ui.lane_loads import lane_loads
from rigspark_gui.ui.lane_model import LaneModel, device_label
from rigspark_gui.ui.layers_readout import placement_launch, placement_summary, strip_blocks
from rigspark_gui.ui.layers_toolbar import LayersToolbar, tab_action, undo_redo_actions
from rigspark_gui.ui.placement_document import PlacementDocument


class LayersTab(QWidget):
    projector_flags = Signal(object)  # a pasted command's projector flags (a dict)

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
        self._lanes: dict[str, DeviceLane] = {}
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
        legend = segment_legend(self)
        self._lanes_box = QHBoxLayout()
        self._lanes_box.setSpacing(8)

        self.engine_combo = QComboBox(self)
        for e in Engine:
            self.engine_combo.addItem(e.label, e.value)
        self.engine_combo.setAccessibleName("launch engine")
        from rigspark_gui.ui.content_fit import FittedTextEdit

        # as tall as the whole recipe (a scroll bar past 14 lines, or in a short window)
        self.command_text = FittedTextEdit(self, max_lines=14)
        self.command_text.setReadOnly(True)
        self.command_text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
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
        gpus = placement_gpus(start, rig) if start is not None else rig.gpus  # Ollama's loading
        self._repack = repack_for(spec, quant, rig.cpu.features, settings, gpus)
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

    def lane(self, device: str) -> DeviceLane:
        return self._lanes[device]

    def lane_model(self, device: str) -> LaneModel:
        return self._lanes[device].model

    def move_action(self, device: str) -> QAction:
        return self._move_actions[device]

    def selected_units(self) -> list[str]:
        return [u for lane in self._lanes.values() for u in lane.selected_units()]

    # ------------------------------------------------------------------ building

    def _build_actions(self) -> None:
        self.auto_action = tab_action(
            self,
            "Auto-place",
            "llama.cpp's rule: split by free memory, as many layers offloaded as fit (-ngl)",
            self._on_auto_action_triggered,
        )
        self.fastest_action = tab_action(
            self,
            "Fastest first",
            "Fill the fastest GPU first: as many layers as fit on the highest-bandwidth GPU, "
            "then the next, the rest on the CPU",
            self._on_fastest_action_triggered,
        )
        self.even_action = tab_action(
            self,
            "Even split",
            "Every layer on a GPU, the same count on each",
            self._on_even_triggered,
        )
        self.cpu_action = tab_action(
            self, "All on CPU", "Run the whole model on the CPU", self._on_cpu_action_triggered
        )
        self.undo_action, self.redo_action = undo_redo_actions(self, self._document.undo_stack)
        self.experts_cpu_action = tab_action(
            self,
            "Experts of selection to CPU",
            "Keep attention on the GPU, run the routed experts of the selected layers on the CPU",
            self._on_experts_cpu_triggered,
        )
        self.experts_back_action = tab_action(
            self,
            "Experts back with layers",
            "Put the experts of the selected layers back on their layer's device",
            self._on_experts_back_triggered,
        )
        self.first_n_action = tab_action(
            self,
            "First N layers' experts to CPU",
            "Like llama.cpp's --n-cpu-moe N",
            self._on_first_n_triggered,
        )
        self.paste_action = tab_action(
            self,
            "Paste a command line…",
            "The placement a llama-server / llama-cli command line makes (-ngl, "
            "--tensor-split, -ot, --cpu-moe, --n-cpu-moe)",
            self._on_paste_triggered,
        )
        self.fit_action = tab_action(
            self,
            "As llama.cpp's fit places it",
            "What llama-server -m FILE does by itself: --fit's -ngl, --tensor-split and "
            "expert overrides for this plan's settings",
            self._on_fit_triggered,
        )
        self.move_menu = QMenu("Move selection to", self)

    def _build_toolbar(self) -> LayersToolbar:
        tb = LayersToolbar(
            self,
            strategies=(self.auto_action, self.fastest_action, self.even_action, self.cpu_action),
            undo=self.undo_action,
            redo=self.redo_action,
            move_menu=self.move_menu,
            experts_actions=(self.experts_cpu_action, self.experts_back_action),
            first_n_action=self.first_n_action,
            command_actions=(self.paste_action, self.fit_action),
        )
        self.first_n_spin = tb.first_n_spin
        self.experts_button = tb.experts_button
        self.experts_menu = tb.experts_menu
        self._moe_widgets = tb.moe_widgets
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
        groups = host_groups(ordered, self._rig)
        for host, members in groups:
            target = self._lanes_box
            if len(groups) > 1:
                # a rig of several machines: each host's lanes under its name
                box = QGroupBox(host_title(host, self._rig), self)
                target = QHBoxLayout(box)
                target.setContentsMargins(4, 4, 4, 4)
                self._lanes_box.addWidget(box, len(members))
                self._host_boxes.append(box)
            for d in members:
                model = LaneModel(self._document, d, self)
                model.drop_refused.connect(self._on_lane_drop_refused)
                lane = DeviceLane(model, "", self)
                lane.view.customContextMenuRequested.connect(self._on_view_context_menu)
                target.addWidget(lane, 1)
                self._lanes[d] = lane
        for i, d in enumerate(ordered):
            action = tab_action(
                self,
                f"{device_label(d)}",
                f"Move the selected layers to {device_label(d)}",
                lambda _=False, dev=d: self._move_selection(dev),
            )
            action.setShortcut(QKeySequence(f"Alt+{i + 1}"))
            self.move_menu.addAction(action)
            self._move_actions[d] = action
        self._retitle_lanes()

    def _retitle_lanes(self) -> None:
        if self._rig is None:
            return
        for d, lane in self._lanes.items():
            name = device_name(d, self._rig)
            lane.header.setText(f"{device_label(d)} — {name}")
            self._move_actions[d].setText(f"{device_label(d)} ({name})")

    # ------------------------------------------------------------------ strategies

    def _auto_placement(self) -> Placement | None:
        if self._spec is None or self._rig is None or self._settings is None:
            return None
        assert self._layout is not None
        # llama.cpp's -ngl rule, or for an MoE model the experts of the first layers in
        # system memory (--n-cpu-moe) when that decodes faster, as the plan chooses
        return auto_placement(
            self._spec.geometry, self._layout, self._rig, self._settings, self._perf,
            self._kv_layers,
        )  # fmt: skip

    def _replace(self, placement: Placement | None, text: str) -> None:
        if placement is not None:
            self._document.replace(placement, text)

    def apply_command(self, text: str) -> bool:
        """Show the placement a pasted llama.cpp command line makes; False (and why, in
        the message line) when it cannot be read."""
        if self._spec is None or self._rig is None or self._settings is None:
            return False
        try:
            argv, beside = split_projector_flags(shlex.split(text.replace("\\\n", " ")))
            ngl, split, overrides = parse_llama_args(argv)
            placement = apply_llama_args(
                self._spec.geometry, self._rig, self._settings, ngl, split, overrides
            )
        except (RigSparkError, ValueError) as err:
            self.message.setText(f"That command line cannot be placed: {err}")
            return False
        self._replace(placement, "Paste a llama.cpp command")
        self.message.setText("The placement of the pasted command line.")
        self.projector_flags.emit(beside)  # --no-mmproj, --mmproj FILE: the plan's own
        return True

    @Slot()
    def _on_paste_triggered(self) -> None:
        text = dialogs.ask_text(self, "Paste a llama.cpp command", "llama-server … command line:")
        if text:
            self.apply_command(text)

    @Slot()
    def _on_fit_triggered(self) -> None:
        """llama.cpp's fit for this plan, as a placement (its command's -ngl/-ts/-ot)."""
        if self._spec is None or self._rig is None or self._settings is None:
            return
        s = self._settings
        user = UserFlags(context=None if s.is_auto("context") else s.context)
        fit = llama_fit(self._spec, self._quant or "", self._rig, s, user=user)
        if not fit.command:
            self.message.setText(f"llama.cpp's fit gives up: {fit.reason}")
            return
        self.apply_command(f"llama-server {fit.command}")
        self.message.setText(f"As llama.cpp's fit places it: {fit.command}")

    @Slot()
    def _on_auto_action_triggered(self) -> None:
        self._replace(self._auto_placement(), "Auto-place")

    @Slot()
    def _on_fastest_action_triggered(self) -> None:
        if self._spec and self._rig and self._settings and self._layout:
            p = fill_fastest_first(
                self._spec.geometry, self._layout, self._rig, self._settings, self._kv_layers
            )
            self._replace(p, "Fastest first")

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
        current = self._document.placement
        if current is None:
            return
        # exactly llama.cpp's --n-cpu-moe N: the experts of layers 0..N-1 off the CPU in
        # system memory, every other layer's with its layer
        n = self.first_n_spin.value()
        after = with_cpu_moe(current, self._spec.geometry, n)
        self._replace(after, f"Experts of the first {n} layers to CPU (--n-cpu-moe {n})")

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
        self._loads = lane_loads(
            p, self._spec, self._layout, self._rig, self._settings, self._kv_layers, self._repack
        )
        by_device = {x.device: x for x in self._loads}
        strips = strip_blocks(p, self._layout, self._kv_layers)
        for d, lane in self._lanes.items():
            lane.model.refresh(p, self._layout)
            lane.bar.set_load(by_device.get(d))
            load = by_device.get(d)
            lane.strip.set_blocks(strips.get(d, []), load.capacity_bytes if load else 0)
        assert self._perf is not None
        text, tip = placement_summary(
            p, self._spec, self._layout, self._rig, self._settings, self._perf, self._loads
        )
        self.summary.setToolTip(tip)
        self.summary.setText(text)
        self._show_command()
        self._update_enabled()

    def _current_command(self) -> LaunchCommand | None:
        p = self._document.placement
        if p is None or self._spec is None or self._rig is None or self._settings is None:
            return None
        engine = Engine(self.engine_combo.currentData())
        return placement_launch(
            engine, p, self._spec, self._quant, self._settings, self._rig, self._loads
        )

    def _show_command(self) -> None:
        cmd = self._current_command()
        said = self.message.text()  # "Copied the … command." names what is shown, or goes
        shown = (self.engine_combo.currentText(), self.command_text.toPlainText())
        if said.startswith("Copied the ") and (
            said != f"Copied the {shown[0]} command." or cmd is None or cmd.text != shown[1]
        ):
            self.message.clear()
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
