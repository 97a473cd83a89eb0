"""The plan choices the window remembers between runs: the model and every setting.

They are kept under plan/ in the window's QSettings as text, '' for a serving knob left
at the engine's default, "auto" for a setting left to the engine (context, flash
attention, parallel slots). Read back, each turns into its type again; a value that no
longer reads as one is dropped, so that setting keeps its default.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings

from rigspark_gui.core.settings import ENGINE_DEFAULTS, SETTING_RANGES
from rigspark_gui.ui.session import PlannerSession

DEFAULT_MODEL = "llama-3.1-8b-instruct"
SETTING_KEYS = (
    "context",
    "kv_k",
    "kv_v",
    "flash_attn",
    "parallel",
    "backend",
    "quant",
    "prompt_tokens",
    "gpu_backend",
    "min_tok_s",
    # the serving engines' knobs ('' = the engine's default)
    "memory_utilization",
    "tensor_parallel",
    "pipeline_parallel",
    "max_num_seqs",
    "cpu_offload_gb",
    # the projector: on the CPU (--no-mmproj-offload), the image size ('' = warm-up)
    "mmproj_offload",
    "image_size",
    # how llama.cpp loads the weights: mmap ('' = decided by the plan), repack
    "mmap",
    "repack",
)
_OPTIONAL_INTS = ("tensor_parallel", "pipeline_parallel", "max_num_seqs")


def save_choices(q: QSettings, session: PlannerSession) -> None:
    """Keep the session's model and settings in `q`."""
    s = session.settings
    if session.spec is not None:
        q.setValue("plan/model", session.spec.id)
    for key in SETTING_KEYS:
        value = "auto" if s.is_auto(key) else getattr(s, key)
        q.setValue(f"plan/{key}", "" if value is None else str(value))


def saved_settings(q: QSettings) -> dict[str, object]:
    """The settings kept in `q`, typed, for `PlannerSession.update_settings`."""
    values: dict[str, object] = {}
    for key in SETTING_KEYS:
        raw = q.value(f"plan/{key}")
        if raw is None:
            continue
        raw = str(raw)
        if raw == "auto" and key in ENGINE_DEFAULTS:
            values[key] = "auto"  # left to the engine
        elif key in ("context", "parallel", "prompt_tokens"):
            values[key] = int(raw) if raw.isdigit() else None
        elif key == "image_size":  # out of range: the warm-up image, not a failed restore
            n = int(raw) if raw.isdigit() and len(raw) < 8 else 0
            values[key] = n if 1 <= n <= SETTING_RANGES[key][1] else ""
        elif key in ("flash_attn", "mmproj_offload"):
            values[key] = raw.lower() == "true"
        elif key in ("mmap", "repack"):
            # True / False; mmap '' is left to the plan (None below); else dropped
            left_open = raw == "" and key == "mmap"
            values[key] = "" if left_open else {"true": True, "false": False}.get(raw.lower())
        elif key in ("quant", "gpu_backend"):
            values[key] = raw or None
        elif key in _OPTIONAL_INTS:
            values[key] = int(raw) if raw.isdigit() else ""
        elif key in ("memory_utilization", "cpu_offload_gb"):
            try:
                values[key] = float(raw)
            except ValueError:
                values[key] = "" if key == "memory_utilization" else None
        elif key == "min_tok_s":
            try:
                values[key] = float(raw)
            except ValueError:
                values[key] = None
        else:
            values[key] = raw
    values = {k: v for k, v in values.items() if v is not None or k in ("quant", "gpu_backend")}
    # '' marks a serving knob left at the engine's default
    values = {k: (None if v == "" else v) for k, v in values.items()}
    return values


def saved_model(q: QSettings, session: PlannerSession) -> str:
    """The model kept in `q` when the session knows it, else the default (or its first)."""
    model = str(q.value("plan/model", DEFAULT_MODEL))
    if session.spec_by_id(model) is None:
        model = DEFAULT_MODEL
    if session.spec_by_id(model) is None and session.specs:
        model = session.specs[0].id
    return model
