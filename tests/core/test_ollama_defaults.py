"""What Ollama >= 0.30 decides by itself (core/launch/ollama_defaults.py), with the
numbers of Ollama's own source: server/routes.go (47/23 GiB context tiers),
server/sched.go (retry, parallel, batch), llm/llama_server.go (llama-server flags,
projector margin, ps memory), ml/device.go (flash attention), cmd/cmd.go and
format/bytes_test.go (`ollama ps`); and the Ollama recipe that writes only what differs."""

from dataclasses import replace

import pytest

from rigspark_gui.core.launch import ollama_command
from rigspark_gui.core.launch.ollama_defaults import (
    LLAMA_FIT_MARGIN,
    OLLAMA_VERSIONS,
    ollama_context,
    ollama_context_fallback,
    ollama_fit_margin,
    ollama_flash_attn,
    ollama_generation_batch,
    ollama_llama_server_args,
    ollama_num_parallel,
    ollama_predicted_vram,
    ollama_projector_on_cpu,
    ollama_ps_processor,
    ollama_ps_size,
    ollama_ps_total,
    ollama_single_gpu,
    ollama_total_vram,
)
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.model.model_spec import ModelSpec
from rigspark_gui.core.placement import auto_place, even_split
from rigspark_gui.core.rig import Gpu, Rig, Vendor
from rigspark_gui.core.settings import PlanSettings
from tests.conftest import LLAMA_31_8B, make_rig

GIB = 1 << 30
MIB = 1 << 20


def _gpu(name: str = "GPU", vendor: Vendor = Vendor.NVIDIA, cc: str | None = None, **kw) -> Gpu:
    kw.setdefault("memory_total_bytes", 24 * GIB)
    return Gpu(name=name, vendor=vendor, compute_capability=cc, **kw)


def test_versions_modelled() -> None:
    assert OLLAMA_VERSIONS == ">= 0.30"


# ---------------------------------------------------------------- context


@pytest.mark.parametrize(
    ("vram", "expected"),
    [
        (0, 4096),  # CPU only
        (23 * GIB - 1, 4096),
        (23 * GIB, 32768),  # the tier edge itself counts (>=)
        (24 * GIB, 32768),
        (47 * GIB - 1, 32768),
        (47 * GIB, 262144),
        (80 * GIB, 262144),
    ],
)
def test_default_context_by_total_vram(vram: int, expected: int) -> None:
    assert ollama_context(vram, 1 << 20) == expected


def test_default_context_is_capped_at_the_trained_context() -> None:
    assert ollama_context(80 * GIB, 131072) == 131072
    assert ollama_context(24 * GIB, 8192) == 8192
    assert ollama_context(0, 2048) == 2048
    assert ollama_context(80 * GIB, 0) == 262144  # trained context unknown: no cap


def test_ollama_context_length_overrides_the_tier_but_not_the_cap() -> None:
    assert ollama_context(80 * GIB, 131072, env_context=16384) == 16384
    assert ollama_context(0, 131072, env_context=65536) == 65536
    assert ollama_context(0, 8192, env_context=65536) == 8192
    assert ollama_context(24 * GIB, 131072, env_context=0) == 32768  # 0 = unset
    assert ollama_context(24 * GIB, 131072, env_context=1) == 4  # at least 4
    assert ollama_context(0, 131072, env_context=1000, vision=True) == 2048


def test_total_vram_sums_local_gpus_less_the_overhead() -> None:
    two = [_gpu(), _gpu()]
    assert ollama_total_vram(two) == 48 * GIB
    assert ollama_context(ollama_total_vram(two), 131072) == 131072  # 2x24 GiB: >= 47
    assert ollama_total_vram(two, gpu_overhead=GIB) == 46 * GIB  # OLLAMA_GPU_OVERHEAD
    remote = _gpu(host="box2")
    assert ollama_total_vram([_gpu(), remote]) == 24 * GIB
    free_only = _gpu(memory_total_bytes=None, memory_free_bytes=20 * GIB)
    assert ollama_total_vram([free_only]) == 20 * GIB
    assert ollama_total_vram([]) == 0


@pytest.mark.parametrize(
    ("context", "retry"),
    [
        (262144, 32768),
        (131072, 32768),
        (32769, 32768),
        (32768, 4096),
        (8192, 4096),
        (4097, 4096),
        (4096, None),
        (2048, None),
    ],
)
def test_one_retry_at_a_lower_context_after_running_out_of_memory(
    context: int, retry: int | None
) -> None:
    assert ollama_context_fallback(context) == retry


