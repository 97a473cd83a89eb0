"""How llama-server loads the weights the CPU holds: a "Weights ▾" button on the tabs'
row opens a small panel with Weights: Auto / Memory-mapped / Read in (--load-mode none)
and Don't repack (--no-repack), wired to PlanSettings.mmap and .repack (the CLI's
--mmap / --no-mmap and --no-repack).

llama.cpp's CPU backend copies some weight types into a repacked buffer; with the file
memory-mapped (its default) their mapped pages stay resident beside the copy, so read in
they are held once, and with --no-repack only the mapped file stays (slower CPU kernels).
The figures shown are the planner's: the path's CpuLoading (as planned, and with the
file mapped) and, once the panel is open, the same path planned with each other choice.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.launch import cpu_repacks
from rigspark_gui.core.memory import (
    ENGINE_LOADING,
    LOAD_FLAG_BACKENDS,
    MMAP_CHOICE_BACKENDS,
    NO_MMAP_FLAG,
    NO_REPACK_FLAG,
    repack_types,
)
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.plan import PathPlan, Plan, plan
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.units import gib
from rigspark_gui.report.text import path_label
from rigspark_gui.ui.popup_panel import PopupPanel, popup_button
from rigspark_gui.ui.session import PlannerSession

# the Weights choices: their words and PlanSettings.mmap
MODES: tuple[tuple[str, bool | None], ...] = (
    ("Auto", None),
    ("Memory-mapped", True),
    (f"Read in ({NO_MMAP_FLAG})", False),
)
MODE_TIPS = {
    None: "Read the weights in where llama.cpp repacks some the CPU holds, else map the file",
    True: "llama.cpp's default: the file is mapped, and the repacked weights' pages stay "
    "resident beside their copy",
    False: f"llama-server {NO_MMAP_FLAG} (--no-mmap before b11434): the weights are read "
    "into memory, the repacked ones held once, at the same speed",
}
NO_REPACK_TIP = (
    f"llama-server {NO_REPACK_FLAG}: no repacked copy; the file stays mapped and the CPU "
    "runs slower kernels"
)
# the loadings whose figures the panel compares, with the settings that plan each
MAPPED = "Memory-mapped (llama.cpp's default)"
READ_IN = f"Read in ({NO_MMAP_FLAG})"
NO_REPACK = f"Don't repack ({NO_REPACK_FLAG}, slower)"
OPTIONS: dict[str, dict[str, bool | None]] = {
    MAPPED: {"mmap": True, "repack": True},
    READ_IN: {"mmap": False, "repack": True},
    NO_REPACK: {"mmap": None, "repack": False},
}


def loading_path(p: Plan | None, spec: ModelSpec | None, rig: Rig | None) -> PathPlan | None:
    """The path whose CPU holds weights llama.cpp repacks: the recommended one when it
    does, else the first that does; a path that does not fit has no CpuLoading, so the
    plan's own placement (its shown path's) answers for it. None: no CPU holds any."""
    if p is None:
        return None
    held = [x for x in p.paths if x.cpu_loading is not None]
    if held:
        return next((x for x in held if x.path is p.recommended), held[0])
    shown = next((x for x in p.paths if x.path is p.recommended), p.paths[0] if p.paths else None)
    if shown is None or shown.quant is None or p.placement is None or spec is None or rig is None:
        return None
    return shown if cpu_repacks(p.placement, spec, shown.quant, rig) else None


def why_disabled(s: PlanSettings, p: Plan | None, path: PathPlan | None, rig: Rig | None) -> str:
    """Why the choices change nothing for this plan ('' when they do)."""
    if s.backend not in LOAD_FLAG_BACKENDS:
        return (
            f"{s.backend.label}'s launch command cannot carry llama.cpp's loading flags: "
            f"by itself it {ENGINE_LOADING.get(s.backend, 'loads its own way')}, and it "
            "always repacks; a mapped or read-in choice kept from llama-server still holds."
        )
    if p is None:
        return "No plan yet."
    if path is None:
        types = ", ".join(sorted(repack_types(rig.cpu.features if rig is not None else ())))
        which = f" ({types} on this CPU)" if types else " (none on this CPU, as far as known)"
        return (
            f"Nothing this plan puts on the CPU is of a type llama.cpp repacks{which}: "
            "mapped or read in, the weights need the same memory."
        )
    return ""


def current_option(s: PlanSettings, path: PathPlan) -> str:
    """Which of OPTIONS this plan loads with ('' for read in and not repacked at once)."""
    if not s.repack:
        return "" if s.mmap is False else NO_REPACK
    load = path.cpu_loading
    reads_in = s.mmap is False or (s.mmap is None and load is not None and bool(load.flag))
    return READ_IN if reads_in else MAPPED


def figures_text(path: PathPlan, s: PlanSettings, others: dict[str, int]) -> str:
    """The path's resident memory as planned and with the other choices: the mapped
    figure from its CpuLoading, the rest where they were planned (`others`)."""
    load = path.cpu_loading
    head = f"{path_label(path)} path at {path.quant}"
    if load is not None:
        head += f": llama.cpp repacks {gib(load.repacked_bytes)} of weights for the CPU"
    fits = "" if path.fits else ", does not fit"
    current = current_option(s, path)
    # the choice in short (its flag is in the Weights box), so the line stays narrow
    words = current.split(" (")[0] if current else f"Read in, {NO_REPACK_FLAG}"
    lines = [
        f"{head}.",
        f"As planned ({words}): {gib(path.required_bytes)} of {gib(path.usable_bytes)} "
        f"usable{fits}",
    ]
    figures = dict(others)
    if load is not None and current != MAPPED:
        figures.setdefault(MAPPED, load.mapped_required_bytes)
    lines += [f"{label}: {gib(figures[label])}" for label in OPTIONS if label in figures]
    return "\n".join(lines)


class LoadingPanel(PopupPanel):
    """The popup: the Weights choice, Don't repack, the figures and why it is off."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("How the weights load", parent)
        self.mode = QComboBox()
        for i, (text, value) in enumerate(MODES):
            self.mode.addItem(text, value)
            self.mode.setItemData(i, MODE_TIPS[value], Qt.ItemDataRole.ToolTipRole)
        self.mode.setAccessibleName("Weights")
        self.no_repack = QCheckBox(f"Don't &repack ({NO_REPACK_FLAG})")
        self.figures = QLabel()
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.figures.setMinimumWidth(340)
        form = QFormLayout()
        label = QLabel("&Weights")
        label.setBuddy(self.mode)
        form.addRow(label, self.mode)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 8, 10, 8)
        layout.addLayout(form)
        layout.addWidget(self.no_repack)
        layout.addWidget(self.figures)
        layout.addWidget(self.note)
        self.focus_widget = self.mode


