"""llama.cpp's placement rule and the pure placement edits."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.core.errors import InvalidPlacementError
from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.placement import (
    CPU,
    HEADROOM,
    FitEvaluator,
    Verdict,
    auto_place,
    device_loads,
    kv_devices,
    llama_cpp_slots,
    move_experts,
    move_layers,
)
from rigspark_gui.core.settings import Backend, PlanSettings
from rigspark_gui.core.speed import bytes_read_per_token
from tests.conftest import LLAMA_31_8B, make_rig, spec_of


def test_ngl_1_offloads_only_the_output_head() -> None:
    slots = llama_cpp_slots(32, 1, [1.0], [0])
    assert slots[32] == "gpu:0"
    assert set(slots[:32]) == {CPU}


def test_ngl_n_leaves_block_0_on_the_cpu() -> None:
    slots = llama_cpp_slots(32, 32, [1.0], [0])
    assert slots[0] == CPU and set(slots[1:]) == {"gpu:0"}


def test_ngl_0_and_full() -> None:
    assert set(llama_cpp_slots(32, 0, [1.0], [0])) == {CPU}
    assert set(llama_cpp_slots(32, 33, [1.0], [0])) == {"gpu:0"}
    assert set(llama_cpp_slots(32, 999, [1.0], [0])) == {"gpu:0"}


def test_tensor_split_3_to_1() -> None:
    slots = llama_cpp_slots(32, 33, [3.0, 1.0], [0, 1])
    # fraction i/33 < 0.75 -> GPU 0: slots 0..24 (24/33 = 0.727), 25.. -> GPU 1
    assert slots.count("gpu:0") == 25 and slots.count("gpu:1") == 8
    assert slots[-1] == "gpu:1"


def test_default_split_follows_free_memory() -> None:
    rig = make_rig(2)
    p = auto_place(LLAMA_31_8B, rig, PlanSettings())
    devices = [u.device for u in p.units]
    assert devices[0] == CPU  # input embedding
    assert devices[1:].count("gpu:0") == devices[1:].count("gpu:1") + 1


def test_bad_split_and_gpu() -> None:
    with pytest.raises(InvalidPlacementError, match="lists 1 values for 2 GPUs"):
        llama_cpp_slots(32, 33, [1.0], [0, 1])
    with pytest.raises(InvalidPlacementError, match="no GPU 3"):
        auto_place(LLAMA_31_8B, make_rig(2), PlanSettings(), gpu_ids=[3])


def test_move_layers_is_pure_and_checked() -> None:
    p = auto_place(LLAMA_31_8B, make_rig(1), PlanSettings())
    moved = move_layers(p, ["blk.3", "blk.4"], CPU)
    assert moved.unit("blk.3").device == CPU and p.unit("blk.3").device == "gpu:0"
    with pytest.raises(InvalidPlacementError, match="no device 'gpu:7'"):
        move_layers(p, ["blk.3"], "gpu:7")
    with pytest.raises(InvalidPlacementError, match=r"no unit 'blk\.99'"):
        move_layers(p, ["blk.99"], CPU)
    with pytest.raises(InvalidPlacementError, match="input embedding always stays"):
        move_layers(p, ["input"], "gpu:0")


def test_moving_experts_moves_their_bytes() -> None:
    g = replace(LLAMA_31_8B, n_ff=0, n_expert=8, n_expert_used=2, n_ff_expert=4096)
    rig, s = make_rig(1, vram_gib=80), PlanSettings()
    layout = weights_layout(spec_of(g), "Q4_K_M")
    p = auto_place(g, rig, s)
    q = move_experts(p, ["blk.0", "blk.1"], CPU)
    before = {d.device: d for d in device_loads(p, g, layout, rig, s)}
    after = {d.device: d for d in device_loads(q, g, layout, rig, s)}
    moved = layout.block_expert_bytes[0] + layout.block_expert_bytes[1]
    assert after[CPU].weights_bytes - before[CPU].weights_bytes == moved
    assert before["gpu:0"].weights_bytes - after["gpu:0"].weights_bytes == moved
    assert after["gpu:0"].kv_bytes == before["gpu:0"].kv_bytes  # attention stays


@settings(max_examples=60, deadline=None)
@given(
    ngl=st.integers(0, 40),
    split=st.lists(st.floats(0.1, 10), min_size=2, max_size=2),
    context=st.integers(1, 65536),
    kv=st.sampled_from([KvCacheType.F16, KvCacheType.Q8_0, KvCacheType.Q4_0]),
    flash_attn=st.booleans(),
)
def test_fast_tally_agrees_with_device_loads(
    ngl: int, split: list[float], context: int, kv: KvCacheType, flash_attn: bool
) -> None:
    # the cached cells and compute buffers are shared across KV types: vary them too
    kv_v = kv if flash_attn else KvCacheType.F16
    s = PlanSettings(context=context, kv_k=kv, kv_v=kv_v, flash_attn=flash_attn)
    rig = make_rig(2)
    layout = weights_layout(spec_of(LLAMA_31_8B), "Q4_K_M")
    p = auto_place(LLAMA_31_8B, rig, s, ngl=ngl, tensor_split=split)
    loads = {d.device: d for d in device_loads(p, LLAMA_31_8B, layout, rig, s)}
    fast = FitEvaluator(LLAMA_31_8B, layout, rig, s).llama_cpp_tally(ngl, [0, 1], split)
    for dev, t in fast.items():
        assert (t.weights_bytes, t.kv_bytes, t.compute_bytes) == (
            loads[dev].weights_bytes,
            loads[dev].kv_bytes,
            loads[dev].compute_bytes,
        )


def _reference_slots(n_layer, ngl, split, gpu_ids):
    """llama.cpp's loop, slot by slot, with numpy float32 arithmetic."""
    import bisect

    import numpy as np

    slots = n_layer + 1
    start = max(slots - ngl, 0)
    active = min(ngl, slots)
    f = np.float32
    acc = f(0)
    cum = []
    for x in split:
        acc = f(acc + f(x))
        cum.append(acc)
    bounds = [f(c / acc) for c in cum]
    out = []
    for il in range(slots):
        if il < start or il - start >= active:
            out.append(CPU)
            continue
        k = bisect.bisect_right(bounds, f(f(il - start) / f(active)))
        out.append(f"gpu:{gpu_ids[min(k, len(gpu_ids) - 1)]}")
    return out


