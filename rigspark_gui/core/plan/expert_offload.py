"""The cpu-offload path of an MoE model placed the way llama.cpp's fit places it: every
slot on the GPUs and the routed experts of the first blocks in system memory
(`--n-cpu-moe N`, `--cpu-moe` for all), N the smallest that fits. The quantization
search weighs it against the -ngl layer split and keeps the one that decodes faster
(a tie goes to the experts, as llama.cpp's fit does); the Layers tab's Auto-place
makes the same choice for a hand-placeable placement.
"""

from __future__ import annotations

from collections.abc import Sequence

from rigspark_gui.core.memory import WeightsLayout
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.placement import (
    FitEvaluator,
    Placement,
    fit_by_ngl,
    fit_cpu_moe,
    llama_cpp_ranges,
)
from rigspark_gui.core.plan.path_fit import Ranges, Trial, measure_path
from rigspark_gui.core.plan.paths import PathCandidate, PathName
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import DecodeTime, SpeedModel, estimate_decode


def _all_on_gpus(
    ev: FitEvaluator, cand: PathCandidate, cpu_experts: int
) -> tuple[Ranges, list[float] | None] | None:
    """Every slot on the path's GPUs with the experts of blocks 0..cpu_experts-1 in
    system memory: llama.cpp's split by free memory, else one that fills each GPU in
    turn (the first GPUs hold the lighter blocks); None when neither fits the GPUs."""
    n = ev.g.n_layer
    ids = cand.order
    ranges = llama_cpp_ranges(n, n + 1, ev.default_split(ids), ids)
    if ev.gpus_fit(ranges, cpu_experts):
        return ranges, None
    if len(ids) > 1:
        split = ev.fill_split(ids, cpu_experts)
        filled = llama_cpp_ranges(n, n + 1, split, ids)
        if ev.gpus_fit(filled, cpu_experts):
            return filled, split
    return None


def expert_trial(cand: PathCandidate, layers: Trial) -> Trial | None:
    """The cpu-offload trial with every slot on the GPUs and the experts of the fewest
    first blocks in system memory (a binary search over N on prefix sums), beside the
    layer split `layers` of the same quantization. None on other paths, for a dense
    model, when the layer split already puts every slot on the GPUs, or when not even
    `--cpu-moe` fits."""
    ev = layers.ev
    g = ev.g
    n = g.n_layer
    if cand.name is not PathName.CPU_OFFLOAD or not g.is_moe or not cand.order:
        return None
    if layers.ngl is not None and layers.ngl > n and layers.m.fits:
        return None  # nothing to offload
    if _all_on_gpus(ev, cand, n) is None:
        return None
    lo, hi = 1, n
    while lo < hi:
        mid = (lo + hi) // 2
        if _all_on_gpus(ev, cand, mid) is not None:
            hi = mid
        else:
            lo = mid + 1
    found = _all_on_gpus(ev, cand, lo)
    assert found is not None
    ranges, split = found
    m = measure_path(ev.tally_ranges(ranges, lo), cand)
    if not m.fits:
        return None  # system memory cannot take the experts either
    return Trial(layers.quant, layers.layout, ev, ranges, n + 1, split, m, lo)


def _seconds(t: DecodeTime | str | None) -> float | None:
    return None if t is None or isinstance(t, str) else t.seconds


def experts_win(experts: DecodeTime | str | None, layers: DecodeTime | str | None) -> bool:
    """Whether the expert placement is kept over the layer split: unless the speed
    model says the layer split decodes faster (a tie, or an unknown speed, keeps the
    experts, as llama.cpp's fit does)."""
    e, lay = _seconds(experts), _seconds(layers)
    return e is None or lay is None or e <= lay


def auto_placement(
    g: Geometry,
    layout: WeightsLayout,
    rig: Rig,
    s: PlanSettings,
    speed: SpeedModel | None,
    kv_layers: Sequence[int] | None = None,
) -> Placement:
    """Auto-place: llama.cpp's -ngl rule at the largest -ngl that fits and, for an MoE
    model, every slot on the GPUs with `--n-cpu-moe N` (N the smallest that fits);
    the faster of the two by the speed model (a tie: the experts). A layer split that
    already puts every slot on the GPUs is kept as it is."""
    layers = fit_by_ngl(g, layout, rig, s, kv_layers)
    if layers.gpu_slots > g.n_layer:
        return layers
    experts = fit_cpu_moe(g, layout, rig, s, kv_layers)
    if experts is None:
        return layers
    if speed is None:
        return experts
    e = estimate_decode(experts, g, layout, rig, s, speed)
    lay = estimate_decode(layers, g, layout, rig, s, speed)
    if e.tok_s is None or lay.tok_s is None or e.tok_s >= lay.tok_s:
        return experts
    return layers