class LoadingControls(QObject):
    """The Weights button and its panel, wired to the session."""

    message = Signal(str)  # a one-line outcome for the status bar

    def __init__(self, session: PlannerSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._syncing = False
        self.button = popup_button(parent, "&Weights ▾", "How the weights load")
        self.button.clicked.connect(self.open_panel)
        self.panel = LoadingPanel(self.button)
        self.panel.mode.currentIndexChanged.connect(self._on_mode)
        self.panel.no_repack.toggled.connect(self._on_no_repack)
        session.settings_changed.connect(lambda _s: self.refresh())
        session.plan_changed.connect(lambda _p: self.refresh())
        self.refresh()

    # ------------------------------------------------------------ user -> session
    def open_panel(self) -> None:
        self.refresh(others=True)
        self.panel.open_below(self.button)

    def _on_mode(self, i: int) -> None:
        if self._syncing:
            return
        text, value = MODES[i]
        if self.session.update_settings(mmap=value):
            self.message.emit(f"Weights: {text}.")

    def _on_no_repack(self, on: bool) -> None:
        if self._syncing:
            return
        if self.session.update_settings(repack=not on):
            self.message.emit(
                f"Planned with {NO_REPACK_FLAG}." if on else "Planned with repacked weights."
            )

    # ------------------------------------------------------------ session -> widgets
    def refresh(self, *, others: bool = False) -> None:
        """Mirror the settings and the plan; `others` (or the panel open) plans the
        path with the other choices too, for their figures."""
        s, p = self.session.settings, self.session.plan
        rig = self.session.rig
        path = loading_path(p, self.session.spec, rig)
        why = why_disabled(s, p, path, rig)
        panel = self.panel
        self._syncing = True
        try:
            panel.mode.setCurrentIndex(next(i for i, m in enumerate(MODES) if m[1] is s.mmap))
            panel.no_repack.setChecked(not s.repack)
            # a choice away from the default stays changeable, so it can be undone
            pinned = s.mmap is not None or not s.repack
            on = not why or (pinned and s.backend in MMAP_CHOICE_BACKENDS)
            panel.mode.setEnabled(on)
            panel.no_repack.setEnabled(on)
            figures = ""
            if path is not None and not why:
                wanted = others or panel.isVisible()
                figures = figures_text(path, s, self._others(path) if wanted else {})
            panel.figures.setText(figures)
            panel.figures.setVisible(bool(figures))
            panel.note.setText(why)
            panel.note.setVisible(bool(why))
            tip = figures or why
            panel.mode.setToolTip(f"How llama-server loads the weights the CPU holds.\n{tip}")
            panel.no_repack.setToolTip(f"{NO_REPACK_TIP}.\n{tip}")
            self.button.setToolTip(self._button_tip(s, path, why))
        finally:
            self._syncing = False

    def _button_tip(self, s: PlanSettings, path: PathPlan | None, why: str) -> str:
        mode = next(text for text, value in MODES if value is s.mmap)
        head = f"How llama-server loads the weights: {mode}" + (
            f", {NO_REPACK_FLAG}" if not s.repack else ""
        )
        body = why
        if path is not None and not why:
            note = f"{path.cpu_loading.note}.\n" if path.cpu_loading is not None else ""
            body = note + figures_text(path, s, {})
        return f"{head}.\n{body}\nClick to choose (Alt+W)."

    def _others(self, path: PathPlan) -> dict[str, int]:
        """The path's required memory planned with each other loading, at the same
        quantization (the mapped figure its CpuLoading already gives is not planned)."""
        s, spec, rig = self.session.settings, self.session.spec, self.session.rig
        if spec is None or rig is None:
            return {}
        current = current_option(s, path)
        out: dict[str, int] = {}
        for label, changes in OPTIONS.items():
            if label == current or (label == MAPPED and path.cpu_loading is not None):
                continue
            try:
                other = plan(
                    spec,
                    rig,
                    replace(s, quant=path.quant, **changes),  # type: ignore[arg-type]
                    self.session.perf,
                    ladders=False,
                )
            except RigSparkError:
                continue
            same = next((x for x in other.paths if x.path is path.path), None)
            if same is not None:
                out[label] = same.required_bytes
        return out
