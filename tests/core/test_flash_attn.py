"""Flash attention per device as llama.cpp b11434 decides it: each backend's support
check for a K/V pair and head size, what `-fa auto` makes of the devices holding the
layers, and where a user sees a pair without a kernel of the GPUs' own (the KV
comparison, the prefill estimate, the llama-server command)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rigspark_gui.core.flash_attn import (
    FaWhere,
    attention_shape,
    auto_note,
    flash_attn_support,
    native_backend,
    resolve_flash_attn_auto,
)
from rigspark_gui.core.launch import llama_server_command
from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.model import KvCacheType as K
from rigspark_gui.core.placement import auto_place, uniform_placement
from rigspark_gui.core.plan import plan
from rigspark_gui.core.rig import Gpu, Host, Vendor
from rigspark_gui.core.settings import GpuBackend as B
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed import estimate_prefill
from tests.conftest import GIB, LLAMA_31_8B, make_rig, simple_speed_model

# DeepSeek-V2-Lite's attention: MLA, latent 512 + rope 64, 16 query heads
MLA = replace(
    LLAMA_31_8B,
    architecture="deepseek2",
    n_head=16,
    n_head_kv=16,
    head_dim_k=192,
    head_dim_v=128,
    kv_lora_rank=512,
    rope_head_dim=64,
)


def where(backend, k, v, dk=128, dv=128, gqa=4, vendor=None):
    return flash_attn_support(backend, vendor, k, v, dk, dv, gqa_ratio=gqa).where


@pytest.mark.parametrize("backend", [B.CUDA, B.ROCM])
def test_cuda_and_hip_pairs(backend) -> None:
    # ggml/CMakeLists.txt GGML_CUDA_FA_QUANTS default: these decode kernels are compiled
    for pair in [(K.F16, K.F16), (K.Q8_0, K.Q8_0), (K.Q4_0, K.Q4_0), (K.BF16, K.BF16)]:
        assert where(backend, *pair) is FaWhere.NATIVE, pair
    # llama-graph.cpp build_attn_mha casts f32 K/V to f16 before the op
    assert where(backend, K.F32, K.F32) is FaWhere.NATIVE
    # fattn.cu ggml_cuda_flash_attn_ext_vec: any other pair of supported types converts
    # K and V to f16 first, on the GPU
    for pair in [(K.Q8_0, K.Q4_0), (K.F16, K.Q8_0), (K.Q5_0, K.Q5_0), (K.Q4_1, K.Q4_1)]:
        assert where(backend, *pair) is FaWhere.GPU_F16, pair
    # ... only at head sizes the vector kernel exists for (64/128/256): the tile/MMA
    # kernels used at 80 convert every type alike
    assert where(backend, K.Q8_0, K.Q4_0, 80, 80) is FaWhere.NATIVE
    # ggml_cuda_fattn_kv_type_supported: no iq4_nl
    assert where(backend, K.IQ4_NL, K.IQ4_NL) is FaWhere.CPU
    assert where(backend, K.F16, K.IQ4_NL) is FaWhere.CPU
    # ggml_cuda_get_best_fattn_kernel's head sizes
    assert where(backend, K.F16, K.F16, 100, 100) is FaWhere.CPU
    assert where(backend, K.F16, K.F16, 576, 512, gqa=16) is FaWhere.NATIVE
    assert where(backend, K.F16, K.F16, 576, 512, gqa=1) is FaWhere.CPU  # no GQA opt
    assert where(backend, K.F16, K.F16, 192, 128, gqa=8) is FaWhere.NATIVE
    assert where(backend, K.F16, K.F16, 192, 128, gqa=4) is FaWhere.CPU  # gqa % 8
    support = flash_attn_support(backend, None, K.Q8_0, K.Q4_0, 128, 128)
    assert support.supported and "q8_0/q4_0" in support.reason
    assert "ggml_cuda_flash_attn_ext_vec" in support.reason


def test_vulkan_pairs() -> None:
    # ggml_backend_vk_device_supports_op: any mix of its types, bf16 with bf16 only
    assert where(B.VULKAN, K.Q8_0, K.Q4_0) is FaWhere.NATIVE
    assert where(B.VULKAN, K.IQ4_NL, K.Q4_0) is FaWhere.NATIVE
    assert where(B.VULKAN, K.BF16, K.BF16) is FaWhere.NATIVE
    assert where(B.VULKAN, K.F16, K.BF16) is FaWhere.CPU
    assert where(B.VULKAN, K.F16, K.F16, 100, 100) is FaWhere.CPU  # HSK % 8
    assert where(B.VULKAN, K.F16, K.F16, 576, 512, gqa=1) is FaWhere.NATIVE


def test_metal_pairs() -> None:
    # ggml_metal_device_supports_op: K and V one type, no iq4_nl, its list of head sizes
    assert where(B.METAL, K.Q8_0, K.Q8_0) is FaWhere.NATIVE
    assert where(B.METAL, K.Q8_0, K.Q4_0) is FaWhere.CPU
    assert where(B.METAL, K.IQ4_NL, K.IQ4_NL) is FaWhere.CPU
    assert where(B.METAL, K.F16, K.F16, 576, 512) is FaWhere.NATIVE
    assert where(B.METAL, K.F16, K.F16, 100, 100) is FaWhere.CPU
    assert where(B.METAL, K.F16, K.F16, 128, 256) is FaWhere.CPU  # K head below V's


def test_sycl_pairs() -> None:
    # ggml_sycl_get_best_fattn_kernel with GGML_SYCL_FA_ALL_QUANTS (common.hpp): K's type
    # is checked, V's is not; the decode kernel then has no iq4_nl V case and aborts
    assert where(B.SYCL, K.Q8_0, K.Q4_0) is FaWhere.NATIVE
    assert where(B.SYCL, K.IQ4_NL, K.IQ4_NL) is FaWhere.CPU
    assert where(B.SYCL, K.F16, K.IQ4_NL) is FaWhere.FAILS
    assert where(B.SYCL, K.F16, K.F16, 192, 128, gqa=8) is FaWhere.CPU


def test_the_cpu_runs_everything_and_none_means_the_vendors_own() -> None:
    assert flash_attn_support(None, None, K.IQ4_NL, K.Q5_1, 100, 60).supported
    assert where(None, K.Q8_0, K.Q4_0, vendor=Vendor.NVIDIA) is FaWhere.GPU_F16  # CUDA
    assert where(None, K.Q8_0, K.Q4_0, vendor=Vendor.APPLE) is FaWhere.CPU  # Metal
    assert where(None, K.Q8_0, K.Q4_0, vendor=Vendor.OTHER) is FaWhere.NATIVE  # Vulkan
    assert native_backend(Vendor.AMD) is B.ROCM and native_backend(Vendor.OTHER) is B.VULKAN


def test_mla_attends_over_the_latent_cache() -> None:
    shape = attention_shape(MLA)
    assert (shape.head_dim_k, shape.head_dim_v, shape.gqa_ratio) == (576, 512, 16)
    plain = attention_shape(LLAMA_31_8B)
    assert (plain.head_dim_k, plain.head_dim_v, plain.gqa_ratio) == (128, 128, 4)


def test_auto_is_on_only_when_every_layer_device_runs_it() -> None:
    rig = make_rig(2)
    devices = ["gpu:0"] * 16 + ["gpu:1"] * 15 + ["cpu"]
    on, answers = resolve_flash_attn_auto(rig, devices, K.F16, K.F16, LLAMA_31_8B)
    assert on and set(answers) == {"gpu:0", "gpu:1", "cpu"}
    assert auto_note(on, answers, LLAMA_31_8B) == ""
    # a K type CUDA refuses: the probe sees FLASH_ATTN_EXT leave the layer's device
    on, answers = resolve_flash_attn_auto(rig, devices, K.IQ4_NL, K.F16, LLAMA_31_8B)
    assert not on and not answers["gpu:0"].supported and answers["cpu"].supported
    assert auto_note(on, answers, LLAMA_31_8B).startswith("on gpu:0, CUDA:")
    # a quantized V cache turns auto on before the probe: attention goes to the CPU
    on, answers = resolve_flash_attn_auto(rig, devices, K.IQ4_NL, K.IQ4_NL, LLAMA_31_8B)
    assert on and answers["gpu:0"].where is FaWhere.CPU
    assert "quantized V cache keeps" in auto_note(on, answers, LLAMA_31_8B)
    # a decode kernel converting to f16 is still the GPU's: auto stays on
    assert resolve_flash_attn_auto(rig, devices, K.Q8_0, K.F16, LLAMA_31_8B)[0]
    # only the CPU: always
    assert resolve_flash_attn_auto(rig, ["cpu"], K.IQ4_NL, K.F16, LLAMA_31_8B)[0]
    # Grok: off whatever the devices say (llama_init_from_model)
    grok = replace(LLAMA_31_8B, architecture="grok")
    assert not resolve_flash_attn_auto(rig, devices, K.F16, K.F16, grok)[0]
    # the rig's backend choice decides: under Vulkan iq4_nl K runs on the GPUs
    assert resolve_flash_attn_auto(rig, devices, K.IQ4_NL, K.F16, LLAMA_31_8B, B.VULKAN)[0]


def test_a_gpu_over_rpc_accepts_every_op() -> None:
    rig = make_rig(2)
    remote = Gpu(name="GPU r", vendor=Vendor.NVIDIA, memory_total_bytes=24 * GIB, host="b")
    rig = replace(rig, gpus=(*rig.gpus, remote), hosts=(Host(name="b"),))
    on, answers = resolve_flash_attn_auto(rig, ["gpu:2"], K.IQ4_NL, K.F16, LLAMA_31_8B)
    assert on  # ggml_backend_rpc_device_supports_op returns true
    assert answers["gpu:2"].where is FaWhere.FAILS and "RPC" in answers["gpu:2"].reason


def test_the_kv_comparison_flags_q8_q4_on_an_rtx_3090_rig(llama8b, rig2x3090, perf) -> None:
    p = plan(llama8b, rig2x3090, PlanSettings(), perf, kv_pairs="common")
    rows = {(r.kv_k, r.kv_v): r for r in p.kv_comparison}
    row = rows[(K.Q8_0, K.Q4_0)]
    assert row.flash_attn and row.fa_where == "gpu-f16" and not row.advised
    assert "q8_0/q4_0" in row.speed_note and "GGML_CUDA_FA_QUANTS" in row.speed_note
    for pair in [(K.Q8_0, K.Q8_0), (K.Q4_0, K.Q4_0)]:
        assert rows[pair].advised and rows[pair].fa_where == "native"
    assert rows[(K.F16, K.F16)].fa_where == ""  # flash attention off: nothing to say
    assert not rows[(K.IQ4_NL, K.IQ4_NL)].advised


def test_prefill_is_unknown_when_attention_leaves_the_gpu(llama8b) -> None:
    rig = make_rig(1, vram_gib=48)
    g, layout = llama8b.geometry, weights_layout(llama8b, "Q4_K_M")
    for kv, known in [(K.Q8_0, True), (K.IQ4_NL, False)]:
        s = PlanSettings(kv_k=kv, kv_v=kv, flash_attn=True)
        f = estimate_prefill(
            uniform_placement(g, rig, s, "gpu:0"), g, layout, rig, s, simple_speed_model()
        )
        assert f.known is known, kv
        if not known:
            assert f.seconds is None and f.basis.startswith("unknown: gpu:0: CUDA")
    # on the CPU path nothing leaves a GPU
    s = PlanSettings(kv_k=K.IQ4_NL, kv_v=K.IQ4_NL, flash_attn=True)
    f = estimate_prefill(
        uniform_placement(g, rig, s, "cpu"), g, layout, rig, s, simple_speed_model()
    )
    assert "CUDA" not in f.basis


def test_the_launch_command_warns_of_a_pair_without_a_gpu_kernel(llama8b) -> None:
    rig = make_rig(1)
    for kv_v, words in [(K.Q4_0, "converts the whole K and V to f16"), (K.IQ4_NL, "on the CPU")]:
        s = PlanSettings(kv_k=K.Q8_0 if kv_v is K.Q4_0 else kv_v, kv_v=kv_v, flash_attn=True)
        cmd = llama_server_command(auto_place(LLAMA_31_8B, rig, s), llama8b, "Q4_K_M", s, rig)
        warning = [n for n in cmd.notes if n.startswith("warning: -fa on")]
        assert len(warning) == 1 and words in warning[0], cmd.notes
    s = PlanSettings(kv_k=K.Q8_0, kv_v=K.Q8_0, flash_attn=True)
    cmd = llama_server_command(auto_place(LLAMA_31_8B, rig, s), llama8b, "Q4_K_M", s, rig)
    assert not any(n.startswith("warning:") for n in cmd.notes)
    # the same pair under a Vulkan build has its kernel
    s = PlanSettings(kv_k=K.Q8_0, kv_v=K.Q4_0, flash_attn=True)
    placement = auto_place(LLAMA_31_8B, rig, s)
    cmd = llama_server_command(placement, llama8b, "Q4_K_M", s, rig, gpu_backend="Vulkan")
    assert not any(n.startswith("warning:") for n in cmd.notes)
