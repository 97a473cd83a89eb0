"""The window as a newcomer finds it, driven like they drive it: it opens inside a small
screen, its panels share the width, the Paths table, the ladder, the Catalog and the
launch box show their whole text; the KV tab offers what the engine runs, compares the
paths at one quantization and draws no label over another."""

from __future__ import annotations

import itertools
import math

import pytest
from PySide6.QtCore import QPointF, QRect, QSettings
from PySide6.QtWidgets import QApplication

from rigspark_gui.core.model import KvCacheType
from rigspark_gui.core.plan import plan
from rigspark_gui.core.settings import Backend
from rigspark_gui.ui.main_window import MainWindow
from tests.ui.conftest import rig_2x3090

SMALL_SCREEN = QRect(0, 0, 1024, 700)


class _Screen:
    """A screen with the given available area (task bars already taken off)."""

    def __init__(self, area: QRect) -> None:
        self.area = area

    def availableGeometry(self) -> QRect:
        return QRect(self.area)


@pytest.fixture
def sync(monkeypatch):
    from rigspark_gui.ui import background

    monkeypatch.setattr(background, "POOL", background.SyncPool())


def _window(qtbot, tmp_path, size: tuple[int, int] | None = None) -> MainWindow:
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    w = MainWindow(rig=rig_2x3090(), detect_on_start=False, settings=settings)
    qtbot.addWidget(w)
    if size is not None:
        w.resize(*size)
    w.show()
    qtbot.waitExposed(w)
    return w


def _settle(qtbot, w: MainWindow) -> None:
    for _ in range(3):
        qtbot.wait(20)
        QApplication.processEvents()


def _llama_70b_at_32k(qtbot, w: MainWindow) -> None:
    w.session.set_model("llama-3.3-70b-instruct")
    w.session.update_settings(context=32768)
    w.what_if.suggest_now()  # the ladders, as the window fills them in
    _settle(qtbot, w)


# ---------------------------------------------------------------- the window's size


