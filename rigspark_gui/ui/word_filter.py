"""A proxy model that keeps the rows matching typed words (catalog/search.py), shared by
the model picker and the Catalog tab."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QObject, QPersistentModelIndex, QSortFilterProxyModel

from rigspark_gui.catalog.search import matches


class WordFilterProxy(QSortFilterProxyModel):
    """Rows whose `terms` begin with every word of the query; subclasses say a row's terms
    (None: a row shown only when nothing is typed, like a group header)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.query = ""

    def set_query(self, text: str) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt >= 6.10 replaces invalidateFilter
            self.beginFilterChange()
            self.query = text.strip()
            self.endFilterChange()
        else:
            self.query = text.strip()
            self.invalidateFilter()

    def terms(
        self, row: int, parent: QModelIndex | QPersistentModelIndex
    ) -> tuple[str, ...] | None:
        raise NotImplementedError

    def filterAcceptsRow(self, row: int, parent: QModelIndex | QPersistentModelIndex) -> bool:
        if not self.query:
            return True
        terms = self.terms(row, parent)
        return terms is not None and matches(self.query, terms)
