"""Decode reads of the hybrid and new MoE architectures: the recurrent state each layer
reads and writes back per token, and the weights a token reads (shared experts, dense
lead layers, latent MoE projections, MTP blocks skipped unless drafting)."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.catalog.models import load_entry
from rigspark_gui.core.memory import synth_rows, weights_layout
from rigspark_gui.core.model import Geometry, ModelSpec
from rigspark_gui.core.placement import FitEvaluator, auto_place, llama_cpp_ranges
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import bytes_read_per_token, estimate_decode, estimate_prefill
from rigspark_gui.core.speed.placed import state_traffic
from tests.conftest import make_rig, simple_speed_model, spec_of

S = PlanSettings(context=8192, prompt_tokens=512)


@cache
def _spec(model_id: str) -> ModelSpec:
    return load_entry(model_id).to_spec()


def _gpu_only(spec: ModelSpec, s: PlanSettings = S) -> dict[str, float]:
    g = spec.geometry
    rig = make_rig(1, vram_gib=200)
    p = auto_place(g, rig, s, ngl=g.n_layer + 1)
    return bytes_read_per_token(p, g, weights_layout(spec, "Q4_K_M"), s, 256)


def test_qwen35_moe_reads_and_writes_its_deltanet_state_every_token() -> None:
    """Qwen3.5-35B-A3B (config.json text_config: linear attention 16 key / 32 value heads
    of 128, conv kernel 4, 30 of 40 layers linear): conv rows 3 x (4096 + 2 x 16 x 128),
    delta-rule state 128 x 4096, f32, read and written back."""
    g = _spec("qwen3.5-35b-a3b").geometry
    per_layer = 2 * 4 * (3 * (32 * 128 + 2 * 16 * 128) + 128 * 32 * 128)
    table = state_traffic(g)
    assert sum(1 for b in table if b) == 30
    assert sum(table) == 30 * per_layer == 131_727_360
    assert table[3] == 0 and table[40] == 0  # an attention layer, the MTP block


def test_state_traffic_does_not_grow_with_parallel_sequences_or_drafting() -> None:
    """One token touches its own sequence's rows only."""
    spec = _spec("nemotron-3-nano-30b-a3b")
    one = _gpu_only(spec)
    four = _gpu_only(spec, replace(S, parallel=4))
    assert one["gpu:0"] == pytest.approx(four["gpu:0"], rel=1e-3)


def test_the_prefill_leaves_the_state_out() -> None:
    """A ubatch moves the state once: the prompt estimate is the same without it."""
    spec = _spec("qwen3.6-35b-a3b")
    g, layout = spec.geometry, weights_layout(spec, "Q4_K_M")
    rig, model = make_rig(2), simple_speed_model()
    p = auto_place(g, rig, S, ngl=g.n_layer + 1)
    with_state = bytes_read_per_token(p, g, layout, S, 0)
    without = bytes_read_per_token(p, g, layout, S, 0, state=False)
    assert sum(with_state.values()) - sum(without.values()) == pytest.approx(sum(state_traffic(g)))
    assert estimate_prefill(p, g, layout, rig, S, model).seconds is not None


@pytest.mark.parametrize(
    "model_id", ["qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b", "lfm2.5-vl-1.6b"]
)
def test_the_planner_fast_twin_reads_the_same_bytes(model_id: str) -> None:
    spec = _spec(model_id)
    g, layout = spec.geometry, weights_layout(spec, "Q4_K_M")
    rig = make_rig(2, vram_gib=200)
    split = [1.0, 1.0]
    p = auto_place(g, rig, S, ngl=g.n_layer + 1, tensor_split=split)
    ev = FitEvaluator(g, layout, rig, S)
    ranges = llama_cpp_ranges(g.n_layer, g.n_layer + 1, split, [0, 1])
    for state in (True, False):
        fast = ev.read_bytes(ranges, 300, state=state)
        slow = bytes_read_per_token(p, g, layout, S, 300, state=state)
        for dev in set(fast) | set(slow):
            assert fast.get(dev, 0.0) == pytest.approx(slow.get(dev, 0.0))


