"""The draft model picker (speculative decoding, llama.cpp's -md): none, or a catalog
model whose vocabulary llama.cpp accepts beside the current one (sizes at most 128
tokens apart) and that is smaller than it."""

from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QWidget

from rigspark_gui.core.memory import param_count
from rigspark_gui.core.model import VOCAB_MAX_SIZE_DIFFERENCE, ModelSpec


def draft_candidates(target: ModelSpec, specs: list[ModelSpec]) -> list[ModelSpec]:
    """Catalog models that can draft for `target`, smallest first."""
    a = target.geometry.n_vocab
    size = param_count(target)
    out = [
        s
        for s in specs
        if s.id != target.id
        and abs(s.geometry.n_vocab - a) <= VOCAB_MAX_SIZE_DIFFERENCE
        and param_count(s) < size
    ]
    return sorted(out, key=param_count)


class DraftCombo(QComboBox):
    """'No draft', then the candidates for the current model (by id)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setToolTip(
            "A draft model for speculative decoding (llama.cpp -md): its weights, KV cache "
            "and compute buffer load beside the model. Its speed gain is shown only from a "
            "cited acceptance rate, else as unknown"
        )
        # sized for a short name, not the longest one, so the top bar keeps to 1024 px;
        # the open list still shows every name whole
        self.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(14)
        self.set_candidates([])

    def set_candidates(self, specs: list[ModelSpec], current: str | None = None) -> None:
        self.blockSignals(True)
        try:
            self.clear()
            self.addItem("No draft", "")
            for s in specs:
                self.addItem(f"Draft: {s.name}", s.id)
            self.setCurrentIndex(max(self.findData(current or ""), 0))
            self.setEnabled(bool(specs))
        finally:
            self.blockSignals(False)