def test_parallel_defaults_to_one_and_some_architectures_never_run_more() -> None:
    assert ollama_num_parallel(None, "llama") == 1
    assert ollama_num_parallel(0, "llama") == 1
    assert ollama_num_parallel(4, "llama") == 4
    assert ollama_num_parallel(4, "qwen35moe") == 1
    assert ollama_num_parallel(4, "nemotron_h") == 1
    assert ollama_num_parallel(4, "bert", embedding=True) == 1


# ---------------------------------------------------------------- flash attention


@pytest.mark.parametrize(
    ("gpus", "on"),
    [
        ([], True),  # CPU: auto
        ([_gpu(cc="8.6")], True),
        ([_gpu(cc="6.0")], True),
        ([_gpu(cc="7.5")], True),
        ([_gpu(cc="12.0")], True),
        ([_gpu(cc=None)], True),  # unknown: auto, as Ollama with an unknown driver
        ([_gpu(cc="5.2")], False),  # Maxwell
        ([_gpu(cc="3.7")], False),
        ([_gpu(cc="7.2")], False),  # Jetson Xavier
        ([_gpu(cc="8.6"), _gpu(cc="5.0")], False),  # one unsupported GPU turns it off
        ([_gpu(vendor=Vendor.AMD, cc="5.0")], True),  # not CUDA: ROCm/Vulkan always qualify
        ([_gpu(vendor=Vendor.APPLE)], True),
    ],
)
def test_flash_attention_is_auto_except_on_old_cuda(gpus: list[Gpu], on: bool) -> None:
    flash, why = ollama_flash_attn(gpus)
    assert flash is on
    assert ("auto" in why) is on
    if not on:
        assert "compute capability" in why


def test_ollama_flash_attention_env_decides() -> None:
    assert ollama_flash_attn([_gpu(cc="5.2")], env=True)[0] is True
    assert ollama_flash_attn([_gpu(cc="8.9")], env=False) == (
        False,
        "OLLAMA_FLASH_ATTENTION=0: flash attention off",
    )


# ---------------------------------------------------------------- llama-server


def test_llama_server_args_as_ollama_passes_them() -> None:
    assert ollama_llama_server_args(32768, 1, None, None, None) == [
        "-c", "32768", "-np", "1", "--flash-attn", "auto", "-b", "512", "-ub", "512",
    ]  # fmt: skip
    assert ollama_llama_server_args(8192, 4, 20, "Q8_0", None, num_batch=1024) == [
        "-c", "32768", "-np", "4",
        "--cache-type-k", "q8_0", "--cache-type-v", "q8_0",
        "--flash-attn", "auto",
        "-b", "1024", "-ub", "1024",
        "-ngl", "20",
    ]  # fmt: skip
    cpu = ollama_llama_server_args(4096, 1, 0, "", False, num_batch=None)
    assert cpu == ["-c", "4096", "-np", "1", "--flash-attn", "off", "-ngl", "0"]
    assert "on" in ollama_llama_server_args(4096, 1, None, None, True)


def test_predicted_vram_is_the_file_plus_an_f16_cache() -> None:
    # Llama 3.1 8B Q4_K_M (4920739232 bytes) at 8192 tokens: 1 GiB of f16 KV
    assert ollama_predicted_vram(4920739232, 32, 8, 4096, 32, 8192) == 4920739232 + GIB
    assert ollama_predicted_vram(1000, 2, 0, 64, 8, 10) == 1000 + 2 * 2 * 1 * 8 * 10 * 2


def test_generation_batch() -> None:
    rtx = [_gpu(cc="8.6")]
    small = [_gpu(cc="8.6", memory_total_bytes=8 * GIB)]
    # flash attention off on CUDA: 512, or 256 above 4096 tokens on a GPU of <= 8 GiB
    assert ollama_generation_batch(8192, 5 * GIB, 24 * GIB, rtx, flash=False) == 512
    assert ollama_generation_batch(8192, 5 * GIB, 8 * GIB, small, flash=False) == 256
    assert ollama_generation_batch(4096, 5 * GIB, 8 * GIB, small, flash=False) == 512
    # by context, stepped down while the estimate leaves too little room
    assert ollama_generation_batch(4096, 5 * GIB, 24 * GIB, rtx, flash=True) == 512
    assert ollama_generation_batch(8192, 5 * GIB, 24 * GIB, rtx, flash=True) == 1024
    assert ollama_generation_batch(40000, 5 * GIB, 24 * GIB, rtx, flash=True) == 2048
    # 16 GiB of 24: above 60 % (2048 refused), within 75 % and 80 % less 768 MiB
    assert ollama_generation_batch(40000, 16 * GIB, 24 * GIB, rtx, flash=True) == 1024
    assert ollama_generation_batch(40000, 20 * GIB, 24 * GIB, rtx, flash=True) == 512
    assert ollama_generation_batch(40000, 20 * GIB, 0, rtx, flash=True) == 2048  # unknown
    # no CUDA GPU: flash attention off does not pin 512
    assert ollama_generation_batch(40000, 5 * GIB, 24 * GIB, [], flash=False) == 2048


