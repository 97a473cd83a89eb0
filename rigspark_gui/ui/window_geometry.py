"""Where the main window opens, and how the rig dock and the tabs share its width.

The window opens at its preferred size or the screen's available area, whichever is
smaller (a remembered geometry is clamped to that area too), so no part of it starts
off-screen. The rig dock is given room for its device columns (bandwidth included) up
to a share of the window; whatever the window gains beyond that goes to the tabs, and
the dock never narrows because the window grew.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, QSize, Qt, QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTreeWidget, QWidget

PREFERRED = QSize(1400, 860)
MINIMUM = QSize(1024, 700)  # the smallest screen the window is made for
DOCK_MIN_PX = 260
DOCK_SHARE = 0.34  # the most of the window's width the rig dock takes
FRAME_GUESS = QSize(8, 32)  # a title bar and borders, before the window manager says
THROUGH_COLUMN = "Bandwidth"  # the rig's device list shows up to this column
DOCK_MARGIN_PX = 12  # the dock's frame and its content's border


def dock_width(window_px: int, wanted_px: int) -> int:
    """The rig dock's width in a window `window_px` wide when its content wants
    `wanted_px`: all of it up to DOCK_SHARE of the window, never under DOCK_MIN_PX."""
    return max(DOCK_MIN_PX, min(wanted_px, int(window_px * DOCK_SHARE)))


def _frame(window: QWidget) -> QSize:
    """The window manager's frame around the window: measured once it is shown, else a
    guess (none on platforms without decorations, such as offscreen)."""
    extra = window.frameGeometry().size() - window.geometry().size()
    if extra.width() > 0 or extra.height() > 0:
        return extra
    if QGuiApplication.platformName() == "minimal":
        return QSize(0, 0)
    return FRAME_GUESS


def available_area(window: QWidget) -> QRect:
    """The screen's area less task bars and docks: where the window may go."""
    screen = window.screen()
    return screen.availableGeometry() if screen is not None else QRect(QPoint(0, 0), PREFERRED)


def fit_to_screen(window: QWidget, area: QRect | None = None) -> None:
    """Open at PREFERRED or the screen's available area, whichever is smaller, inside
    that area; the minimum size is never larger than the area either. Once shown (the
    window manager's frame known) the window is clamped again."""
    area = area if area is not None else available_area(window)
    frame = _frame(window)
    room = QSize(area.width() - frame.width(), area.height() - frame.height())
    window.setMinimumSize(MINIMUM.boundedTo(room))
    size = PREFERRED.boundedTo(room)
    window.resize(size)
    x = area.x() + max(0, (room.width() - size.width()) // 2)
    y = area.y() + max(0, (room.height() - size.height()) // 2)
    window.move(x, y)
    _ClampOnShow(window, size)


def clamp_to_screen(window: QWidget, area: QRect | None = None) -> None:
    """Bring a remembered geometry back inside the available area: shrink it to fit,
    then move it in."""
    area = area if area is not None else available_area(window)
    frame = _frame(window)
    room = QSize(area.width() - frame.width(), area.height() - frame.height())
    window.setMinimumSize(MINIMUM.boundedTo(room))
    size = window.size().boundedTo(room)
    if size != window.size():
        window.resize(size)
    at = window.frameGeometry().topLeft()  # where move() puts it: the frame's corner
    x = min(max(at.x(), area.x()), area.x() + room.width() - size.width())
    y = min(max(at.y(), area.y()), area.y() + room.height() - size.height())
    if (x, y) != (at.x(), at.y()):
        window.move(x, y)


class _ClampOnShow(QObject):
    """Clamps its window to the screen when it is first shown, the frame known then,
    unless it was given another size before (a remembered or a chosen one)."""

    def __init__(self, window: QWidget, size: QSize) -> None:
        super().__init__(window)
        self._window = window
        self._size = size
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._window and event.type() == QEvent.Type.Show:
            self._window.removeEventFilter(self)
            QTimer.singleShot(0, self, self._clamp)
        return False

    def _clamp(self) -> None:
        if self._window.size() == self._size:
            clamp_to_screen(self._window)


class DockShare(QObject):
    """Keeps the rig dock wide enough for its columns as the window is resized: when the
    window's width changes, the dock goes to `dock_width` of it unless the user made it
    wider still (and it fits); the rest is the tabs'."""

    def __init__(self, window: QMainWindow, dock: QDockWidget) -> None:
        super().__init__(window)
        self._window = window
        self._dock = dock
        self._width = -1
        self._pending = False
        window.installEventFilter(self)
        tree = getattr(dock.widget(), "device_tree", None)
        if isinstance(tree, QTreeWidget):  # new rows, new column widths
            tree.header().sectionResized.connect(lambda *_: self._later())

    def _later(self) -> None:
        if not self._pending:
            self._pending = True
            QTimer.singleShot(0, self, self.apply)

    def wanted(self) -> int:
        """The dock's width that shows its device list through the Bandwidth column
        (further columns scroll), else its content's own size hint."""
        content = self._dock.widget()
        if content is None:
            return DOCK_MIN_PX
        tree = getattr(content, "device_tree", None)
        if not isinstance(tree, QTreeWidget):
            return content.sizeHint().width() + DOCK_MARGIN_PX
        header = tree.header()
        titles = [tree.headerItem().text(c) for c in range(header.count())]
        upto = titles.index(THROUGH_COLUMN) + 1 if THROUGH_COLUMN in titles else len(titles)
        columns = sum(header.sectionSize(c) for c in range(upto))
        frame = 2 * tree.frameWidth() + tree.verticalScrollBar().sizeHint().width()
        layout = content.layout()
        m = layout.contentsMargins() if layout is not None else None
        margins = m.left() + m.right() if m is not None else 0
        return columns + frame + margins + DOCK_MARGIN_PX

    def apply(self) -> None:
        self._pending = False
        w = self._window.width()
        self._width = w
        target = dock_width(w, self.wanted())
        current = self._dock.width()
        if current > target and current <= int(w * DOCK_SHARE):
            return  # widened by hand, and still in proportion
        if current != target:
            self._window.resizeDocks([self._dock], [target], Qt.Orientation.Horizontal)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        resized = watched is self._window and event.type() == QEvent.Type.Resize
        if resized and self._window.width() != self._width:
            self._later()  # after the layout has taken the new size
        return False
