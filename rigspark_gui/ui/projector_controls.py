"""The vision/audio projector (mmproj) controls: a "Projector" button beside Text only
that opens a small panel to choose the projector file (read like `--mmproj FILE`) or go
back to the catalog's, the image size its compute buffer is sized for (`--image-size`)
and "Keep projector on CPU" (`--no-mmproj-offload`). They turn clicks into session
calls; the plan is the engine's, as the CLI makes it.

The panel is a popup rather than more widgets on the tabs' row: that row has room for
one more button at 1024 px, not for a spin box and a check box as well."""

from __future__ import annotations

import contextlib
import html
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.core.memory import ProjectorLoad
from rigspark_gui.core.model import ModelSpec, Projector
from rigspark_gui.core.settings import SETTING_RANGES, PlanSettings
from rigspark_gui.core.units import human_bytes
from rigspark_gui.ui import dialogs
from rigspark_gui.ui.popup_panel import PopupPanel, popup_button
from rigspark_gui.ui.session import PlannerSession

# the spin box's largest side: far above any projector's own limit (Qwen-VL's 4096
# tokens of 28 px are 1792 px a side), below the setting's bound
MAX_IMAGE_SIDE = min(16384, int(SETTING_RANGES["image_size"][1]))
DEFAULT_STEP = 64
FILE_FILTER = "Projector (mmproj*.gguf *.gguf);;All files (*)"


def projector_summary(p: Projector, file_bytes: int | None = None) -> str:
    """One line naming a projector: file, size on disk where known, weights, type."""
    name = p.file_name or p.projector_type
    disk = f", file {human_bytes(file_bytes)}" if file_bytes else ""
    return f"{name}{disk} · {human_bytes(p.weights_bytes)} of weights · {p.projector_type}"


def image_size_tip(p: Projector | None, load: ProjectorLoad | None) -> str:
    """What the image size means for this projector and what this plan sized."""
    tip = (
        "The largest image side, in pixels, you will send: the projector's compute "
        "buffer is sized for it (rigspark plan --image-size). warm-up: the square image "
        "clip.cpp reserves when llama-server loads; a larger image grows the buffer when "
        "it is encoded, never shrinks it. 0 goes back to warm-up."
    )
    if p is None:
        return tip + "\nThis model loads no projector."
    warm = p.warmup_image_size or p.image_size
    if p.dynamic:
        tip += (
            f"\nThis projector keeps images up to {p.max_image_size} px a side (larger "
            f"ones are scaled down) and warms up at {warm} px."
        )
    elif p.image_size:
        tip += (
            f"\nThis projector resizes every image to {p.image_size} px, so a larger "
            "size changes nothing."
        )
    if load is not None and load.compute_known:
        tip += (
            f"\nThis plan: {human_bytes(load.compute_bytes)} of compute buffer for "
            f"{load.image_size} × {load.image_size} px on {load.device}."
        )
    return tip


def plan_line(s: PlanSettings, load: ProjectorLoad | None) -> str:
    """What this plan counts for the projector, in one line."""
    if s.text_only:
        return "Text only: left out of this plan."
    if load is None:
        return f"{s.backend.label} is planned without it."
    compute = (
        f" + {human_bytes(load.compute_bytes)} compute at {load.image_size} px"
        if load.compute_known
        else " (its compute buffer is not sized here)"
    )
    return (
        f"This plan: {human_bytes(load.device_bytes)} on {load.device} "
        f"({human_bytes(load.weights_bytes)} weights{compute})"
    )