@settings(max_examples=300, deadline=None)
@given(
    n_layer=st.integers(1, 130),
    ngl=st.integers(0, 140),
    split=st.lists(
        st.one_of(st.integers(0, 8).map(float), st.floats(1e9, 9e10)), min_size=1, max_size=4
    ).filter(lambda s: sum(s) > 0),
)
def test_ranges_match_llama_cpp_loop(n_layer, ngl, split) -> None:
    ids = list(range(len(split)))
    assert llama_cpp_slots(n_layer, ngl, split, ids) == _reference_slots(n_layer, ngl, split, ids)


@settings(max_examples=40, deadline=None)
@given(vram=st.integers(2, 40), context=st.integers(256, 65536), n_gpus=st.integers(1, 3))
def test_max_ngl_is_the_largest_ngl_whose_gpus_fit(vram, context, n_gpus) -> None:
    rig, s = make_rig(n_gpus, vram_gib=vram), PlanSettings(context=context)
    layout = weights_layout(spec_of(LLAMA_31_8B), "Q8_0")
    ev = FitEvaluator(LLAMA_31_8B, layout, rig, s)
    ids = list(range(n_gpus))

    def fits(ngl: int) -> bool:
        return all(t.fits for d, t in ev.llama_cpp_tally(ngl, ids).items() if d != CPU)

    best = max((k for k in range(LLAMA_31_8B.n_layer + 2) if fits(k)), default=0)
    assert ev.max_ngl(ids) == best