@settings(max_examples=25, deadline=None)
@given(
    grow=st.integers(min_value=1, max_value=1 << 20),
    depth=st.integers(min_value=1, max_value=8192),
)
def test_more_state_never_makes_decode_faster(grow: int, depth: int) -> None:
    g = _spec("qwen3.5-9b").geometry
    bigger = replace(g, recurrent_s_values=g.recurrent_s_values + grow)
    rig, model = make_rig(1, vram_gib=200), simple_speed_model()
    s = replace(S, prompt_tokens=depth)
    speeds = []
    for geo in (g, bigger):
        spec = spec_of(geo, "q35-9b")
        layout = weights_layout(spec, "Q4_K_M")
        p = auto_place(geo, rig, s, ngl=geo.n_layer + 1)
        t = estimate_decode(p, geo, layout, rig, s, model)
        assert t.tok_s is not None
        speeds.append(t.tok_s)
    assert speeds[1] < speeds[0]


@settings(max_examples=20, deadline=None)
@given(a=st.integers(min_value=0, max_value=4096), b=st.integers(min_value=0, max_value=4096))
def test_state_is_the_same_at_every_depth_and_kv_only_grows(a: int, b: int) -> None:
    spec = _spec("qwen3.6-27b")
    g, layout = spec.geometry, weights_layout(spec, "Q4_K_M")
    rig = make_rig(1, vram_gib=200)
    p = auto_place(g, rig, S, ngl=g.n_layer + 1)
    lo, hi = sorted((a, b))
    at = {d: bytes_read_per_token(p, g, layout, S, d)["gpu:0"] for d in (lo, hi)}
    bare = {d: bytes_read_per_token(p, g, layout, S, d, state=False)["gpu:0"] for d in (lo, hi)}
    assert at[lo] - bare[lo] == pytest.approx(sum(state_traffic(g)))
    assert at[hi] - bare[hi] == pytest.approx(sum(state_traffic(g)))
    assert at[lo] <= at[hi]


def _routed(g: Geometry, il: int) -> set[str]:
    return {r.name for r in synth_rows(g, "Q8_0") if r.layer == il and r.expert}


def _always(g: Geometry, il: int) -> set[str]:
    return {r.name for r in synth_rows(g, "Q8_0") if r.layer == il and not r.expert}


def test_shared_experts_latent_projections_and_lead_layers_are_read_whole() -> None:
    nemo = _spec("nemotron-3-super-120b-a12b").geometry
    moe_layer = next(i for i, f in enumerate(nemo.n_ff_per_layer or ()) if f)
    always = _always(nemo, moe_layer)
    p = f"blk.{moe_layer}."
    assert {p + "ffn_latent_down.weight", p + "ffn_up_shexp.weight"} <= always
    assert _routed(nemo, moe_layer) == {
        f"blk.{moe_layer}.ffn_up_exps.weight",
        f"blk.{moe_layer}.ffn_down_exps.weight",
    }
    glm = _spec("glm-4.7-flash").geometry  # first_k_dense_replace 1: layer 0 dense
    assert not _routed(glm, 0) and _routed(glm, 1)
    assert any("shexp" in n for n in _always(glm, 1))


@pytest.mark.parametrize(
    "model_id",
    ["qwen3.5-35b-a3b", "nemotron-3-super-120b-a12b", "glm-4.7-flash", "deepseek-v3.2"],
)
def test_mtp_blocks_are_not_read_when_not_drafting(model_id: str) -> None:
    spec = _spec(model_id)
    g = spec.geometry
    layout = weights_layout(spec, "Q4_K_M")
    assert g.n_layer_nextn == 1
    assert layout.block_bytes[g.n_layer - 1] <= 1024  # DSA loaders keep the router bias
    assert state_traffic(g)[g.n_layer - 1] == 0
    rig = make_rig(1, vram_gib=900)
    p = auto_place(g, rig, S, ngl=g.n_layer + 1)
    read = bytes_read_per_token(p, g, layout, S, 100)["gpu:0"]
    trunk = bytes_read_per_token(p, replace(g, n_layer_nextn=0), layout, S, 100)["gpu:0"]
    assert trunk - read == layout.block_bytes[g.n_layer - 1]


@pytest.mark.parametrize(
    ("model_id", "active_b"),
    [
        # OpenAI gpt-oss model card (https://openai.com/index/gpt-oss-model-card/):
        # 3.6B and 5.1B active parameters per token
        ("gpt-oss-20b", 3.6),
        ("gpt-oss-120b", 5.1),
        # Nemotron 3 Nano model card: 31.6B total, about 3.2B active (3.6B with embeddings)
        ("nemotron-3-nano-30b-a3b", 3.2),
    ],
)
def test_active_parameters_match_the_published_figures(model_id: str, active_b: float) -> None:
    spec = _spec(model_id)
    layout = weights_layout(spec, spec.available_quants[0])
    assert layout.n_active_params / 1e9 == pytest.approx(active_b, abs=0.06)