def test_one_gpu_when_the_estimate_fits_in_80_percent() -> None:
    assert ollama_single_gpu(19 * GIB, 24 * GIB)
    assert not ollama_single_gpu(20 * GIB, 24 * GIB)


# ---------------------------------------------------------------- vision projector


def test_fit_margin_is_the_projector_plus_one_gib_in_whole_mib() -> None:
    assert ollama_fit_margin(0) == LLAMA_FIT_MARGIN == 1024 * MIB
    assert ollama_fit_margin(892_600_000) == 1876 * MIB  # 1875.25 MiB rounded up
    assert ollama_fit_margin(512 * MIB) == 1536 * MIB


def test_projector_stays_on_the_cpu() -> None:
    big = [_gpu(memory_total_bytes=24 * GIB)]
    assert ollama_projector_on_cpu(800 * MIB, big) == (False, "")
    assert ollama_projector_on_cpu(800 * MIB, big, num_gpu=0)[1].startswith("cpu-only")
    partial = ollama_projector_on_cpu(800 * MIB, big, num_gpu=20, model_layers=33)
    assert partial[0] and partial[1].startswith("partial-text-offload")
    assert ollama_projector_on_cpu(800 * MIB, big, num_gpu=33, model_layers=33) == (False, "")
    tiny = [_gpu(memory_total_bytes=24 * GIB, memory_free_bytes=GIB)]
    assert ollama_projector_on_cpu(800 * MIB, tiny)[1].startswith("limited-vram")


# ---------------------------------------------------------------- ollama ps


@pytest.mark.parametrize(
    ("cpu", "gpu", "shown"),
    [
        (0, 9_600_000_000, "100% GPU"),
        (4_000_000_000, 0, "100% CPU"),
        (0, 0, "100% CPU"),
        (48, 52, "48%/52% CPU/GPU"),  # docs/faq.mdx
        (1, 7, "13%/87% CPU/GPU"),  # 12.5 % rounds away from zero, as Go's math.Round
        (1, 199, "1%/99% CPU/GPU"),  # 0.5 %
        (999, 1, "100%/0% CPU/GPU"),
        (1, 999, "0%/100% CPU/GPU"),
    ],
)
def test_ps_processor(cpu: int, gpu: int, shown: str) -> None:
    assert ollama_ps_processor(cpu, gpu) == shown


def test_ps_full_offload_counts_the_gpu_buffers_only() -> None:
    # every layer on the GPU: CPU_Mapped embeddings and CUDA_Host compute are left out
    assert ollama_ps_processor(500 * MIB, 5 * GIB, all_layers_on_gpu=True) == "100% GPU"
    assert ollama_ps_total(500 * MIB, 5 * GIB, all_layers_on_gpu=True) == 5 * GIB
    assert ollama_ps_total(500 * MIB, 5 * GIB) == 5 * GIB + 500 * MIB


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        # format/bytes_test.go TestHumanBytes
        (0, "0 B"), (1, "1 B"), (999, "999 B"),
        (1000, "1 KB"), (1500, "1.5 KB"), (999999, "999 KB"),
        (1000000, "1 MB"), (1500000, "1.5 MB"), (999999999, "999 MB"),
        (1000000000, "1 GB"), (1500000000, "1.5 GB"), (999999999999, "999 GB"),
        (1000000000000, "1 TB"), (1500000000000, "1.5 TB"), (1999999999999, "2.0 TB"),
        (1234, "1.2 KB"), (1234567, "1.2 MB"), (1234567890, "1.2 GB"),
        # docs/context-length.mdx, docs/faq.mdx
        (9_600_000_000, "9.6 GB"), (42_700_000_000, "42 GB"),
    ],
)  # fmt: skip
def test_ps_size(size: int, shown: str) -> None:
    assert ollama_ps_size(size) == shown


# ---------------------------------------------------------------- the recipe


def _tagged(spec: ModelSpec) -> ModelSpec:
    return replace(spec, ollama_tag="llama3.1:8b-instruct-q4_K_M")


def test_a_plan_on_ollamas_defaults_sets_nothing(llama8b: ModelSpec) -> None:
    rig = make_rig(1)  # 24 GiB: Ollama's own context is 32768
    s = PlanSettings(context=32768, flash_attn=True)
    cmd = ollama_command(auto_place(LLAMA_31_8B, rig, s), _tagged(llama8b), "Q4_K_M", s, rig)
    assert cmd.supported and cmd.env == ()
    assert "ollama serve" in cmd.text.splitlines()
    assert "/set parameter" not in cmd.text
    assert any("Ollama 0.30 or later" in n for n in cmd.notes)
    assert any(
        "Ollama's own context, 32768" in n and "retries once at 4096" in n for n in cmd.notes
    )
    assert not any("/set parameter num_ctx" in n for n in cmd.notes)


