"""The Layers tab's lanes: one device's lane (header, capacity bar, layer strip and the
list of its units), and how lanes are grouped by host and titled on a rig of several
machines. The lane only shows its `LaneModel`; edits go through the document."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QFrame, QLabel, QListView, QVBoxLayout, QWidget

from rigspark_gui.core.placement import CPU
from rigspark_gui.core.rig import Rig, rpc_cpu_host
from rigspark_gui.ui.capacity_bar import CapacityBar
from rigspark_gui.ui.lane_model import UNIT_ROLE, LaneModel
from rigspark_gui.ui.layer_strip import LayerStrip


class DeviceLane(QFrame):
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


def host_groups(ordered: Sequence[str], rig: Rig | None) -> list[tuple[str, list[str]]]:
    """Runs of lanes on one host ('' = this machine), in the order given."""
    groups: list[tuple[str, list[str]]] = []
    for d in ordered:
        host = "" if d == CPU or rig is None else lane_host(d, rig)
        if not groups or groups[-1][0] != host:
            groups.append((host, []))
        groups[-1][1].append(d)
    return groups


def lane_host(device: str, rig: Rig) -> str:
    """The host of a lane's device: a GPU's, another host's CPU (`rpc-cpu:HOST`)'s."""
    cpu_host = rpc_cpu_host(device)
    if cpu_host is not None:
        return cpu_host
    return "" if device == CPU else rig.gpus[int(device.split(":")[1])].host


def host_title(host: str, rig: Rig | None) -> str:
    """The title of a host's group of lanes: what runs there and how it is reached."""
    if not host or rig is None:
        return "This machine (llama-server)"
    h = next((x for x in rig.hosts if x.name == host), None)
    where = f" ({h.address})" if h is not None and h.address else ""
    return f"{host}{where}: rpc-server over {rig.link.label}"


def device_name(device: str, rig: Rig) -> str:
    """The rig's name for a lane's device (a GPU of another host says which one there)."""
    if device == CPU:
        return rig.cpu.name
    cpu_host = rpc_cpu_host(device)
    if cpu_host is not None:
        h = rig.host(cpu_host)
        return f"{h.cpu.name if h is not None else 'CPU'} (CPU of {cpu_host})"
    gpu = rig.gpus[int(device.split(":")[1])]
    # another host numbers its GPUs from 0: say which one it is there
    return f"{gpu.name} (GPU {gpu.index} on {gpu.host})" if gpu.host else gpu.name
