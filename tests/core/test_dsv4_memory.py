"""DeepSeek V4's memory in the engine: the planning fast path and the placement agree with
the per-layer walk, and each layer's caches sit on its device."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rigspark_gui.core.memory import kv_bytes_per_layer, kv_total_bytes, weights_layout
from rigspark_gui.core.memory.arch_dsv4 import dsv4_layer_kv_bytes, dsv4_layer_state_bytes
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.placement import FitEvaluator, auto_place, device_loads, kv_total_fast
from rigspark_gui.core.settings import PlanSettings
from tests.conftest import make_rig, spec_of
from validation.synth_dsv4 import MODELS

G = MODELS["deepseek4-like"]


@pytest.mark.parametrize(
    "s",
    [
        PlanSettings(context=4096),
        PlanSettings(context=100000, kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0, flash_attn=True),
        PlanSettings(context=16384, parallel=4),
        PlanSettings(context=16384, parallel=4, kv_unified=True),
        PlanSettings(context=8192, swa_full=True),
    ],
)
def test_fast_path_and_placement_agree_with_the_layer_walk(s: PlanSettings) -> None:
    assert kv_total_fast(G, s) == kv_total_bytes(G, s)
    rig = make_rig(2)
    layout = weights_layout(spec_of(G, quants=("Q8_0",)), "Q8_0")
    for ngl in (0, 3, G.n_layer + 1):
        p = auto_place(G, rig, s, ngl=ngl, tensor_split=[1.0, 1.0])
        loads = {d.device: d for d in device_loads(p, G, layout, rig, s)}
        fast = FitEvaluator(G, layout, rig, s).llama_cpp_tally(ngl, [0, 1], [1.0, 1.0])
        for dev, t in fast.items():
            assert t.kv_bytes == loads[dev].kv_bytes, (ngl, dev)
        assert sum(t.kv_bytes for t in fast.values()) == kv_total_bytes(G, s)


def test_window_only_layers_hold_neither_compressed_cache_nor_state() -> None:
    s = PlanSettings(context=65536)
    per_layer = kv_bytes_per_layer(G, s)
    window = 768 * 128 * 2  # pad256(128 + 512) cells of one 128-wide f16 K row
    assert per_layer[0] == per_layer[1] == window
    assert dsv4_layer_state_bytes(G, 0, s) == 0
    # CSA: 16384 compressed rows of K and of the indexer's 64-wide key, 2 x 2 f32 states
    csa = window + 16384 * (128 + 64) * 2 + 2 * 4 * 8 * (2 * 128 + 2 * 64)
    assert per_layer[2] == per_layer[4] == csa
    hca = window + 512 * 128 * 2 + 2 * 4 * 128 * 128  # pad256(65536 / 128) = 512 rows
    assert per_layer[3] == hca


def test_the_context_grows_compressed_caches_not_the_window() -> None:
    small, big = PlanSettings(context=32768), PlanSettings(context=65536)
    assert dsv4_layer_kv_bytes(G, 0, small) == dsv4_layer_kv_bytes(G, 0, big)
    assert dsv4_layer_kv_bytes(G, 2, big) > dsv4_layer_kv_bytes(G, 2, small)
