"""The Layers tab's commands: actions whose shortcuts work anywhere inside the tab, undo
and redo over the document's stack, and the toolbar that shows them with the move and
experts menus. What each action does stays with the tab."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence, QUndoStack
from PySide6.QtWidgets import QMenu, QSpinBox, QToolBar, QToolButton, QWidget, QWidgetAction


def tab_action(owner: QWidget, text: str, tip: str, slot: Callable[..., object]) -> QAction:
    """An action of `owner`, triggered by its shortcut while the focus is inside it."""
    a = QAction(text, owner)
    a.setToolTip(tip)
    a.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
    a.triggered.connect(slot)
    owner.addAction(a)
    return a


def undo_redo_actions(owner: QWidget, stack: QUndoStack) -> tuple[QAction, QAction]:
    """Undo and Redo of `stack`, enabled as it allows, shortcuts working inside `owner`."""
    # plain "Undo"/"Redo" on the buttons (the edit they undo is in the tooltip), so
    # the toolbar does not widen with every command's name
    undo = QAction("Undo", owner)
    undo.triggered.connect(stack.undo)
    stack.canUndoChanged.connect(undo.setEnabled)
    stack.undoTextChanged.connect(lambda t: undo.setToolTip(f"Undo {t}"))
    undo.setEnabled(False)
    undo.setShortcut(QKeySequence("Ctrl+Z"))
    redo = QAction("Redo", owner)
    redo.triggered.connect(stack.redo)
    stack.canRedoChanged.connect(redo.setEnabled)
    stack.redoTextChanged.connect(lambda t: redo.setToolTip(f"Redo {t}"))
    redo.setEnabled(False)
    redo.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
    for a in (undo, redo):
        a.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        owner.addAction(a)
    return undo, redo


class LayersToolbar(QToolBar):
    """The strategies, undo and redo, "Move selection to ▸" and the "Experts ▸" menu
    (its N field sets how many first layers' experts go to the CPU)."""

    def __init__(
        self,
        owner: QWidget,
        *,
        strategies: Sequence[QAction],
        undo: QAction,
        redo: QAction,
        move_menu: QMenu,
        experts_actions: Sequence[QAction],
        first_n_action: QAction,
        command_actions: Sequence[QAction] = (),
    ) -> None:
        super().__init__(owner)
        self.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for i, a in enumerate(strategies):
            if i == 0 and command_actions:
                # Auto-place, with the other ways llama.cpp places a model behind its
                # arrow: fit's own placement, or a pasted command line
                menu = QMenu("Place as llama.cpp does", owner)
                for c in command_actions:
                    menu.addAction(c)
                button = QToolButton(self)
                button.setDefaultAction(a)
                button.setMenu(menu)
                button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
                self.addWidget(button)
                self.command_menu = menu
            else:
                self.addAction(a)
        self.addSeparator()
        self.addAction(undo)
        self.addAction(redo)
        self.addSeparator()
        move = QToolButton(self)
        move.setText("Move selection to ▸")
        move.setMenu(move_menu)
        move.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.addWidget(move)
        self.addSeparator()
        # the MoE tools in one menu, so the toolbar fits at 1024 px and the N field is
        # never pushed into the overflow where it cannot be set
        experts_menu = QMenu("Experts", owner)
        for a in experts_actions:
            experts_menu.addAction(a)
        experts_menu.addSeparator()
        self.first_n_spin = QSpinBox(experts_menu)
        self.first_n_spin.setPrefix("N = ")
        self.first_n_spin.setAccessibleName("number of layers whose experts go to the CPU")
        spin_action = QWidgetAction(experts_menu)
        spin_action.setDefaultWidget(self.first_n_spin)
        experts_menu.addAction(spin_action)
        experts_menu.addAction(first_n_action)
        self.experts_button = QToolButton(self)
        self.experts_button.setText("Experts ▸")
        self.experts_button.setToolTip("Mixture-of-experts tools: run experts on the CPU")
        self.experts_button.setMenu(experts_menu)
        self.experts_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        experts_action = self.addWidget(self.experts_button)
        self.experts_menu = experts_menu
        # hiding the button's action hides the MoE tools for dense models
        self.moe_widgets = [experts_action]