@settings(max_examples=40, deadline=None)
@given(
    ngl=st.integers(0, 33),
    features=st.sampled_from([(), ("avx2",), ("avx2", "avx512")]),
    quant=st.sampled_from(["Q4_K_M", "Q8_0", "Q4_0"]),
)
def test_repack_is_counted_the_same_by_both_tallies(ngl, features, quant) -> None:
    from rigspark_gui.core.memory import repack_for

    spec = spec_of(LLAMA_31_8B, quants=("Q4_K_M", "Q8_0", "Q4_0"))
    rig, s = make_rig(1), PlanSettings(context=4096)
    layout = weights_layout(spec, quant)
    repack = repack_for(spec, quant, features)
    p = auto_place(LLAMA_31_8B, rig, s, ngl=ngl)
    loads = {d.device: d for d in device_loads(p, LLAMA_31_8B, layout, rig, s, cpu_repack=repack)}
    fast = FitEvaluator(LLAMA_31_8B, layout, rig, s, repack).llama_cpp_tally(ngl, [0])
    assert fast[CPU].weights_bytes == loads[CPU].weights_bytes
    if features and quant != "Q8_0" and ngl < 33:
        assert repack is not None and loads[CPU].weights_bytes > layout.input_bytes


def _loads(p, s):
    layout = weights_layout(spec_of(LLAMA_31_8B), "Q4_K_M")
    return {d.device: d for d in device_loads(p, LLAMA_31_8B, layout, make_rig(1), s)}, layout


def test_a_layer_moved_off_its_base_device_leaves_its_kv_behind() -> None:
    """llama.cpp allocates a layer's cache on the -ngl device (model.dev_layer), not
    where -ot moves its weights: the lanes must count it there."""
    s = PlanSettings(context=8192)
    full = auto_place(LLAMA_31_8B, make_rig(1), s)
    moved = move_layers(full, ["blk.10"], CPU)
    assert kv_devices(moved, s)[10] == "gpu:0"
    before, layout = _loads(full, s)
    after, _ = _loads(moved, s)
    assert after["gpu:0"].kv_bytes == before["gpu:0"].kv_bytes  # the KV stayed
    assert after[CPU].kv_bytes == 0
    assert before["gpu:0"].weights_bytes - after["gpu:0"].weights_bytes == layout.block_bytes[10]
    # and the other way: a layer pulled onto the GPU from the offloaded-to-CPU range
    partial = auto_place(LLAMA_31_8B, make_rig(1), s, ngl=20)  # blocks 0..12 on the CPU
    pulled = move_layers(partial, ["blk.3"], "gpu:0")
    assert kv_devices(pulled, s)[3] == CPU
    a, _ = _loads(partial, s)
    b, _ = _loads(pulled, s)
    assert (a[CPU].kv_bytes, a["gpu:0"].kv_bytes) == (b[CPU].kv_bytes, b["gpu:0"].kv_bytes)


def test_engines_without_layer_overrides_keep_kv_with_the_block() -> None:
    s = PlanSettings(context=8192)
    moved = move_layers(auto_place(LLAMA_31_8B, make_rig(1), s), ["blk.10"], CPU)
    vllm = replace(s, backend=Backend.VLLM)
    assert kv_devices(moved, vllm)[10] == CPU
    assert kv_devices(moved, s)[10] == "gpu:0"


def test_decode_reads_a_moved_layers_kv_from_where_it_stays() -> None:
    s = PlanSettings(context=8192)
    moved = move_layers(auto_place(LLAMA_31_8B, make_rig(1), s), ["blk.10"], CPU)
    layout = weights_layout(spec_of(LLAMA_31_8B), "Q4_K_M")
    reads = bytes_read_per_token(moved, LLAMA_31_8B, layout, s, 8192)
    assert reads[CPU] == layout.block_bytes[10]  # its weights only (the input is a lookup)


def _gpu_compute(p, rig, s) -> dict[str, int]:
    layout = weights_layout(spec_of(LLAMA_31_8B), "Q4_K_M")
    return {d.device: d.compute_bytes for d in device_loads(p, LLAMA_31_8B, layout, rig, s)}


