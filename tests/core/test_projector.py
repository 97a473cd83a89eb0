"""The vision projector (mmproj) in a plan: its sizing (core/memory/projector.py), where
it goes, and how it moves the plan, fit's margin and the loads (core/plan/projector.py)."""

from dataclasses import replace

import pytest

from rigspark_gui.core.errors import InvalidModelError
from rigspark_gui.core.memory import max_image_size, projector_load, warmup_image_size
from rigspark_gui.core.memory.projector import compute_bytes, encoded_side, input_bytes
from rigspark_gui.core.model import Geometry, ModelSpec, Projector
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Gpu, Rig, Vendor
from rigspark_gui.core.settings import Backend, PlanSettings, make_settings

MIB = 1 << 20

# Gemma 3's SigLIP projector as data/projectors.json has it (27B: a 5376-wide projection)
GEMMA3_MMPROJ = Projector(
    projector_type="gemma3",
    n_embd=1152,
    n_ff=4304,
    n_head=16,
    n_layer=27,
    image_size=896,
    patch_size=14,
    n_merge=4,
    projection_dim=5376,
    weights_bytes=857_714_112,
    warmup_image_size=896,
    file_name="mmproj-model-f16.gguf",
)
GEMMA3_27B = Geometry(
    architecture="gemma3",
    n_layer=62,
    n_embd=5376,
    n_head=32,
    n_head_kv=16,
    head_dim_k=128,
    head_dim_v=128,
    n_vocab=262208,
    n_ff=21504,
    tied_embeddings=True,
    sliding_window=1024,
    swa_pattern=6,
    context_length=131072,
)
QUANTS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K")


def gemma27b(projector: Projector | None = GEMMA3_MMPROJ) -> ModelSpec:
    return ModelSpec(
        id="gemma-3-27b-it",
        name="Gemma 3 27B",
        geometry=GEMMA3_27B,
        quants=QUANTS,
        projector=projector,
    )


def card(gib: float = 24.0) -> Rig:
    total = int(gib * GIB)
    gpu = Gpu(
        name="NVIDIA GeForce RTX 3090",
        vendor=Vendor.NVIDIA,
        memory_total_bytes=total,
        memory_free_bytes=total - 500 * MIB,
        bandwidth_gbps=936.0,
    )
    return Rig(name="24 GB", gpus=(gpu,), ram_total_bytes=64 * GIB)


def settings(**kw: object) -> PlanSettings:
    base: dict[str, object] = {"context": 16384, "quant": "Q5_K_M", "flash_attn": True}
    return make_settings(**{**base, **kw})


# ---------------------------------------------------------------- sizing


def test_gemma3_compute_buffer_is_the_published_cuda_line() -> None:
    # ggml-org/llama.cpp#22790: "warmup with image size = 896 x 896",
    # "CUDA0 compute buffer size = 121.25 MiB", "CPU compute buffer size = 9.19 MiB",
    # flash attention enabled
    assert compute_bytes(GEMMA3_MMPROJ, 896, flash_attn=True) == int(121.25 * MIB)
    assert round(input_bytes(896) / MIB, 2) == 9.19
    # without flash attention the f32 scores of 4096 patches x 16 heads dominate
    assert compute_bytes(GEMMA3_MMPROJ, 896, flash_attn=False) == 1132 * MIB


def test_warm_up_sizes_follow_clip_cpp() -> None:
    assert warmup_image_size("gemma3", 896, 14, 4) == 896
    # Qwen-VL: 46 x 46 tokens of 2 x 2 patches; Qwen3-VL's patch 16 gives the 1472
    # the WebGPU log in ggml-org/llama.cpp#16837 shows
    assert warmup_image_size("qwen3vl_merger", 768, 16, 2) == 1472
    assert warmup_image_size("qwen2.5vl_merger", 560, 14, 2) == 1288
    # Pixtral: 16 x 16 tokens (448 x 448 in lmstudio-bug-tracker#1004), up to 1024 tokens
    assert warmup_image_size("pixtral", 1540, 14, 2) == 448
    assert max_image_size("pixtral", 14, 2) == 896
    assert max_image_size("gemma3", 14, 4) == 0


def test_a_larger_image_grows_only_a_dynamic_projector() -> None:
    assert encoded_side(GEMMA3_MMPROJ, 2000) == 896  # every image is resized to 896
    pixtral = replace(
        GEMMA3_MMPROJ,
        projector_type="pixtral",
        n_merge=2,
        warmup_image_size=448,
        max_image_size=896,
    )
    assert encoded_side(pixtral, None) == 448
    assert encoded_side(pixtral, 700) == 700 // 28 * 28
    assert encoded_side(pixtral, 5000) == 896  # capped at its most tokens
    assert encoded_side(pixtral, 100) == 448  # never below the warm-up reservation
    small = projector_load(pixtral, "gpu:0", True)
    large = projector_load(pixtral, "gpu:0", True, image_size=896)
    assert large.compute_bytes > small.compute_bytes and not large.warmup and small.warmup


# ---------------------------------------------------------------- in a plan


