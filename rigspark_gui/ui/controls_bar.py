"""The top bar: model, quantization, context, K/V cache types, flash attention,
parallel sequences and backend. It turns user actions into session calls and mirrors
the session's settings back (without echoing them as new edits)."""

from __future__ import annotations

import math

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.settings import Backend, GpuBackend, PlanSettings
from rigspark_gui.core.units import parse_token_count
from rigspark_gui.ui.draft_combo import DraftCombo, draft_candidates
from rigspark_gui.ui.loading_controls import LoadingControls
from rigspark_gui.ui.model_picker import ModelPicker
from rigspark_gui.ui.projector_controls import ProjectorControls
from rigspark_gui.ui.quant_combo import QuantCombo
from rigspark_gui.ui.session import PlannerSession

# 4K is left to the slider: "auto" (the engine's own context) takes its place
PRESETS = (("8K", 8192), ("32K", 32768), ("128K", 131072))
BACKEND_LABELS = {b: b.label for b in Backend}
GPU_BACKEND_LABELS = {
    None: "Auto",
    GpuBackend.CUDA: "CUDA",
    GpuBackend.ROCM: "ROCm",
    GpuBackend.VULKAN: "Vulkan",
    GpuBackend.METAL: "Metal",
    GpuBackend.SYCL: "SYCL",
}
# the serving engines' own knobs, back to their defaults when leaving them
SERVING_RESET: dict[str, object] = {
    "memory_utilization": None,
    "tensor_parallel": None,
    "pipeline_parallel": None,
    "max_num_seqs": None,
    "max_num_batched_tokens": None,
    "cpu_offload_gb": 0.0,
}
SLIDER_STEPS = 1000
MIN_CONTEXT = 256


class TokenSpinBox(QSpinBox):
    """A token count field that understands "32k", "128K" and "1M" as people type them."""

    def validate(self, text: str, pos: int) -> object:
        core = text.removesuffix(self.suffix()).strip()
        if not core or core.lower() in ("k", "m") or core.endswith((".", ",")):
            return (QValidator.State.Intermediate, text, pos)
        n = parse_token_count(core)
        if n is None:
            return (QValidator.State.Invalid, text, pos)
        if not self.minimum() <= n <= self.maximum():
            return (QValidator.State.Intermediate, text, pos)
        return (QValidator.State.Acceptable, text, pos)

    def valueFromText(self, text: str) -> int:
        n = parse_token_count(text.removesuffix(self.suffix()))
        return self.value() if n is None else n


