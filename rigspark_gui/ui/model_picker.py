"""Searchable model dropdown: type "qwen 32" and pick. Keyboard first.

An editable QComboBox whose completer filters on every typed word (in any order) over
"family name size MoE context"; items are grouped by family under disabled headers.
A name typed and entered that is no item is read as the CLI reads one (an Ollama tag, a
Hugging Face id...); one that names no model is said in the window's words.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QCompleter, QWidget

from rigspark_gui.catalog.search import search_terms
from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.memory import param_count
from rigspark_gui.core.model import ModelSpec
from rigspark_gui.core.units import param_text, tokens
from rigspark_gui.ui.word_filter import WordFilterProxy

LOCAL_FAMILY = "On this computer"
# The resolver's pointer to the CLI's model list, in its messages: the window has its own.
_CLI_POINTER = re.compile(r";?\s*`rigspark-plan [^`]*`[^;()]*$")
WINDOW_POINTER = "pick one from the list as you type, or File ▸ Import model… for a file"
ID_ROLE = Qt.ItemDataRole.UserRole + 1
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 2
UPDATE_ROLE = Qt.ItemDataRole.UserRole + 3  # the item that offers a catalog update


def describe(spec: ModelSpec) -> str:
    """'Qwen2.5 32B Instruct  ·  32.8B  ·  32K ctx' (params counted from the weights)."""
    g = spec.geometry
    n, active = param_count(spec)
    size = param_text(n)
    bits = [spec.name, size]
    if g.is_moe:
        bits.append(f"MoE {g.n_expert_used}/{g.n_expert}, {active / 1e9:.1f}B active")
    bits.append(f"{tokens(g.context_length)} ctx")
    if spec.imported:
        bits.append("imported")
    return "  ·  ".join(bits)


def window_message(message: str) -> str:
    """A resolver message (worded for the command line) as the window says it: one line,
    no command to run, and what to do here instead."""
    text = " ".join(message.split())
    pointed = _CLI_POINTER.sub("", text)
    if pointed != text:
        text = f"{pointed}: {WINDOW_POINTER}"
    return text[:1].upper() + text[1:]


class _WordFilter(WordFilterProxy):
    """Models whose words begin with every typed word; family headers only unfiltered."""

    def terms(
        self, row: int, parent: QModelIndex | QPersistentModelIndex
    ) -> tuple[str, ...] | None:
        index = self.sourceModel().index(row, 0, parent)
        return None if index.data(ID_ROLE) is None else index.data(SEARCH_ROLE)

    def set_query(self, text: str) -> None:
        super().set_query(text)
        # matches that contain the typed words whole come first ("qwen3 32" lists Qwen3
        # 32B before a Qwen 32B whose words only begin with "qwen" and "3"); otherwise
        # the list keeps the order people run the models in
        self.sort(0 if self.query else -1)

    def _whole(self, row: int) -> int:
        terms = self.sourceModel().index(row, 0).data(SEARCH_ROLE) or ()
        typed = [w for w in re.split(r"[\s:/,]+", self.query.lower()) if w]
        return sum(any(t.startswith(w) for t in terms) for w in typed)

    def lessThan(
        self,
        left: QModelIndex | QPersistentModelIndex,
        right: QModelIndex | QPersistentModelIndex,
    ) -> bool:
        a, b = self._whole(left.row()), self._whole(right.row())
        return a > b if a != b else left.row() < right.row()


class ModelPicker(QComboBox):
    model_picked = Signal(str)  # model id
    quant_named = Signal(str)  # a quantization named in what was typed ("...:q4_K_M")
    not_found = Signal(str)  # why a typed name matched no model, in one sentence
    update_requested = Signal()  # the stale-catalog item was chosen

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setEditable(True)
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.setMinimumContentsLength(30)
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setToolTip('Type words of a model\'s name, size or family (e.g. "qwen 32")')
        self._items = QStandardItemModel(self)
        self.setModel(self._items)
        self._filter = _WordFilter()
        self._filter.setSourceModel(self._items)
        self._completer = QCompleter(self._filter, self)
        self._completer.setCompletionMode(QCompleter.CompletionMode.UnfilteredPopupCompletion)
        self._completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setCompleter(self._completer)
        self._completer.activated[QModelIndex].connect(self._on_completer_activated)
        self.lineEdit().textEdited.connect(self._filter.set_query)
        self.lineEdit().textEdited.connect(self._new_choice)
        self.lineEdit().setPlaceholderText("Search models…")
        self.activated.connect(self._on_activated)
        self.lineEdit().returnPressed.connect(self._on_return)
        self._specs: list[ModelSpec] = []
        self._stale_notice = ""
        self._chosen_by_completion = False

    def set_models(self, specs: list[ModelSpec]) -> None:
        """The models, most run first: the catalog comes in the order people run its
        models (data/popularity.json), so its families are listed in the order their
        first model appears, each family's models in that order; the models already on
        this computer come before all."""
        self._specs = list(specs)
        current = self.current_id()
        self.blockSignals(True)
        self._items.clear()
        by_family: dict[str, list[ModelSpec]] = {}
        for s in specs:
            by_family.setdefault(s.family or "Imported", []).append(s)
        rows: list[QStandardItem] = []
        if self._stale_notice:
            rows.append(self._update_item())
        for family in sorted(by_family, key=lambda f: f != LOCAL_FAMILY):  # stable: run order
            header = QStandardItem(f"— {family} —")
            header.setFlags(Qt.ItemFlag.NoItemFlags)
            rows.append(header)
            for s in by_family[family]:
                text = describe(s)
                item = QStandardItem(text)
                item.setData(s.id, ID_ROLE)
                size = f"{param_count(s).total / 1e9:.1f}b"
                item.setData(search_terms(family, s.name, s.id, size), SEARCH_ROLE)
                item.setToolTip(f"{s.id}\nGeometry: {s.source or 'from the file'}")
                rows.append(item)
        # one insertion: the combo box and completer hear of the rows once, not per row
        self._items.invisibleRootItem().appendRows(rows)
        self.blockSignals(False)
        if current:
            self.select(current)

    def set_stale_notice(self, text: str) -> None:
        """Say at the top of the list that the shipped catalog is old, with an item that
        asks for the update (`update_requested`); '' takes the notice away."""
        self._stale_notice = text
        self.set_models(self._specs)

    def _update_item(self) -> QStandardItem:
        item = QStandardItem(f"↻ {self._stale_notice}: update the model catalog…")
        item.setData(True, UPDATE_ROLE)
        item.setData(("update", "catalog", "new", "models"), SEARCH_ROLE)
        item.setToolTip("Help ▸ Update the model catalog…: reads the newest releases' configs")
        return item

    def current_id(self) -> str | None:
        value = self.currentData(ID_ROLE)
        return str(value) if value else None

    def select(self, model_id: str) -> bool:
        for row in range(self._items.rowCount()):
            if self._items.item(row).data(ID_ROLE) == model_id:
                self.blockSignals(True)
                self.setCurrentIndex(row)
                self.blockSignals(False)
                return True
        return False

    def _new_choice(self, *_: object) -> None:
        """A new choice begins (typing, the list opened): no completion's echo is due."""
        self._chosen_by_completion = False

    def showPopup(self) -> None:
        self._new_choice()
        super().showPopup()

    def _on_activated(self, row: int) -> None:
        if self._chosen_by_completion:
            self._chosen_by_completion = False
            current = self.current_id()
            if current:
                self.select(current)
            return
        item = self._items.item(row)
        if item.data(UPDATE_ROLE):
            self._offer_update()
            return
        model_id = item.data(ID_ROLE)
        if model_id:
            self.model_picked.emit(str(model_id))

    def _offer_update(self) -> None:
        current = self.current_id()
        if current:
            self.select(current)
        self.update_requested.emit()

    def _on_return(self) -> None:
        """Enter on a typed name that is no item's text: the resolver reads it as the CLI
        does (an Ollama tag, a Hugging Face id, a file name...)."""
        text = self.lineEdit().text().strip()
        if not text or text == self.itemText(self.currentIndex()):
            return
        popup = self._completer.popup()
        if popup.isVisible() and popup.currentIndex().isValid():
            return  # the open list picks its highlighted row itself, after this
        # A completion chosen with the arrow keys puts its item's text in the field and
        # Enter reaches the field too: that text names its item, not a model to look up.
        row = self.findText(self.lineEdit().text(), Qt.MatchFlag.MatchExactly)
        model_id = self._items.item(row).data(ID_ROLE) if row >= 0 else None
        if model_id:
            self._pick(str(model_id))
            return
        from rigspark_gui.catalog.resolve import resolve

        try:
            found = resolve(self._specs, text)
        except RigSparkError as err:
            self.not_found.emit(window_message(str(err)))
            return
        self.select(found.spec.id)
        self._filter.set_query("")
        popup = self._completer.popup()
        if popup is not None:
            popup.hide()
        self.model_picked.emit(found.spec.id)
        if found.quant is not None and found.quant in found.spec.available_quants:
            self.quant_named.emit(found.quant)

    def _on_completer_activated(self, index: QModelIndex) -> None:
        if index.data(UPDATE_ROLE):
            self._offer_update()
            return
        model_id = index.data(ID_ROLE)
        if model_id:
            # the combo box maps the same completion to a row of its own next, through a
            # list that planning may have unfiltered by then: that second answer is not
            # the user's choice
            self._chosen_by_completion = True
            self._pick(str(model_id))

    def _pick(self, model_id: str) -> None:
        """The model of a chosen item: shown, the list unfiltered, and planned."""
        self.select(model_id)
        self._filter.set_query("")
        self.model_picked.emit(model_id)
