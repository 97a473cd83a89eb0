"""Paths, fit, shortfall, recommendation and the KV comparison."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.core.errors import InvalidModelError, InvalidSettingsError
from rigspark_gui.core.model.ggml_types import KvCacheType as K
from rigspark_gui.core.plan.paths import PathName, Reason
from rigspark_gui.core.plan.planner import max_context, plan
from rigspark_gui.core.rig import GIB, Cpu, Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings, make_settings
from rigspark_gui.core.speed import SpeedModel
from tests.conftest import LLAMA_31_8B, make_rig, spec_of

LLAMA_70B = replace(LLAMA_31_8B, n_layer=80, n_embd=8192, n_head=64, n_ff=28672)


def test_8b_fits_one_3090_at_full_precision(llama8b, rig2x3090, perf) -> None:
    p = plan(llama8b, rig2x3090, PlanSettings(context=8192), perf)
    assert [x.path for x in p.paths] == [
        PathName.GPU,
        PathName.MULTI_GPU,
        PathName.CPU_OFFLOAD,
        PathName.CPU,
    ]
    gpu = p.paths[0]
    assert gpu.fits and gpu.quant == "BF16" and gpu.reason is None
    assert p.recommended is PathName.GPU
    assert gpu.throughput.known and 0 < gpu.throughput.low_tok_s < gpu.throughput.high_tok_s
    assert gpu.prefill.known


def test_70b_needs_two_gpus_and_reports_the_single_gpu_shortfall(rig2x3090, perf) -> None:
    p = plan(spec_of(LLAMA_70B), rig2x3090, PlanSettings(context=8192), perf)
    gpu = next(x for x in p.paths if x.path is PathName.GPU)
    assert not gpu.fits and gpu.reason is Reason.VRAM
    assert gpu.quant == "Q2_K"  # the smallest is what the shortfall is measured at
    assert gpu.shortfall_bytes and gpu.shortfall_bytes > 0
    multi = next(x for x in p.paths if x.path is PathName.MULTI_GPU)
    assert multi.fits and p.recommended is PathName.MULTI_GPU
    # the shortfall is exact: that much more usable memory makes the single GPU fit
    bigger = replace(
        rig2x3090,
        gpus=(replace(rig2x3090.gpus[0], memory_total_bytes=24 * GIB + gpu.shortfall_bytes),),
    )
    again = plan(spec_of(LLAMA_70B), bigger, PlanSettings(context=8192, quant="Q2_K"), perf)
    assert again.paths[0].fits


def test_cpu_only_rig_plans_only_the_cpu(llama8b, perf) -> None:
    rig = Rig(ram_total_bytes=32 * GIB, cpu=Cpu(memory_bandwidth_gbps=40.0))
    p = plan(llama8b, rig, PlanSettings(), perf)
    assert [x.path for x in p.paths] == [PathName.CPU]
    assert "no GPU" in p.notes[0]


def test_unified_memory_path(llama8b, perf) -> None:
    m2 = Gpu(
        name="Apple M2 Ultra",
        vendor=Vendor.APPLE,
        unified=True,
        memory_total_bytes=144 * GIB,
        bandwidth_gbps=800.0,
    )
    rig = Rig(gpus=(m2,), ram_total_bytes=192 * GIB, unified_memory=True)
    p = plan(llama8b, rig, PlanSettings(), perf)
    assert p.paths[0].path is PathName.UNIFIED and p.paths[0].fits


def test_context_beyond_training_is_context_bound(llama8b, rig2x3090, perf) -> None:
    p = plan(llama8b, rig2x3090, PlanSettings(context=200_000), perf)
    assert all(x.reason is Reason.CONTEXT and not x.fits for x in p.paths)
    assert p.recommended is None


def test_unknown_bandwidth_says_unknown(llama8b, perf) -> None:
    rig = Rig(ram_total_bytes=64 * GIB)
    p = plan(llama8b, rig, PlanSettings(), perf)
    assert not p.paths[0].throughput.known
    assert "CPU memory bandwidth" in p.paths[0].throughput.basis


def test_no_calibration_says_unknown(llama8b, rig2x3090) -> None:
    p = plan(llama8b, rig2x3090, PlanSettings(), SpeedModel())
    assert p.paths[0].throughput.basis.startswith("unknown: no speed calibration")


def test_bad_settings() -> None:
    with pytest.raises(InvalidSettingsError, match="needs flash attention"):
        make_settings(kv_v=K.Q4_0)
    with pytest.raises(InvalidSettingsError, match="vLLM option"):
        make_settings(kv_k=K.FP8, kv_v=K.FP8)
    with pytest.raises(InvalidSettingsError, match="context: 0 is out of range"):
        make_settings(context=0)
    with pytest.raises(InvalidSettingsError, match="kv_k"):
        make_settings(kv_k="q3")


def test_fixed_quant_must_exist(llama8b, rig2x3090, perf) -> None:
    with pytest.raises(InvalidModelError, match="no quantization 'Q9'"):
        plan(llama8b, rig2x3090, PlanSettings(quant="Q9"), perf)


def test_kv_comparison_rows(llama8b, rig2x3090, perf) -> None:
    p = plan(llama8b, rig2x3090, PlanSettings(context=32768), perf, kv_pairs="common")
    rows = {(r.kv_k, r.kv_v): r for r in p.kv_comparison}
    assert rows[(K.F16, K.F16)].kv_bytes == 4 * GIB
    assert rows[(K.Q4_0, K.Q4_0)].flash_attn  # quantized V brings flash attention
    gpu_f16 = next(lim for lim in rows[(K.F16, K.F16)].limits if lim.path is PathName.GPU)
    gpu_q4 = next(lim for lim in rows[(K.Q4_0, K.Q4_0)].limits if lim.path is PathName.GPU)
    assert gpu_q4.max_context >= gpu_f16.max_context > 0
    all_rows = plan(llama8b, rig2x3090, PlanSettings(), perf, kv_pairs="all").kv_comparison
    assert len(all_rows) == 81


# ---------------------------------------------------------------- properties

gib_sizes = st.integers(min_value=1, max_value=160)


@settings(max_examples=40, deadline=None)
@given(
    vram=gib_sizes,
    extra=st.integers(1, 64),
    ram=st.integers(8, 256),
    context=st.integers(256, 131072),
)
def test_more_memory_never_turns_a_fit_into_a_non_fit(vram, extra, ram, context) -> None:
    spec, s, perf = spec_of(LLAMA_70B), PlanSettings(context=context), SpeedModel()
    small = plan(spec, make_rig(2, ram_gib=ram, vram_gib=vram), s, perf)
    big = plan(spec, make_rig(2, ram_gib=ram + extra, vram_gib=vram + extra), s, perf)
    for a, b in zip(small.paths, big.paths, strict=True):
        assert a.path is b.path
        if a.fits:
            assert b.fits


KV_ORDER = [K.F32, K.F16, K.Q8_0, K.Q5_1, K.Q5_0, K.Q4_1, K.Q4_0]


@settings(max_examples=40, deadline=None)
@given(i=st.integers(0, len(KV_ORDER) - 2), context=st.integers(1, 131072))
def test_a_smaller_kv_type_never_needs_more_bytes(i, context) -> None:
    from rigspark_gui.core.memory import kv_total_bytes

    big, small = KV_ORDER[i], KV_ORDER[i + 1]
    s_big = PlanSettings(context=context, kv_k=big, kv_v=big, flash_attn=True)
    s_small = PlanSettings(context=context, kv_k=small, kv_v=small, flash_attn=True)
    assert kv_total_bytes(LLAMA_31_8B, s_small) <= kv_total_bytes(LLAMA_31_8B, s_big)


@settings(max_examples=25, deadline=None)
@given(vram=st.integers(4, 80), extra=st.integers(1, 40))
def test_max_context_is_monotone_in_memory(vram, extra) -> None:
    from rigspark_gui.core.plan.paths import PathCandidate

    spec, s = spec_of(LLAMA_31_8B), PlanSettings()
    cand = PathCandidate(PathName.GPU, [0])
    a = max_context(spec, make_rig(1, vram_gib=vram), s, cand, "Q4_K_M")
    b = max_context(spec, make_rig(1, vram_gib=vram + extra), s, cand, "Q4_K_M")
    assert b >= a
    assert a % 256 == 0


def test_two_gpus_at_a_better_quant_beat_one_gpu_at_q2(perf) -> None:
    # ~32B dense: fits one 24 GiB GPU only at Q2_K/Q3_K_M, both GPUs at Q6_K
    g = replace(LLAMA_31_8B, n_layer=64, n_embd=5120, n_head=40, n_ff=27648)
    p = plan(spec_of(g), make_rig(2), PlanSettings(context=8192), perf)
    gpu = next(x for x in p.paths if x.path is PathName.GPU)
    multi = next(x for x in p.paths if x.path is PathName.MULTI_GPU)
    assert gpu.fits and multi.fits
    assert p.recommended is PathName.MULTI_GPU
    assert spec_of(g).available_quants.index(multi.quant) < spec_of(g).available_quants.index(
        gpu.quant
    )


def test_cpu_path_counts_the_repack_buffer_on_avx2(llama8b, perf) -> None:
    plain = Rig(ram_total_bytes=64 * GIB, cpu=Cpu(memory_bandwidth_gbps=40.0))
    avx2 = replace(plain, cpu=replace(plain.cpu, features=("avx2",)))
    s = PlanSettings(quant="Q4_K_M", mmap=True)
    a = plan(llama8b, plain, s, perf).paths[0]
    b = plan(llama8b, avx2, s, perf).paths[0]
    # Q4_K weights get a CPU_REPACK copy on AVX2 (llama.cpp ggml-cpu repack.cpp), and
    # with the file mapped their pages stay resident beside it
    assert b.required_bytes > a.required_bytes + 3 * GIB
    assert a.cpu_loading is None and b.cpu_loading is not None
    assert b.cpu_loading.flag == ""
    # read in (the plan's own choice where the CPU repacks): held once
    c = plan(llama8b, avx2, replace(s, mmap=None), perf).paths[0]
    assert c.cpu_loading is not None and c.cpu_loading.flag == "--load-mode none"
    assert c.required_bytes < a.required_bytes + GIB // 4
    assert c.cpu_loading.mapped_required_bytes == b.required_bytes