def test_pipeline_copies_only_where_llama_cpp_turns_them_on() -> None:
    """llama.cpp keeps 4 copies of each device's inputs (activation row, f32 KQ mask)
    when it sees several GPUs and everything is offloaded without -ot; one GPU in use, a
    layer on the CPU or an -ot rule turn it off."""
    s = PlanSettings(context=8192)
    row, mask, scores = 4 * 4096 * 512, 4 * 8192 * 512, 4 * 8192 * 512 * 32
    single = scores + mask + 4 * row  # the attention phase with one copy of the mask
    piped = scores + 4 * row + 4 * (row + mask)
    rig1, rig2 = make_rig(1), make_rig(2)
    assert _gpu_compute(auto_place(LLAMA_31_8B, rig1, s), rig1, s)["gpu:0"] == single
    both = _gpu_compute(auto_place(LLAMA_31_8B, rig2, s), rig2, s)
    assert both["gpu:0"] == both["gpu:1"] == piped
    layout = weights_layout(spec_of(LLAMA_31_8B), "Q4_K_M")
    loads = device_loads(auto_place(LLAMA_31_8B, rig2, s), LLAMA_31_8B, layout, rig2, s)
    assert [x.input_copies for x in loads] == [4, 4, 4]  # cpu (host mask), gpu:0, gpu:1
    # one GPU of two: the launch command hides the other, so llama.cpp sees one
    lone = _gpu_compute(auto_place(LLAMA_31_8B, rig2, s, tensor_split=[1, 0]), rig2, s)
    assert lone["gpu:0"] == single
    partial = auto_place(LLAMA_31_8B, rig2, s, ngl=20)
    overridden = move_layers(auto_place(LLAMA_31_8B, rig2, s), ["blk.3"], "gpu:1")
    for p in (partial, overridden):
        gpus = {d: c for d, c in _gpu_compute(p, rig2, s).items() if d != CPU}
        assert set(gpus.values()) == {single}, gpus


def test_without_room_for_pipeline_copies_llama_cpp_runs_without_them() -> None:
    """llama.cpp retries without pipeline parallelism when its copies do not fit
    (llama-context.cpp); the plan counts what it then allocates, and both tallies agree."""
    s = PlanSettings(context=8192)
    layout = weights_layout(spec_of(LLAMA_31_8B), "Q4_K_M")
    roomy = make_rig(2)
    p = auto_place(LLAMA_31_8B, roomy, s, tensor_split=[1, 1])
    piped = {d.device: d for d in device_loads(p, LLAMA_31_8B, layout, roomy, s)}
    extra = 4 * (4 * 4096 * 512 + 4 * 8192 * 512) - 4 * 8192 * 512
    # GPUs just big enough without the copies (5 % headroom), not with them
    need = max(piped[d].total_bytes - piped[d].reserve_bytes for d in ("gpu:0", "gpu:1"))
    size = piped["gpu:0"].reserve_bytes + int((need - extra // 2) / (1 - HEADROOM))
    gpus = tuple(replace(g, memory_total_bytes=size) for g in roomy.gpus)
    tight = replace(roomy, gpus=gpus)
    loads = {d.device: d for d in device_loads(p, LLAMA_31_8B, layout, tight, s)}
    assert loads["gpu:0"].compute_bytes == piped["gpu:0"].compute_bytes - extra
    assert all(x.verdict is not Verdict.OVER for x in loads.values())
    fast = FitEvaluator(LLAMA_31_8B, layout, tight, s).llama_cpp_tally(33, [0, 1], [1, 1])
    assert fast["gpu:0"].compute_bytes == loads["gpu:0"].compute_bytes


def test_units_are_named_in_words_on_every_surface() -> None:
    from rigspark_gui.core.placement import INPUT, OUTPUT, unit_label, units_span

    assert unit_label("blk.12") == "layer 12"
    assert unit_label(INPUT) == "input embedding" and unit_label(OUTPUT) == "output head"
    units = (INPUT, "blk.0", "blk.1", "blk.2", "blk.5", "blk.7", "blk.8", OUTPUT)
    assert units_span(units) == "input embedding, layers 0–2, layer 5, layers 7–8, output head"
    assert units_span(()) == "—"
