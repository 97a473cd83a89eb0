"""Where each layer goes and what every device then holds: llama.cpp's -ngl /
--tensor-split ranges, hand edits, strategies, and the fast fit evaluator.

The public face of placement; other packages import from here only."""

from rigspark_gui.core.placement.fit import (
    DeviceTally,
    FitContext,
    FitEvaluator,
    kv_total_fast,
)
from rigspark_gui.core.placement.layout import (
    CPU,
    HEADROOM,
    INPUT,
    OUTPUT,
    DeviceLoad,
    Placement,
    Verdict,
    auto_place,
    device_loads,
    gpu_device,
    kv_devices,
    llama_base,
    llama_cpp_ranges,
    llama_cpp_slots,
    move_experts,
    move_layers,
    rig_devices,
    uniform_placement,
    unit_label,
    units_span,
)
from rigspark_gui.core.placement.strategies import (
    even_split,
    fill_fastest_first,
    fit_by_ngl,
)

__all__ = [
    "CPU",
    "HEADROOM",
    "INPUT",
    "OUTPUT",
    "DeviceLoad",
    "DeviceTally",
    "FitContext",
    "FitEvaluator",
    "Placement",
    "Verdict",
    "auto_place",
    "device_loads",
    "even_split",
    "fill_fastest_first",
    "fit_by_ngl",
    "gpu_device",
    "kv_devices",
    "kv_total_fast",
    "llama_base",
    "llama_cpp_ranges",
    "llama_cpp_slots",
    "move_experts",
    "move_layers",
    "rig_devices",
    "uniform_placement",
    "unit_label",
    "units_span",
]