class ProjectorPanel(PopupPanel):
    """The popup: the file, Choose…/Use the catalog's, the image size, Keep on CPU."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Projector settings", parent)
        self.file_label = QLabel()
        self.file_label.setWordWrap(True)
        self.file_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.file_label.setMinimumWidth(340)
        self.choose_button = QPushButton("&Choose file…")
        self.choose_button.setToolTip(
            "Read a local mmproj GGUF (only its header, as --mmproj FILE) and plan it "
            "beside this model"
        )
        self.catalog_button = QPushButton("Use the c&atalog's projector")
        self.image_size = QSpinBox()
        self.image_size.setRange(0, MAX_IMAGE_SIDE)
        self.image_size.setSpecialValueText("warm-up")
        self.image_size.setSuffix(" px")
        self.image_size.setSingleStep(DEFAULT_STEP)
        self.image_size.setKeyboardTracking(False)  # one plan when typing ends
        self.image_size.setAccessibleName("Image size")
        self.on_cpu = QCheckBox("Keep projector on &CPU")
        self.on_cpu.setToolTip(
            "llama.cpp --no-mmproj-offload: the projector's weights and compute buffer "
            "stay in system memory; unticked, they load on the first GPU llama-server sees"
        )

        buttons = QHBoxLayout()
        buttons.addWidget(self.choose_button)
        buttons.addWidget(self.catalog_button)
        buttons.addStretch(1)
        form = QFormLayout()
        size_label = QLabel("&Image size")
        size_label.setBuddy(self.image_size)
        form.addRow(size_label, self.image_size)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.addWidget(self.file_label)
        layout.addLayout(buttons)
        layout.addLayout(form)
        layout.addWidget(self.on_cpu)
        layout.addWidget(self.note)
        self.focus_widget = self.choose_button


class ProjectorControls(QObject):
    """The Projector button and its panel, wired to the session."""

    message = Signal(str)  # a one-line outcome for the status bar

    def __init__(self, session: PlannerSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._syncing = False
        self._file_bytes: dict[str, int] = {}  # chosen files' sizes on disk, by path
        self.button = popup_button(parent, "Pro&jector ▾", "Projector")
        self.button.clicked.connect(self.open_panel)
        self.panel = ProjectorPanel(self.button)
        self.panel.choose_button.clicked.connect(self.choose_file)
        self.panel.catalog_button.clicked.connect(self.use_catalog)
        self.panel.image_size.valueChanged.connect(self._on_image_size)
        self.panel.on_cpu.toggled.connect(self._on_cpu)
        session.model_changed.connect(lambda _s: self.refresh())
        session.settings_changed.connect(lambda _s: self.refresh())
        session.plan_changed.connect(lambda _p: self.refresh())
        self.refresh()

    # ------------------------------------------------------------ user -> session
    def open_panel(self) -> None:
        self.refresh()
        self.panel.open_below(self.button)

    def choose_file(self) -> None:
        self.panel.hide()  # the file dialog takes the focus
        start = str(self._last_dir())
        path, _ = QFileDialog.getOpenFileName(
            self.button.window(), "Choose a projector (mmproj GGUF)", start, FILE_FILTER
        )
        if path:
            self.attach_file(path)

    def attach_file(self, path: str) -> bool:
        """Read `path` and plan it beside the current model; a file that cannot be read
        or does not fit the model is one message, and the last plan stays."""
        spec = self.session.spec
        if spec is None:
            return False
        # the header reader imports gguf and numpy: not before the window's first paint
        from rigspark_gui.ui.pasted_projector import read_projector_file

        name = Path(path).name
        projector, refused = read_projector_file(path)
        if projector is not None:
            with contextlib.suppress(OSError):  # its size on disk is shown where known
                self._file_bytes[projector.source] = Path(path).stat().st_size
            refused = self.session.set_projector(projector)
        if projector is None or refused:
            text = f"The projector {name} was not loaded: {refused}"
            dialogs.show_error(self.button.window(), "Projector not loaded", text)
            self.message.emit(text)
            return False
        said = f"Planned with the projector {projector.file_name}"
        if self.session.settings.text_only:
            self.session.update_settings(text_only=False)  # as llama-server loads it
            said += " (Text only cleared)"
        self.message.emit(said + ".")
        return True

    def use_catalog(self) -> None:
        self.session.restore_projector()
        p = self.session.spec.projector if self.session.spec is not None else None
        self.message.emit(
            f"Planned with the catalog's projector {p.file_name or p.projector_type}."
            if p is not None
            else "Planned without a projector file."
        )
        self.panel.hide()

    def _on_image_size(self, n: int) -> None:
        if not self._syncing:
            self.session.update_settings(image_size=n or None)

    def _on_cpu(self, on: bool) -> None:
        if not self._syncing:
            self.session.update_settings(mmproj_offload=not on)

    # ------------------------------------------------------------ session -> widgets
    def refresh(self) -> None:
        spec, s = self.session.spec, self.session.settings
        p = spec.projector if spec is not None else None
        plan = self.session.plan
        load = plan.projector if plan is not None else None
        why_off = _why_disabled(spec, s)
        self._syncing = True
        try:
            panel = self.panel
            panel.image_size.setValue(s.image_size or 0)
            panel.on_cpu.setChecked(not s.mmproj_offload)
            for w in (panel.image_size, panel.on_cpu):
                w.setEnabled(not why_off)
            step = p.patch_size * p.n_merge if p is not None and p.patch_size else 0
            panel.image_size.setSingleStep(step or DEFAULT_STEP)
            panel.image_size.setToolTip(image_size_tip(p, load))
            panel.choose_button.setEnabled(spec is not None)
            replaced = self.session.projector_replaced()
            panel.catalog_button.setEnabled(replaced)
            came_with = self.session.catalog_projector()
            panel.catalog_button.setText(
                "Use the c&atalog's projector" if came_with is not None else "&Remove the file"
            )
            panel.catalog_button.setToolTip(
                f"Back to {came_with.file_name or came_with.projector_type}"
                if came_with is not None
                else "Plan this model without the projector file chosen"
            )
            text = self._file_text(spec, replaced)
            if p is not None:
                text += "<br>" + html.escape(plan_line(s, load))
            panel.file_label.setText(text)
            panel.note.setText(why_off)
            panel.note.setVisible(bool(why_off))
            self.button.setToolTip(self._button_tip(spec, s, load, replaced))
        finally:
            self._syncing = False

    def _file_text(self, spec: ModelSpec | None, replaced: bool) -> str:
        if spec is None:
            return "No model"
        p = spec.projector
        if p is None:
            listed = _catalog_files(spec)
            return "No projector: a text-only plan." + (
                f" The catalog names {listed} without its size: choose the file to plan it."
                if listed
                else " Choose an mmproj file to plan images."
            )
        where = "chosen file" if replaced else "the catalog's"
        disk = self._disk_bytes(spec)
        size = f"file {human_bytes(disk)} · " if disk else ""
        return (
            f"<b>{html.escape(p.file_name or p.projector_type)}</b> ({where})<br>"
            f"{size}{human_bytes(p.weights_bytes)} of weights · "
            f"{html.escape(p.projector_type)} {p.modality}"
        )

    def _disk_bytes(self, spec: ModelSpec) -> int | None:
        p = spec.projector
        if p is None:
            return None
        if p.source in self._file_bytes:
            return self._file_bytes[p.source]
        if self.session.projector_replaced():
            return None
        from rigspark_gui.catalog.projectors import catalog_projector

        entry = catalog_projector(spec)
        files = entry.files if entry is not None else ()
        return next((f.file_bytes for f in files if f.file == p.file_name), None)

    def _button_tip(
        self,
        spec: ModelSpec | None,
        s: PlanSettings,
        load: ProjectorLoad | None,
        replaced: bool,
    ) -> str:
        head = "The vision/audio projector (mmproj) llama-server loads beside the model"
        if spec is None or spec.projector is None:
            return head + ": none for this model. Click to choose an mmproj file."
        p = spec.projector
        where = f"chosen file {p.source}" if replaced else "the catalog's"
        lines = [f"{head}:", f"{projector_summary(p, self._disk_bytes(spec))} ({where})"]
        lines.append(plan_line(s, load))
        lines.append("Click for the file, the image size and Keep on CPU.")
        return "\n".join(lines)

    def _last_dir(self) -> Path:
        spec = self.session.spec
        source = spec.projector.source if spec is not None and spec.projector else ""
        folder = Path(source).parent if source and "://" not in source else None
        return folder if folder is not None and folder.is_dir() else Path.home()


def _why_disabled(spec: ModelSpec | None, s: PlanSettings) -> str:
    """Why the image size and Keep on CPU do not apply ('' when they do)."""
    if spec is None or spec.projector is None:
        return "This model loads no projector."
    if s.text_only:
        return "Text only is ticked: the projector is left out."
    if not s.backend.ggml_based:
        return f"{s.backend.label} is planned without the projector."
    return ""


def _catalog_files(spec: ModelSpec) -> str:
    """The projector files the catalog names for a model whose projector size it lacks."""
    from rigspark_gui.catalog.projectors import catalog_projector

    entry = catalog_projector(spec)
    if entry is None or not entry.files:
        return ""
    f = entry.files[0]
    return f"{f.repo}/{f.file}" if f.file else f"a projector in {f.repo}"
