"""Catalog tab: every model ranked for this rig; sortable, filterable; double-click
opens one in the planner. Ranking runs in the background."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    Signal,
)
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.catalog.search import search_terms
from rigspark_gui.core.chart_spec import COLOURS
from rigspark_gui.core.plan import RankedModel, RankVerdict, rank_models
from rigspark_gui.core.units import gib, param_text, speed_text
from rigspark_gui.ui.background import run_in_background
from rigspark_gui.ui.content_fit import ColumnFit
from rigspark_gui.ui.session import PlannerSession
from rigspark_gui.ui.word_filter import WordFilterProxy

HEADERS = ("Model", "Family", "Params", "Verdict", "Best path", "Quant", "Memory", "Decode")
VERDICT_TEXT = {RankVerdict.FITS: "✓ fits", RankVerdict.SLOW: "◔ slow", RankVerdict.NO: "✗ no"}
VERDICT_ORDER = {RankVerdict.FITS: 0, RankVerdict.SLOW: 1, RankVerdict.NO: 2}
ID_ROLE = Qt.ItemDataRole.UserRole + 1


class RankingModel(QAbstractTableModel):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[RankedModel] = []

    def set_rows(self, rows: list[RankedModel]) -> None:
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = 0) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return HEADERS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = 0) -> Any:
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        c = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return (
                r.name,
                r.family,
                param_text(r.params),
                VERDICT_TEXT[r.verdict],
                r.path.value if r.path else "–",
                r.quality.split(" · KLD")[0] if r.quality else r.quant or "–",
                gib(r.required_bytes) if r.required_bytes else "–",
                speed_text(r.tok_s, r.low_tok_s, r.high_tok_s) if r.tok_s else "–",
            )[c]
        if role == Qt.ItemDataRole.UserRole:  # sort keys
            return (
                r.name.lower(),
                r.family.lower(),
                r.params,
                VERDICT_ORDER[r.verdict],
                r.path.value if r.path else "~",
                r.quant or "",
                r.required_bytes,
                r.tok_s or 0.0,
            )[c]
        if role == ID_ROLE:
            return r.model_id
        if role == Qt.ItemDataRole.ToolTipRole:
            if c == 5 and r.quality:
                return r.quality
            if c == 0:
                return "\n".join(x for x in (r.name, r.note or r.model_id) if x)
            return r.note or r.model_id
        if role == Qt.ItemDataRole.ForegroundRole and c == 3:
            colour = {
                RankVerdict.FITS: COLOURS["compute"],
                RankVerdict.SLOW: COLOURS["kv"],
                RankVerdict.NO: COLOURS["shortfall"],
            }[r.verdict]
            return QBrush(QColor(colour))
        return None


class _WordsProxy(WordFilterProxy):
    """Rows whose words (name, family, id, size, path, quantization, verdict) begin
    with every typed word."""

    def terms(self, row: int, parent: QModelIndex | QPersistentModelIndex) -> tuple[str, ...]:
        model = self.sourceModel()
        assert isinstance(model, RankingModel)
        r = model.rows[row]
        return search_terms(
            r.name, r.family, r.model_id, f"{r.params / 1e9:.1f}b",
            r.path.value if r.path else "", r.quant or "", VERDICT_TEXT[r.verdict],
        )  # fmt: skip


class CatalogTab(QWidget):
    model_opened = Signal(str)

    def __init__(self, session: PlannerSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._generation = 0
        self._key: object = None
        self.model = RankingModel()
        self.proxy = _WordsProxy(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter by words: qwen 32, llama 8b, cpu, slow…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._on_filter)
        self.no_match = QLabel()
        self.no_match.hide()
        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        # keep the engine's ranking until the user clicks a column
        self.view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.proxy.sort(-1)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.verticalHeader().setVisible(False)
        # one line per model, no sideways scrolling: every column fits its text but the
        # name, family and quantization, which give up width when the window is narrow
        # (elided; the name and quality are whole in their tooltips)
        header = self.view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.columns = ColumnFit(self.view, wrap=False, shrink={0: 120, 1: 50, 5: 100})
        self.model.modelReset.connect(self.columns.refit)
        self.view.doubleClicked.connect(self._on_open)
        self.view.activated.connect(self._on_open)
        self.status = QLabel("Ranking appears once the rig is known.")
        layout = QVBoxLayout(self)
        layout.addWidget(self.status)
        layout.addWidget(self.filter)
        layout.addWidget(self.no_match)
        layout.addWidget(self.view, 1)

    def _on_filter(self, text: str) -> None:
        self.proxy.set_query(text)
        empty = bool(text.strip()) and self.proxy.rowCount() == 0 and self.model.rows
        self.no_match.setText(f"No model matches “{text.strip()}”.")
        self.no_match.setVisible(bool(empty))

    def refresh(self) -> None:
        rig = self.session.rig
        if rig is None:
            return
        s = self.session.settings
        specs = self.session.specs
        key = (rig, s.context, s.kv_k, s.kv_v, s.flash_attn, s.parallel, s.backend, len(specs))
        if key == self._key:
            return
        self._key = key
        self._generation += 1
        gen = self._generation
        perf = self.session.perf
        self.status.setText(f"Ranking {len(specs)} models for this rig…")
        run_in_background(
            self,
            lambda: rank_models(specs, rig, s, perf),
            lambda rows: self._on_ranked(gen, rows),
            lambda err, _d: self.status.setText(f"Ranking failed: {err}"),
        )

    def _on_ranked(self, gen: int, rows: list[RankedModel]) -> None:
        if gen != self._generation:
            return
        # within each verdict, the models people run first: the session lists the catalog
        # in that order (data/popularity.json), the models on this computer before it
        run_order = {spec.id: i for i, spec in enumerate(self.session.specs)}
        rows = sorted(
            rows, key=lambda r: (VERDICT_ORDER[r.verdict], run_order.get(r.model_id, 1 << 30))
        )
        self.model.set_rows(rows)
        n_fit = sum(1 for r in rows if r.verdict is RankVerdict.FITS)
        n_slow = sum(1 for r in rows if r.verdict is RankVerdict.SLOW)
        self.status.setText(
            f"{n_fit} models fit this rig at {self.session.settings.context} tokens, "
            f"{n_slow} more fit but run slowly (under 8 tok/s); double-click one to open it."
        )

    def _on_open(self, index: QModelIndex) -> None:
        model_id = self.proxy.mapToSource(index).data(ID_ROLE)
        if model_id:
            self.model_opened.emit(str(model_id))