def test_gemma3_27b_plan_shows_the_projector_on_the_gpu() -> None:
    p = plan(gemma27b(), card(), settings(), None)
    assert p.projector is not None and p.projector.device == "gpu:0"
    gpu = next(d for d in p.device_loads if d.device == "gpu:0")
    cpu = next(d for d in p.device_loads if d.device == "cpu")
    assert gpu.projector_bytes == 857_714_112 + int(121.25 * MIB)
    assert cpu.projector_bytes == input_bytes(896)
    assert (
        gpu.total_bytes
        == (gpu.weights_bytes + gpu.kv_bytes + gpu.state_bytes + gpu.compute_bytes)
        + gpu.projector_bytes
        + gpu.reserve_bytes
    )
    assert gpu.reserve_bytes == card().gpus[0].reserve_bytes  # its own line, not the reserve


def test_the_projector_decides_whether_it_fits_and_text_only_removes_it() -> None:
    # Q5_K_M at 32K on a 24 GB card: text alone fits, with the projector it does not
    with_mm = plan(gemma27b(), card(), settings(context=32768), None)
    text = plan(gemma27b(), card(), settings(context=32768, text_only=True), None)
    gpu_with = next(x for x in with_mm.paths if x.path.value == "gpu")
    gpu_text = next(x for x in text.paths if x.path.value == "gpu")
    assert gpu_text.fits and not gpu_with.fits
    assert text.projector is None
    assert all(d.projector_bytes == 0 for d in text.device_loads)
    # the same plan as a model that has no projector
    none = plan(gemma27b(None), card(), settings(context=32768), None)
    assert [x.fits for x in none.paths] == [x.fits for x in text.paths]


def test_no_mmproj_offload_keeps_it_on_the_cpu() -> None:
    p = plan(gemma27b(), card(), settings(mmproj_offload=False), None)
    assert p.projector is not None and p.projector.device == "cpu"
    assert p.projector.host_bytes == 0
    cpu = next(d for d in p.device_loads if d.device == "cpu")
    gpu = next(d for d in p.device_loads if d.device == "gpu:0")
    assert cpu.projector_bytes == p.projector.device_bytes and gpu.projector_bytes == 0


def test_fits_margin_grows_by_the_projector_as_llama_server_does() -> None:
    # tools/server/server-context.cpp: fit_params_target[i] += weights + compute
    p = plan(gemma27b(), card(), settings(), None)
    text = plan(gemma27b(), card(), settings(text_only=True), None)
    assert p.fit is not None and text.fit is not None
    row, text_row = p.fit.devices[0], text.fit.devices[0]
    assert row.margin_bytes == text_row.margin_bytes + p.projector.device_bytes  # type: ignore[union-attr]
    assert row.free_bytes == text_row.free_bytes  # the free memory read is the device's own


def test_ollama_sets_the_margin_to_the_projector_plus_one_gib() -> None:
    p = plan(gemma27b(), card(), settings(backend=Backend.OLLAMA), None)
    # ollama/ollama#16866: LLAMA_ARG_FIT_TARGET = projector weights + 1 GiB, in MiB
    assert p.settings.fit_target_mib == (-(-(857_714_112 + GIB) // MIB),)


def test_a_projector_of_another_width_is_refused() -> None:
    wrong = replace(GEMMA3_MMPROJ, projection_dim=2560, file_name="mmproj-4b.gguf")
    with pytest.raises(InvalidModelError, match=r"2560-wide.*llama.cpp refuses"):
        plan(gemma27b(wrong), card(), settings(), None)
    # text only does not load it, so nothing is refused
    plan(gemma27b(wrong), card(), settings(text_only=True), None)


def test_serving_engines_do_not_load_an_mmproj() -> None:
    p = plan(gemma27b(), card(), settings(backend=Backend.VLLM, flash_attn=False, quant=None), None)
    assert p.projector is None


def test_the_catalog_ranking_counts_the_projector_as_the_plan_does() -> None:
    from rigspark_gui.core.plan.ranking import rank_model
    from tests.conftest import simple_speed_model

    perf = simple_speed_model()
    for kw in ({"context": 32768}, {"context": 32768, "text_only": True}):
        s = settings(**{**kw, "quant": None})
        p = plan(gemma27b(), card(), s, perf)
        row = rank_model(gemma27b(), card(), s, perf)
        rec = next(x for x in p.paths if x.path is p.recommended)
        assert (row.path, row.quant) == (rec.path, rec.quant)


def test_ollama_keeps_the_projector_on_the_cpu_of_a_small_gpu() -> None:
    # ollama/ollama llm/llama_server.go shouldDisableMMProjOffload: a GPU with less than
    # the projector + 1 GiB
    from rigspark_gui.core.plan.projector import plan_projector

    small = card(1.5)
    s = settings(backend=Backend.OLLAMA)
    assert plan_projector(gemma27b(), small, s).device == "cpu"  # type: ignore[union-attr]
    assert plan_projector(gemma27b(), card(), s).device == "gpu:0"  # type: ignore[union-attr]


def test_an_audio_encoders_compute_is_unknown_not_nothing() -> None:
    audio = replace(GEMMA3_MMPROJ, projector_type="ultravox", modality="audio", patch_size=0,
                    image_size=0, warmup_image_size=0)  # fmt: skip
    load = projector_load(audio, "gpu:0", flash_attn=True)
    assert load.compute_bytes == 0 and not load.compute_known
    assert projector_load(GEMMA3_MMPROJ, "gpu:0", flash_attn=True).compute_known
    p = plan(replace(gemma27b(), projector=audio), card(), settings(), None)
    assert any("compute buffer is unknown" in n for n in p.notes)