def test_the_window_opens_inside_a_small_screen(qtbot, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(MainWindow, "screen", lambda self: _Screen(SMALL_SCREEN))
    w = _window(qtbot, tmp_path)
    qtbot.wait(20)  # clamped again once shown, its frame known
    assert SMALL_SCREEN.contains(w.frameGeometry()), w.frameGeometry()
    assert w.minimumWidth() <= 1024 and w.minimumHeight() <= 700


def test_a_remembered_geometry_is_clamped_to_the_screen(qtbot, tmp_path, monkeypatch) -> None:
    big = _window(qtbot, tmp_path, (1400, 860))
    big.move(300, 200)
    big.close()  # saves its geometry
    monkeypatch.setattr(MainWindow, "screen", lambda self: _Screen(SMALL_SCREEN))
    again = _window(qtbot, tmp_path)
    qtbot.wait(20)
    assert SMALL_SCREEN.contains(again.frameGeometry()), again.frameGeometry()


def _bandwidth_shown(w: MainWindow) -> bool:
    tree = w.rig_panel.device_tree
    titles = [tree.headerItem().text(c) for c in range(tree.columnCount())]
    column = titles.index("Bandwidth")
    header = tree.header()
    right = header.sectionViewportPosition(column) + header.sectionSize(column)
    return header.sectionViewportPosition(column) >= 0 and right <= tree.viewport().width()


def test_the_rig_dock_keeps_its_columns_and_the_tabs_take_the_growth(qtbot, tmp_path, sync) -> None:
    w = _window(qtbot, tmp_path, (1400, 860))
    _llama_70b_at_32k(qtbot, w)
    widths = {}
    for width in (1400, 1600, 1920):
        w.resize(width, 900)
        _settle(qtbot, w)
        assert _bandwidth_shown(w), width
        widths[width] = (w.rig_dock.width(), w.tabs.width())
    docks = [d for d, _ in widths.values()]
    assert docks == sorted(docks)  # the dock never narrows as the window grows
    grown = widths[1920][1] - widths[1400][1]
    assert grown >= 0.8 * (1920 - 1400)  # most of the new width is the tabs'


# ---------------------------------------------------------------- the Paths tab


@pytest.mark.parametrize("width", [1024, 1400, 1600])
def test_the_paths_table_fits_without_sideways_scrolling(qtbot, tmp_path, sync, width) -> None:
    w = _window(qtbot, tmp_path, (width, 700))
    _llama_70b_at_32k(qtbot, w)
    table = w.paths_tab.table
    header = table.horizontalHeader()
    columns = sum(header.sectionSize(c) for c in range(header.count()))
    assert columns <= table.viewport().width() + 1
    assert table.horizontalScrollBar().maximum() == 0
    assert table.verticalScrollBar().maximum() == 0  # every path's row in view
    metrics = table.fontMetrics()
    for r, c in itertools.product(range(table.rowCount()), range(header.count())):
        item = table.item(r, c)
        words = item.text().split()
        # no word is cut ("★ recomme…"), and the row is tall enough for its lines
        assert all(metrics.horizontalAdvance(x) < header.sectionSize(c) for x in words)
        assert table.rowHeight(r) >= table.sizeHintForRow(r)
    reason = table.item(0, 7)
    assert reason.text() and reason.text() in reason.toolTip()
    recommended = next(r for r in range(table.rowCount()) if "★" in table.item(r, 1).text())
    assert "recommended" in table.item(recommended, 1).text()


def test_the_ladder_is_chips_at_the_normal_font_size(qtbot, tmp_path, sync) -> None:
    w = _window(qtbot, tmp_path, (1024, 700))
    _llama_70b_at_32k(qtbot, w)
    tab = w.paths_tab
    s = w.session
    full = plan(s.spec, s.rig, s.settings, s.perf)  # with the ladders, as the tab shows
    rec = next(p for p in full.paths if p.path is full.recommended)
    assert len(rec.ladder) > 1
    ladder = tab.ladder
    assert ladder.isVisible() and "Fits on this path" in ladder.text()
    assert "<small>" not in ladder.text() and "Fits on this path" not in tab.summary.text()
    assert all(o.quant in ladder.text() for o in rec.ladder)
    assert ladder.label.font().pointSizeF() == QApplication.font().pointSizeF()
    assert ladder.label.height() >= ladder.heightForWidth(ladder.width())  # no line cut


# ---------------------------------------------------------------- Catalog and Layers


def test_the_catalog_decode_column_does_not_wrap(qtbot, tmp_path, sync) -> None:
    w = _window(qtbot, tmp_path, (1024, 700))
    w.session.set_model("llama-3.3-70b-instruct")
    w.tabs.setCurrentWidget(w.catalog_tab)
    _settle(qtbot, w)
    view = w.catalog_tab.view
    assert w.catalog_tab.model.rowCount() > 100
    assert not view.wordWrap()
    assert view.horizontalScrollBar().maximum() == 0
    decode = 7
    assert view.columnWidth(decode) >= view.sizeHintForColumn(decode)


def test_the_launch_box_shows_the_whole_recipe(qtbot, tmp_path, sync) -> None:
    w = _window(qtbot, tmp_path, (1400, 860))
    w.session.set_model("llama-3.1-8b-instruct")
    w.tabs.setCurrentWidget(w.layers_tab)
    tab = w.layers_tab
    tab.engine_combo.setCurrentIndex(tab.engine_combo.findData("ollama"))
    _settle(qtbot, w)
    box = tab.command_text
    assert box.toPlainText().count("\n") >= 7  # Ollama's recipe: a Modelfile and commands
    assert box.verticalScrollBar().maximum() == 0  # every line shows
    # a short window: the box gives way (it scrolls), the lanes keep their own height
    w.resize(1024, 700)
    _settle(qtbot, w)
    lines = box.fontMetrics().lineSpacing()
    assert box.height() >= 4 * lines
    for device in ("gpu:0", "gpu:1"):
        lane = tab.lane(device)
        assert lane.height() >= lane.minimumSizeHint().height()
        label = lane.bar._label
        assert label.height() >= label.heightForWidth(label.width())  # no line cut
    # a recipe longer than the cap scrolls
    w.resize(1400, 860)
    box.setPlainText("\n".join(f"line {i}" for i in range(40)))
    _settle(qtbot, w)
    assert box.height() <= 15 * lines
    assert box.verticalScrollBar().maximum() > 0


# ---------------------------------------------------------------- the KV tab


def _kv(qtbot, w: MainWindow):
    w.tabs.setCurrentWidget(w.kv_tab)
    qtbot.waitUntil(lambda: bool(w.kv_tab.rows), timeout=20_000)
    _settle(qtbot, w)
    return w.kv_tab


def test_ollama_is_offered_only_the_pairs_it_runs(qtbot, tmp_path, sync) -> None:
    w = _window(qtbot, tmp_path, (1400, 860))
    w.session.set_model("llama-3.1-8b-instruct")
    tab = _kv(qtbot, w)
    assert len(tab.rows) == 81
    combo = w.controls.backend
    combo.setCurrentIndex(combo.findText("Ollama"))
    _settle(qtbot, w)
    pairs = {(r.kv_k, r.kv_v) for r in tab.rows}
    f16, q8, q4 = KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q4_0
    assert pairs == {(f16, f16), (q8, q8), (q4, q4)}
    assert tab.table.rowCount() == 3 and not tab.show_all.isVisible()
    assert "Ollama" in tab.status.text()


def test_a_refused_pair_says_why_once_and_the_plan_stays(qtbot, tmp_path, sync) -> None:
    w = _window(qtbot, tmp_path, (1400, 860))
    w.session.set_model("llama-3.1-8b-instruct")
    tab = _kv(qtbot, w)
    tab.show_all.setChecked(True)
    # the engine changes while the KV tab is not looked at: its rows are the old engine's
    w.tabs.setCurrentWidget(w.paths_tab)
    w.session.update_settings(backend=Backend.OLLAMA)
    plan, settings = w.session.plan, w.session.settings
    tab._notice_timer.setInterval(300)
    r = next(i for i, row in enumerate(tab.rows) if row.kv_k is not row.kv_v)
    tab.table.cellDoubleClicked.emit(r, 0)
    assert tab.notice.isVisibleTo(tab) and "one KV type for K and V" in tab.notice.text()
    assert w.session.settings == settings and w.session.plan is plan
    assert not w.problem.isVisibleTo(w)  # no banner over every tab
    qtbot.waitUntil(lambda: not tab.notice.isVisibleTo(tab), timeout=3000)


def test_the_kv_tab_compares_the_paths_at_one_stated_quantization(qtbot, tmp_path, sync) -> None:
    w = _window(qtbot, tmp_path, (1024, 700))
    _llama_70b_at_32k(qtbot, w)
    plan = w.session.plan
    quant = next(p.quant for p in plan.paths if p.path is plan.recommended)
    tab = _kv(qtbot, w)
    assert {lim.quant for row in tab.rows for lim in row.limits} == {quant}
    assert quant in tab.status.text() and quant in tab.chart.title.text()
    # the most useful pairs first, f32 last and behind "Show all"
    first = [(r.kv_k.value, r.kv_v.value) for r in tab.rows[:3]]
    assert first == [("f16", "f16"), ("q8_0", "q8_0"), ("q4_0", "q4_0")]
    f32 = [i for i, r in enumerate(tab.rows) if KvCacheType.F32 in (r.kv_k, r.kv_v)]
    assert f32 == list(range(len(tab.rows) - len(f32), len(tab.rows)))
    assert all(tab.table.isRowHidden(i) for i in f32)
    tab.show_all.setChecked(True)
    assert not any(tab.table.isRowHidden(i) for i in f32)
    # a quality column, a speed note, and a table that does not scroll sideways
    headers = [tab.table.horizontalHeaderItem(c).text() for c in range(tab.table.columnCount())]
    assert "Quality" in headers and "Speed note" in headers
    q8 = next(r for r, row in enumerate(tab.rows) if row.kv_k is row.kv_v is KvCacheType.Q8_0)
    assert tab.table.item(q8, headers.index("Quality")).text() == "no visible loss"
    # on CUDA a mixed pair decodes through an f16 copy of K and V (fattn.cu, b11434)
    mixed = next(r for r, row in enumerate(tab.rows) if row.kv_k is not row.kv_v)
    assert "f16" in tab.table.item(mixed, headers.index("Speed note")).text()
    assert tab.table.item(mixed, 0).text().startswith("⚠")
    assert tab.table.horizontalScrollBar().maximum() == 0


@pytest.mark.parametrize("size", [(1024, 700), (1600, 1000)])
def test_the_kv_chart_draws_no_label_over_another_or_a_curve(qtbot, tmp_path, sync, size) -> None:
    w = _window(qtbot, tmp_path, size)
    _llama_70b_at_32k(qtbot, w)
    tab = _kv(qtbot, w)
    chart = tab.chart
    view = chart.plot.getViewBox()
    area = view.sceneBoundingRect()
    boxes = [label.sceneBoundingRect() for label in chart.limit_labels]
    assert len(boxes) == len(w.session.plan.paths)
    for a, b in itertools.combinations(boxes, 2):
        assert not a.intersects(b), (a, b)
    for box in boxes:
        assert area.contains(box), (box, area)
    for curve in chart.spec.curves:
        points = [
            view.mapViewToScene(QPointF(math.log10(c), g))
            for c, g in zip(curve.contexts, curve.gib, strict=True)
        ]
        for a, b in itertools.pairwise(points):
            for i in range(9):
                p = a + (b - a) * (i / 8)
                assert not any(box.contains(p) for box in boxes), (curve.label, p)
