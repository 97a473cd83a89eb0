"""A device's memory as a stacked bar: weights, KV, a hybrid model's recurrent state,
compute, reserve against capacity.

The state is always spelled out in text beside the colours (fits / tight / OVER by ...),
so the bar never relies on colour alone.
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen, QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from rigspark_gui.core.placement import DeviceLoad, Verdict
from rigspark_gui.core.units import gib

# Colour-blind-safe (Okabe-Ito) hues; the legend names each one.
SEGMENTS: tuple[tuple[str, QColor], ...] = (
    ("weights", QColor("#0072B2")),
    ("KV cache", QColor("#E69F00")),
    ("recurrent state", QColor("#009E73")),
    ("compute", QColor("#CC79A7")),
    ("projector", QColor("#56B4E9")),
    ("draft model", QColor("#F0E442")),
    ("reserve", QColor("#999999")),
)
OVER_COLOUR = QColor("#D55E00")


def load_text(load: DeviceLoad) -> str:
    used = f"{gib(load.total_bytes)} of {gib(load.capacity_bytes)}"
    if load.verdict is Verdict.OVER:
        return f"⚠ OVER by {gib(load.over_bytes, 2)} — {used}"
    if load.verdict is Verdict.TIGHT:
        return f"Tight (under 5% free) — {used}"
    return f"Fits — {used}"


def load_tooltip(load: DeviceLoad) -> str:
    state = (
        f"recurrent state {gib(load.state_bytes, 2)} (f32 per sequence on the linear-"
        "attention / Mamba / conv layers, whatever the KV cache type)\n"
        if load.state_bytes
        else ""
    )
    text = (
        f"{load.name}\nweights {gib(load.weights_bytes, 2)}\nKV cache {gib(load.kv_bytes, 2)}\n"
        f"{state}compute buffer {gib(load.compute_bytes, 2)}\n"
        f"reserve {gib(load.reserve_bytes, 2)}\n"
        f"total {gib(load.total_bytes, 2)} of {gib(load.capacity_bytes, 2)}"
    )
    if load.projector_bytes:
        text += (
            f"\nprojector {gib(load.projector_bytes, 2)}: the vision/audio projector (mmproj), "
            "weights and compute buffer"
        )
    if load.draft_bytes:
        text += (
            f"\ndraft model {gib(load.draft_bytes, 2)}: its weights, KV cache and compute "
            "buffer (speculative decoding, -md)"
        )
    if load.input_copies > 1:
        text += (
            f"\nThe compute buffer holds {load.input_copies} copies of this device's inputs:"
            "\nllama.cpp's pipeline parallelism across GPUs (dropped if it does not fit)"
        )
    return text


class _Bar(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._load: DeviceLoad | None = None
        self.setMinimumHeight(16)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(160, 18)

    def set_load(self, load: DeviceLoad | None) -> None:
        self._load = load
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        rect = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        p.fillRect(rect, self.palette().base())
        load = self._load
        if load is not None:
            scale = max(load.capacity_bytes, load.total_bytes, 1)
            x = rect.left()
            values = (
                load.weights_bytes,
                load.kv_bytes,
                load.state_bytes,
                load.compute_bytes,
                load.projector_bytes,
                load.draft_bytes,
                load.reserve_bytes,
            )
            for (_, colour), value in zip(SEGMENTS, values, strict=True):
                w = rect.width() * value / scale
                p.fillRect(QRectF(x, rect.top(), w, rect.height()), colour)
                x += w
            if load.verdict is Verdict.OVER:
                # capacity line: what lies right of it does not fit
                cap_x = rect.left() + rect.width() * load.capacity_bytes / scale
                p.setPen(QPen(OVER_COLOUR, 3))
                p.drawLine(int(cap_x), int(rect.top()), int(cap_x), int(rect.bottom()))
        over = load is not None and load.verdict is Verdict.OVER
        p.setPen(QPen(OVER_COLOUR if over else self.palette().mid().color(), 2 if over else 1))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(rect)
        p.end()


class CapacityBar(QWidget):
    """The bar plus one line of text stating the verdict and the figures."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._bar = _Bar(self)
        self._label = QLabel(self)
        self._label.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self._bar)
        lay.addWidget(self._label)
        self._load: DeviceLoad | None = None

    @property
    def text(self) -> str:
        return self._label.text()

    def _keep_lines(self) -> None:
        """The text keeps the height of its wrapped lines: a squeezed lane shortens its
        layer list, never this line (which would then overprint the strip below)."""
        height = self._label.heightForWidth(max(self.width(), 1))
        if height > 0 and self._label.minimumHeight() != height:
            self._label.setMinimumHeight(height)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._keep_lines()

    @property
    def overcommitted(self) -> bool:
        return self._load is not None and self._load.verdict is Verdict.OVER

    def set_load(self, load: DeviceLoad | None) -> None:
        self._load = load
        self._bar.set_load(load)
        text = load_text(load) if load else "no load"
        self._label.setText(text)
        self._keep_lines()
        over = load is not None and load.verdict is Verdict.OVER
        self._label.setStyleSheet(
            f"color: {OVER_COLOUR.name()}; font-weight: bold;" if over else ""
        )
        tip = load_tooltip(load) if load else ""
        self.setToolTip(tip)
        self.setAccessibleName("memory load")
        self.setAccessibleDescription(text)


def segment_legend(parent: QWidget) -> QLabel:
    """The segments' colours and names; it wraps between entries, never inside one, so a
    long legend does not widen the window."""
    label = QLabel(
        " &nbsp;".join(
            f'<span style="color:{c.name()}">■</span>&nbsp;{n.replace(" ", "&nbsp;")}'
            for n, c in SEGMENTS
        ),
        parent,
    )
    label.setToolTip("Each lane's bar stacks these against the device's memory")
    label.setWordWrap(True)
    return label