class ControlsBar(QWidget):
    message = Signal(str)  # an inline explanation (e.g. why flash attention switched on)

    def __init__(self, session: PlannerSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self._syncing = False
        self._quant_serving = False  # the quant menu lists checkpoint formats
        self._max_context = 131072

        self.model_picker = ModelPicker()
        self.model_picker.model_picked.connect(session.set_model)
        self.model_picker.quant_named.connect(lambda q: session.update_settings(quant=q))

        self.quant = QuantCombo()
        self.quant.setToolTip(
            "Auto picks the best quality that fits and reaches the minimum speed "
            "(else the fastest no worse than moderate loss); or fix one quantization"
        )
        self.quant.currentIndexChanged.connect(self._on_quant)

        self.context_slider = QSlider(Qt.Orientation.Horizontal)
        self.context_slider.setRange(0, SLIDER_STEPS)
        self.context_slider.setToolTip("Context length (logarithmic)")
        self.context_slider.setMinimumWidth(90)
        self.context_slider.valueChanged.connect(self._on_slider)
        self.context_spin = TokenSpinBox()
        self.context_spin.setRange(0, 1 << 24)
        # 0 = auto: the engine's own (llama.cpp: the trained context, shrunk by --fit)
        self.context_spin.setSpecialValueText("auto")
        self.context_spin.setSingleStep(1024)
        self.context_spin.setSuffix(" tokens")
        self.context_spin.setToolTip(
            "Exact context length (llama.cpp -c); total over all sequences. "
            "auto: what the engine picks (llama.cpp's fit shrinks the trained context "
            "until the model fits)"
        )
        self.context_spin.setKeyboardTracking(False)
        self.context_spin.valueChanged.connect(self._on_spin)
        presets = QHBoxLayout()
        presets.setSpacing(2)
        self.preset_buttons: dict[str, QPushButton] = {}
        for label, n in (("auto", -1), *PRESETS, ("max", 0)):
            b = QPushButton(label)
            b.setFixedWidth(42)
            b.setToolTip(
                "The engine's own context (llama.cpp: as much as --fit leaves room for)"
                if n < 0
                else "The model's trained context"
                if label == "max"
                else f"{n} tokens"
            )
            b.clicked.connect(
                lambda _=False, n=n: (
                    self._update(context="auto")
                    if n < 0
                    else self._set_context(n or self._max_context)
                )
            )
            presets.addWidget(b)
            self.preset_buttons[label] = b

        self.kv_k = self._kv_combo("K cache type (llama.cpp -ctk)")
        self.kv_v = self._kv_combo(
            "V cache type (llama.cpp -ctv); quantized V needs flash attention"
        )
        self.kv_link = QCheckBox("Link K/V")
        self.kv_link.setChecked(True)
        self.kv_link.setToolTip("Use the same type for K and V; untick to mix them")
        self.kv_link.toggled.connect(self._on_link)
        self.kv_k.currentIndexChanged.connect(self._on_kv_k)
        self.kv_v.currentIndexChanged.connect(self._on_kv_v)

        self.flash_attn = QCheckBox("Flash attention")
        # three states: off, auto (partly checked: on where the devices run it), on
        self.flash_attn.setTristate(True)
        self.flash_attn.setToolTip(
            "llama.cpp -fa: smaller compute buffer; required for a quantized V cache. "
            "Partly checked = auto (llama.cpp's default): on where every device holding "
            "the KV cache runs it"
        )
        self.flash_attn.stateChanged.connect(self._on_fa_state)
        self.text_only = QCheckBox("Text only")
        self.text_only.setToolTip(
            "Leave the model's vision/audio projector out (llama.cpp --no-mmproj): no "
            "images, and its weights and compute buffer are freed"
        )
        self.text_only.toggled.connect(lambda on: self._update(text_only=on))
        # the projector file, image size and Keep on CPU, in a panel under one button
        self.projector = ProjectorControls(session, self)
        self.projector.message.connect(self.message)
        # how the weights load (mmap / --load-mode none, --no-repack), in a panel too
        self.loading = LoadingControls(session, self)
        self.loading.message.connect(self.message)
        self.draft = DraftCombo()
        self.draft.currentIndexChanged.connect(
            lambda _i: None if self._syncing else session.set_draft(self.draft.currentData())
        )
        self.parallel = QSpinBox()
        self.parallel.setRange(0, 256)
        self.parallel.setSpecialValueText("auto")
        self.parallel.setPrefix("× ")
        self.parallel.setToolTip(
            "Parallel sequences (llama.cpp -np): they share the context. auto: the "
            "engine's own (llama-server: 4 slots on one unified KV cache)"
        )
        self.parallel.valueChanged.connect(
            lambda n: None if self._syncing else self._update(parallel=n or "auto")
        )
        self.prompt = QSpinBox()
        self.prompt.setRange(1, 1 << 20)
        self.prompt.setSingleStep(256)
        self.prompt.setSuffix(" prompt")
        self.prompt.setToolTip("Prompt length for the time-to-first-token (prefill) estimate")
        self.prompt.setKeyboardTracking(False)
        self.prompt.valueChanged.connect(lambda n: self._update(prompt_tokens=n))
        self.backend = QComboBox()
        for b, label in BACKEND_LABELS.items():
            self.backend.addItem(label, b.value)
        self.backend.setToolTip(
            "The engine you will run: Ollama, LM Studio and koboldcpp run llama.cpp (same "
            "memory figures); each one's KV types and paths are offered, and Layers ▸ "
            "Launch with follows it"
        )
        self.backend.currentIndexChanged.connect(self._on_backend)

        self.gpu_backend = QComboBox()
        for gb, label in GPU_BACKEND_LABELS.items():
            self.gpu_backend.addItem(label, gb.value if gb else "")
        self.gpu_backend.setToolTip(
            "GPU compute backend for speed estimates: the same card decodes at different "
            "speeds under CUDA, ROCm and Vulkan. Auto = each vendor's own (CUDA for NVIDIA, "
            "ROCm for AMD, SYCL for Intel, Metal for Apple)"
        )
        self.gpu_backend.currentIndexChanged.connect(
            lambda _i: self._update(gpu_backend=self.gpu_backend.currentData() or None)
        )
        self.min_speed = QDoubleSpinBox()
        self.min_speed.setRange(0.0, 1000.0)
        self.min_speed.setDecimals(0)
        self.min_speed.setSingleStep(1.0)
        self.min_speed.setSuffix(" tok/s")
        self.min_speed.setSpecialValueText("off")
        self.min_speed.setKeyboardTracking(False)
        self.min_speed.setToolTip(
            "Auto picks the best quality whose estimated decode speed reaches this; when "
            "none does, the fastest no worse than moderate loss, and smaller models that "
            "reach it. 0 (off) = the best quality that fits"
        )
        self.min_speed.valueChanged.connect(lambda v: self._update(min_tok_s=float(v)))

        # Three rows of their own (no shared columns), so the bar fits from 1024 px up:
        # what to run; how much context and cache; how to choose and how fast.
        rows = QVBoxLayout(self)
        rows.setContentsMargins(6, 6, 6, 2)
        rows.setSpacing(4)

        def labelled(text: str, buddy: QWidget) -> QLabel:
            label = QLabel(text)
            label.setBuddy(buddy)
            return label

        top = QHBoxLayout()
        top.addWidget(labelled("&Model", self.model_picker))
        top.addWidget(self.model_picker, 1)
        top.addWidget(labelled("&Quant", self.quant))
        top.addWidget(self.quant)
        top.addWidget(labelled("&Backend", self.backend))
        top.addWidget(self.backend)
        rows.addLayout(top)
        middle = QHBoxLayout()
        middle.addWidget(labelled("&Context", self.context_spin))
        middle.addWidget(self.context_slider, 1)
        middle.addWidget(self.context_spin)
        middle.addLayout(presets)
        middle.addSpacing(8)
        middle.addWidget(QLabel("K"))
        middle.addWidget(self.kv_k)
        middle.addWidget(QLabel("V"))
        middle.addWidget(self.kv_v)
        middle.addWidget(self.kv_link)
        rows.addLayout(middle)
        bottom = QHBoxLayout()
        bottom.addWidget(self.flash_attn)
        bottom.addWidget(labelled("&Parallel", self.parallel))
        bottom.addWidget(self.parallel)
        bottom.addWidget(self.prompt)
        bottom.addSpacing(8)
        bottom.addWidget(labelled("Mi&n speed", self.min_speed))
        bottom.addWidget(self.min_speed)
        bottom.addWidget(labelled("GPU backend", self.gpu_backend))
        bottom.addWidget(self.gpu_backend)
        bottom.addStretch(1)
        rows.addLayout(bottom)
        # what loads beside the model: the window puts it on the tabs' row (the three rows
        # above are as wide as a 1024 px window allows, and a fourth would cost the tabs
        # their height)
        self.beside = QWidget()
        beside = QHBoxLayout(self.beside)
        beside.setContentsMargins(0, 0, 4, 0)
        beside.addWidget(self.text_only)
        beside.addWidget(self.projector.button)
        beside.addWidget(self.loading.button)
        beside.addSpacing(6)
        beside.addWidget(labelled("&Draft", self.draft))
        beside.addWidget(self.draft)

        session.settings_changed.connect(self.show_settings)
        session.plan_changed.connect(self._show_resolved)
        session.model_changed.connect(self._on_model_changed)
        session.models_changed.connect(lambda: self.model_picker.set_models(session.specs))
        self.model_picker.set_models(session.specs)
        self.show_settings(session.settings)

    def _show_resolved(self, plan: object) -> None:
        """What the settings left to the engine became in this plan, on the controls."""
        resolved = getattr(plan, "resolved", None)
        if resolved is None:
            return
        s = self.session.settings
        self._syncing = True
        try:
            if s.is_auto("context"):
                self.context_slider.setValue(self._slider_pos(resolved.context))
            words = ", ".join(resolved.assumed) or "nothing was left to the engine"
            self.context_spin.setStatusTip(f"This plan: {resolved.context:,} tokens")
            self.context_spin.setToolTip(
                f"Context (llama.cpp -c), total over all sequences. This plan: "
                f"{resolved.context:,} tokens. Engine defaults taken: {words}"
            )
            fa = "on" if resolved.flash_attn else "off"
            self.flash_attn.setText(
                f"Flash attention ({fa})" if s.is_auto("flash_attn") else "Flash attention"
            )
        finally:
            self._syncing = False

    def _kv_combo(self, tip: str) -> QComboBox:
        c = QComboBox()
        for k in KvCacheType:
            c.addItem(k.value, k.value)
        c.setToolTip(tip)
        return c

    # ------------------------------------------------------------ session -> widgets
    def show_settings(self, s: PlanSettings) -> None:
        self._syncing = True
        try:
            auto_ctx = s.is_auto("context")
            self.context_spin.setValue(0 if auto_ctx else s.context)
            self.context_slider.setValue(self._slider_pos(s.context))
            self.kv_k.setCurrentIndex(self.kv_k.findData(s.kv_k.value))
            self.kv_v.setCurrentIndex(self.kv_v.findData(s.kv_v.value))
            if s.kv_k != s.kv_v:
                self.kv_link.setChecked(False)  # mixed types cannot be shown as linked
            self.kv_v.setEnabled(not self.kv_link.isChecked())
            self.flash_attn.setCheckState(
                Qt.CheckState.PartiallyChecked
                if s.is_auto("flash_attn")
                else Qt.CheckState.Checked
                if s.flash_attn
                else Qt.CheckState.Unchecked
            )
            self.parallel.setValue(0 if s.is_auto("parallel") else s.parallel)
            self.text_only.setChecked(s.text_only)
            self.prompt.setValue(s.prompt_tokens)
            self.backend.setCurrentIndex(self.backend.findData(s.backend.value))
            self._offer_kv_types(s.backend)
            self.min_speed.setValue(s.min_tok_s)
            gb = s.gpu_backend.value if s.gpu_backend else ""
            self.gpu_backend.setCurrentIndex(max(self.gpu_backend.findData(gb), 0))
            spec = self.session.spec
            if spec is not None and s.backend.serving != self._quant_serving:
                if s.backend.serving:
                    self.quant.set_formats(spec, s.backend.label)
                else:
                    self.quant.set_model(spec)
                self._quant_serving = s.backend.serving
            idx = self.quant.findData(s.quant or "")
            self.quant.setCurrentIndex(max(idx, 0))
        finally:
            self._syncing = False

    def _on_model_changed(self, spec: ModelSpec) -> None:
        self._syncing = True
        try:
            self._max_context = spec.geometry.context_length
            self.preset_buttons["max"].setToolTip(
                f"The model's trained context: {self._max_context}"
            )
            for label, n in PRESETS:
                self.preset_buttons[label].setEnabled(n <= self._max_context)
            self.model_picker.select(spec.id)
            self.text_only.setEnabled(spec.projector is not None)
            drafting = spec.draft.spec.id if spec.draft is not None else None
            self.draft.set_candidates(draft_candidates(spec, self.session.specs), drafting)
            self.quant.set_model(spec)
            self._quant_serving = False
        finally:
            self._syncing = False
        self.show_settings(self.session.settings)

    # ------------------------------------------------------------ widgets -> session
    def _update(self, **changes: object) -> None:
        if not self._syncing:
            self.session.update_settings(**changes)

    def _on_quant(self, _i: int) -> None:
        self._update(quant=self.quant.currentData() or None)

    def _slider_pos(self, context: int) -> int:
        lo, hi = math.log(MIN_CONTEXT), math.log(max(self._max_context, MIN_CONTEXT + 1))
        frac = (math.log(max(context, MIN_CONTEXT)) - lo) / (hi - lo)
        return round(min(max(frac, 0.0), 1.0) * SLIDER_STEPS)

    def _slider_context(self, pos: int) -> int:
        lo, hi = math.log(MIN_CONTEXT), math.log(max(self._max_context, MIN_CONTEXT + 1))
        n = math.exp(lo + (hi - lo) * pos / SLIDER_STEPS)
        return min(self._max_context, max(MIN_CONTEXT, round(n / 256) * 256))

    def _on_slider(self, pos: int) -> None:
        if not self._syncing:
            self._set_context(self._slider_context(pos))

    def _on_spin(self, n: int) -> None:
        if not self._syncing:
            if n == 0:
                self._update(context="auto")
            else:
                self._set_context(n)

    def _set_context(self, n: int) -> None:
        clamped = min(n, self._max_context)
        if clamped != n:
            self.message.emit(f"Context clamped to the model's trained context ({clamped})")
        self._update(context=clamped)

    def _offer_kv_types(self, backend: Backend) -> None:
        """Only the KV types this engine takes are offered; engines with one type for K
        and V keep them linked."""
        allowed = {t.value for t in backend.kv_types}
        for combo in (self.kv_k, self.kv_v):
            view = combo.view()
            for i in range(combo.count()):
                view.setRowHidden(i, combo.itemData(i) not in allowed)
        if backend.kv_linked:
            self.kv_link.setChecked(True)
        self.kv_link.setEnabled(not backend.kv_linked)
        self.kv_link.setToolTip(
            f"{backend.label} uses one type for K and V"
            if backend.kv_linked
            else "Use the same type for K and V; untick to mix them"
        )
        self.kv_v.setEnabled(not self.kv_link.isChecked())

    def _on_backend(self, _i: int) -> None:
        if self._syncing:
            return
        backend = Backend(self.backend.currentData())
        s = self.session.settings
        changes: dict[str, object] = {"backend": backend}
        k = backend.nearest_kv(s.kv_k)
        v = k if backend.kv_linked else backend.nearest_kv(s.kv_v)
        if (k, v) != (s.kv_k, s.kv_v):
            changes.update(kv_k=k, kv_v=v)
            why = backend.kv_problem(s.kv_k, s.kv_v) or ""
            kv = k.value if k == v else f"K {k.value} / V {v.value}"
            self.message.emit(f"{why[:1].upper()}{why[1:]}: KV cache set to {kv}")
        if v.quantized and backend.ggml_based and not s.flash_attn and not s.is_auto("flash_attn"):
            changes["flash_attn"] = True
        if backend is Backend.SGLANG and s.cpu_offload_gb:
            changes["cpu_offload_gb"] = 0.0  # a vLLM option
        if backend.serving != s.backend.serving:
            # GGUF quantizations and checkpoint formats do not carry over, nor do the
            # serving engines' own knobs
            changes["quant"] = None
            if not backend.serving:
                changes.update(SERVING_RESET)
        self._update(**changes)

    def _on_link(self, linked: bool) -> None:
        self.kv_v.setEnabled(not linked)
        if linked:
            self._on_kv_k(0)

    def _on_kv_k(self, _i: int) -> None:
        if self._syncing:
            return
        k = KvCacheType(self.kv_k.currentData())
        v = k if self.kv_link.isChecked() else KvCacheType(self.kv_v.currentData())
        self._apply_kv(k, v)

    def _on_kv_v(self, _i: int) -> None:
        if self._syncing:
            return
        self._apply_kv(KvCacheType(self.kv_k.currentData()), KvCacheType(self.kv_v.currentData()))

    def _apply_kv(self, k: KvCacheType, v: KvCacheType) -> None:
        changes: dict[str, object] = {"kv_k": k, "kv_v": v}
        cur = self.session.settings
        if v.quantized and not cur.flash_attn and not cur.is_auto("flash_attn"):
            changes["flash_attn"] = True
            self.message.emit(
                "Flash attention switched on: llama.cpp needs it for a quantized V cache "
                f"({v.value})"
            )
        self._update(**changes)

    def _on_fa_state(self, state: int) -> None:
        if self._syncing:
            return
        if Qt.CheckState(state) is Qt.CheckState.PartiallyChecked:
            self._update(flash_attn="auto")
        else:
            self._on_fa(Qt.CheckState(state) is Qt.CheckState.Checked)

    def _on_fa(self, on: bool) -> None:
        if self._syncing:
            return
        if not on and self.session.settings.kv_v.quantized:
            self.message.emit(
                "Flash attention stays on: the V cache "
                f"({self.session.settings.kv_v.value}) is quantized"
            )
            self._syncing = True
            self.flash_attn.setChecked(True)
            self._syncing = False
            return
        self._update(flash_attn=on)
