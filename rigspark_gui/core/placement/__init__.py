"""Where each layer goes and what every device then holds: llama.cpp's -ngl /
--tensor-split ranges, hand edits, strategies, the fast fit evaluator, and the one fit
rule every surface judges them by (`verdict`).

The public face of placement; other packages import from here only."""

from rigspark_gui.core.placement.devices import device_capacity
from rigspark_gui.core.placement.experts import (
    cpu_moe_count,
    fit_cpu_moe,
    is_cpu_moe,
    with_cpu_moe,
)
from rigspark_gui.core.placement.fit import (
    DeviceTally,
    FitContext,
    FitEvaluator,
    kv_total_fast,
)
from rigspark_gui.core.placement.layout import (
    INPUT,
    OUTPUT,
    DeviceId,
    DeviceLoad,
    Placement,
    as_device,
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
    split_memory,
    uniform_placement,
    unit_label,
    units_span,
)
from rigspark_gui.core.placement.strategies import (
    even_split,
    fill_fastest_first,
    fit_by_ngl,
)
from rigspark_gui.core.placement.verdict import (
    CPU,
    HEADROOM,
    TIGHT_SHARE,
    Fit,
    Verdict,
    fits_within,
    judge_fit,
    load_verdict,
    placement_fit,
    shortfall_bytes,
    unified_pool,
)
from rigspark_gui.core.rig import gpu_index

__all__ = [
    "CPU",
    "HEADROOM",
    "INPUT",
    "OUTPUT",
    "TIGHT_SHARE",
    "DeviceId",
    "DeviceLoad",
    "DeviceTally",
    "Fit",
    "FitContext",
    "FitEvaluator",
    "Placement",
    "Verdict",
    "as_device",
    "auto_place",
    "cpu_moe_count",
    "device_capacity",
    "device_loads",
    "even_split",
    "fill_fastest_first",
    "fit_by_ngl",
    "fit_cpu_moe",
    "fits_within",
    "gpu_device",
    "gpu_index",
    "is_cpu_moe",
    "judge_fit",
    "kv_devices",
    "kv_total_fast",
    "llama_base",
    "llama_cpp_ranges",
    "llama_cpp_slots",
    "load_verdict",
    "move_experts",
    "move_layers",
    "placement_fit",
    "rig_devices",
    "shortfall_bytes",
    "split_memory",
    "unified_pool",
    "uniform_placement",
    "unit_label",
    "units_span",
    "with_cpu_moe",
]
