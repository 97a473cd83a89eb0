"""The planner's state: model, rig and settings in; a Plan out, on every change.

Widgets call the setters; `plan_changed` carries the new Plan. Planning one model is a
few milliseconds, so it runs synchronously; the slower catalog ranking and the KV
comparison run in the background in their tabs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import QObject, Signal

from rigspark_gui.core.errors import RigSparkError
from rigspark_gui.core.model import DraftModel, ModelSpec, Projector
from rigspark_gui.core.plan import Plan, plan, plan_projector
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.serving import FORMATS
from rigspark_gui.core.settings import (
    engine_default_settings,
    make_settings,
    settings_values,
)
from rigspark_gui.core.speed import SpeedModel


class PlannerSession(QObject):
    plan_changed = Signal(object)  # Plan
    plan_failed = Signal(str)  # a one-line reason the current inputs cannot be planned
    model_changed = Signal(object)  # ModelSpec
    settings_changed = Signal(object)  # PlanSettings
    rig_changed = Signal(object)  # Rig
    models_changed = Signal()

    def __init__(self, specs: list[ModelSpec], perf: SpeedModel) -> None:
        super().__init__()
        self._specs: dict[str, ModelSpec] = {s.id: s for s in specs}
        self.perf = perf
        self.spec: ModelSpec | None = None
        self.rig: Rig | None = None
        # a new plan starts from the engine's own defaults (context, flash attention and
        # slots auto), as `llama-server -m model.gguf` would run it
        self.settings = engine_default_settings()
        self.plan: Plan | None = None
        # The context the user asked for: a model with a shorter trained context clamps
        # it, and the next model that allows it gets it back.
        self.asked_context = self.settings.context
        # the projector each model came with, kept when a file replaces it
        self._catalog_projector: dict[str, Projector | None] = {}

    # ------------------------------------------------------------ models
    @property
    def specs(self) -> list[ModelSpec]:
        return list(self._specs.values())

    def spec_by_id(self, model_id: str) -> ModelSpec | None:
        return self._specs.get(model_id)

    def add_model(self, spec: ModelSpec) -> None:
        self.add_models([spec])

    def add_models(self, specs: list[ModelSpec]) -> None:
        for spec in specs:
            self._specs[spec.id] = spec
        self.models_changed.emit()

    def set_model(self, model_id: str) -> None:
        spec = self._specs.get(model_id)
        if spec is None or spec is self.spec:
            return
        self.spec = spec
        changes: dict[str, Any] = {}
        context = min(self.asked_context, spec.geometry.context_length)
        if context != self.settings.context:
            changes["context"] = context
        quant = self.settings.quant
        if quant is not None and not (
            quant in spec.available_quants or (self.settings.backend.serving and quant in FORMATS)
        ):
            changes["quant"] = None
        if changes:
            self.settings = replace(self.settings, **changes)
            self.settings_changed.emit(self.settings)
        self.model_changed.emit(spec)
        self.replan()

    def set_draft(self, model_id: str | None) -> None:
        """A catalog model drafting for the current one (speculative decoding, -md) at
        Q8_0 where it has it, or none."""
        if self.spec is None:
            return
        base = self._specs.get(self.spec.id, self.spec)
        other = self._specs.get(model_id) if model_id else None
        draft = None
        if other is not None:
            quant = "Q8_0" if "Q8_0" in other.available_quants else other.available_quants[0]
            draft = DraftModel(spec=other, quant=quant)
        self.spec = replace(base, draft=draft)
        self.replan()

    def set_projector(self, projector: Projector | None) -> str:
        """The current model loading `projector` beside it (a pasted `--mmproj FILE`, a
        file chosen in the window; None: none), kept for this model while the window is
        open. '' when done; else why not (the engine's one line), the model and its
        plan left as they were. It is checked as if Text only were off, so a projector
        that does not fit the model is refused now rather than when the box is cleared."""
        if self.spec is None:
            return ""
        base = self._specs.get(self.spec.id, self.spec)
        candidate = replace(self.spec, projector=projector)
        if self.rig is not None and projector is not None:
            try:  # the engine's own check (the width it feeds the model)
                plan_projector(candidate, self.rig, replace(self.settings, text_only=False))
            except RigSparkError as err:
                return str(err)
        self._catalog_projector.setdefault(self.spec.id, base.projector)
        self._specs[self.spec.id] = replace(base, projector=projector)
        self.spec = candidate
        self.model_changed.emit(self.spec)  # the Text only box now applies
        self.replan()
        return ""

    def catalog_projector(self) -> Projector | None:
        """The projector the current model came with (the catalog's, or none)."""
        if self.spec is None:
            return None
        if self.spec.id in self._catalog_projector:
            return self._catalog_projector[self.spec.id]
        return self.spec.projector

    def projector_replaced(self) -> bool:
        """Whether the current model loads another projector than it came with."""
        return self.spec is not None and self.spec.projector != self.catalog_projector()

    def restore_projector(self) -> None:
        """Back to the projector the current model came with."""
        if self.projector_replaced():
            self.set_projector(self.catalog_projector())

    # ------------------------------------------------------------ inputs
    def set_rig(self, rig: Rig) -> None:
        self.rig = rig
        self.rig_changed.emit(rig)
        self.replan()

    def update_settings(self, **changes: Any) -> bool:
        """Apply setting changes; False (and plan_failed) when they are inconsistent."""
        values = {**settings_values(self.settings), **changes}
        try:
            new = make_settings(**values)
        except RigSparkError as err:
            self.plan_failed.emit(str(err))
            return False
        if "context" in changes:
            self.asked_context = new.context
        if new != self.settings:
            self.settings = new
            self.settings_changed.emit(new)
            self.replan()
        return True

    # ------------------------------------------------------------ output
    def replan(self) -> None:
        if self.spec is None or self.rig is None:
            return
        try:
            # each path's choice now; the ladders of every quantization that fits come
            # from a background pass (MainWindow), so a control change stays one frame
            self.plan = plan(self.spec, self.rig, self.settings, self.perf, ladders=False)
        except RigSparkError as err:
            self.plan = None
            self.plan_failed.emit(str(err))
            return
        self.plan_changed.emit(self.plan)