def test_cpu_only_default_context_is_4096(llama8b: ModelSpec) -> None:
    rig = make_rig(0)
    s = PlanSettings(context=4096)
    cmd = ollama_command(auto_place(LLAMA_31_8B, rig, s), _tagged(llama8b), "Q4_K_M", s, rig)
    assert cmd.env == ()
    assert not any("retries" in n for n in cmd.notes)  # 4096: no lower tier


def test_a_context_that_differs_is_set_and_flash_attention_is_never_forced(
    llama8b: ModelSpec,
) -> None:
    rig = make_rig(2)  # 48 GiB: Ollama's own context would be 131072 (trained cap)
    s = PlanSettings(context=16384)
    cmd = ollama_command(auto_place(LLAMA_31_8B, rig, s), _tagged(llama8b), "Q4_K_M", s, rig)
    assert dict(cmd.env) == {"OLLAMA_CONTEXT_LENGTH": "16384"}
    assert any("would be 131072" in n for n in cmd.notes)
    # the plan was sized without flash attention; Ollama runs it auto
    assert any("sized with flash attention off" in n and "auto" in n for n in cmd.notes)


def test_a_modelfile_carries_only_what_differs(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    s = PlanSettings(context=32768, flash_attn=True)
    cmd = ollama_command(auto_place(LLAMA_31_8B, rig, s), llama8b, "Q6_K", s, rig)
    assert cmd.argv[:2] == ("ollama", "create")
    assert "PARAMETER" not in cmd.text
    pinned = ollama_command(auto_place(LLAMA_31_8B, rig, s, ngl=20), llama8b, "Q6_K", s, rig)
    assert "PARAMETER num_gpu 20" in pinned.text.splitlines()
    assert "PARAMETER num_ctx" not in pinned.text


def test_quantized_kv_on_a_gpu_where_ollama_turns_flash_attention_off(
    llama8b: ModelSpec,
) -> None:
    old = Rig(
        name="maxwell",
        gpus=(_gpu("Tesla M40", cc="5.2"),),
        ram_total_bytes=64 * GIB,
        ram_available_bytes=60 * GIB,
    )
    s = PlanSettings(kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0, flash_attn=True)
    cmd = ollama_command(auto_place(LLAMA_31_8B, old, s), _tagged(llama8b), "Q4_K_M", s, old)
    assert not cmd.supported
    assert "Tesla M40" in cmd.explanation and "5.2" in cmd.explanation
    f16 = PlanSettings(flash_attn=True)
    ok = ollama_command(auto_place(LLAMA_31_8B, old, f16), _tagged(llama8b), "Q4_K_M", f16, old)
    assert ok.supported and "OLLAMA_FLASH_ATTENTION" not in dict(ok.env)
    assert any("sized with flash attention on" in n and "5.2" in n for n in ok.notes)


def test_any_llama_cpp_kv_type_passes_through(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    s = PlanSettings(kv_k=KvCacheType.Q5_0, kv_v=KvCacheType.Q5_0, flash_attn=True)
    cmd = ollama_command(auto_place(LLAMA_31_8B, rig, s), _tagged(llama8b), "Q4_K_M", s, rig)
    assert cmd.supported and dict(cmd.env)["OLLAMA_KV_CACHE_TYPE"] == "q5_0"
    assert any("attention runs on the CPU" in n for n in cmd.notes)  # no CUDA kernel for it


def test_single_sequence_architectures_are_noted(llama8b: ModelSpec) -> None:
    rig = make_rig(1)
    qwen = replace(llama8b, geometry=replace(LLAMA_31_8B, architecture="qwen35"))
    s = PlanSettings(context=65536, parallel=2, flash_attn=True)
    cmd = ollama_command(auto_place(qwen.geometry, rig, s), _tagged(qwen), "Q4_K_M", s, rig)
    assert dict(cmd.env)["OLLAMA_NUM_PARALLEL"] == "2"
    assert any("one request at a time" in n for n in cmd.notes)


def test_a_split_over_gpus_notes_ollamas_one_gpu_rule(llama8b: ModelSpec) -> None:
    rig = make_rig(2)
    s = PlanSettings(flash_attn=True)
    cmd = ollama_command(even_split(LLAMA_31_8B, rig, s), _tagged(llama8b), "Q4_K_M", s, rig)
    assert any("OLLAMA_SCHED_SPREAD=1" in n for n in cmd.notes)
