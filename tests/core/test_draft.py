"""A draft model for speculative decoding (-md) in a plan: its memory per device, set
aside before the target's layers, llama.cpp's refusal of a foreign vocabulary, the
speed basis and the launch flags (core/plan/draft.py, core/launch/beside_args.py)."""

from dataclasses import replace

import pytest

from rigspark_gui.core.errors import InvalidModelError
from rigspark_gui.core.launch.beside_args import beside_args
from rigspark_gui.core.memory import weights_layout
from rigspark_gui.core.model import DraftModel, Geometry, KvCacheType, ModelSpec
from rigspark_gui.core.plan import loads_with_beside
from rigspark_gui.core.plan.draft import plan_draft
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Gpu, Rig, Vendor
from rigspark_gui.core.settings import Backend, make_settings
from tests.conftest import simple_speed_model

MIB = 1 << 20
# Qwen/Qwen2.5-32B-Instruct and Qwen/Qwen2.5-0.5B-Instruct config.json
QWEN_32B = Geometry(
    architecture="qwen2",
    n_layer=64,
    n_embd=5120,
    n_head=40,
    n_head_kv=8,
    head_dim_k=128,
    head_dim_v=128,
    n_vocab=152064,
    n_ff=27648,
    context_length=32768,
)
QWEN_05B = Geometry(
    architecture="qwen2",
    n_layer=24,
    n_embd=896,
    n_head=14,
    n_head_kv=2,
    head_dim_k=64,
    head_dim_v=64,
    n_vocab=151936,
    n_ff=4864,
    tied_embeddings=True,
    context_length=32768,
)
QUANTS = ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M")


def spec(g: Geometry, model_id: str, draft: DraftModel | None = None) -> ModelSpec:
    return ModelSpec(id=model_id, name=model_id, geometry=g, quants=QUANTS, draft=draft)


DRAFT = DraftModel(spec=spec(QWEN_05B, "qwen2.5-0.5b"), quant="Q8_0")


def card() -> Rig:
    gpu = Gpu(
        name="NVIDIA GeForce RTX 4090",
        vendor=Vendor.NVIDIA,
        memory_total_bytes=24 * GIB,
        memory_free_bytes=24 * GIB - 400 * MIB,
        bandwidth_gbps=1008.0,
    )
    return Rig(name="4090", gpus=(gpu,), ram_total_bytes=64 * GIB)


def settings(**kw: object):
    return make_settings(**{"context": 8192, "quant": "Q4_K_M", "flash_attn": True, **kw})


def test_the_draft_takes_its_memory_on_each_device() -> None:
    target = spec(QWEN_32B, "qwen2.5-32b", DRAFT)
    p = plan(target, card(), settings(), simple_speed_model())
    d = p.draft
    assert d is not None and d.quant == "Q8_0" and d.n_gpu_layers == 25  # 24 layers + head
    on = d.on()
    gpu = next(x for x in p.device_loads if x.device == "gpu:0")
    cpu = next(x for x in p.device_loads if x.device == "cpu")
    assert gpu.draft_bytes == on["gpu:0"] and cpu.draft_bytes == on["cpu"]
    # weights: the draft's file at Q8_0 (token embeddings on the CPU) and the copy of its
    # tied embeddings llama.cpp makes for the head on the GPU
    layout = weights_layout(DRAFT.spec, "Q8_0")
    assert d.weights_bytes == layout.total_bytes + layout.tied_head_bytes
    # its KV cache: 24 layers x 2 KV heads x 64 x (K + V) f16 at the target's 8192 cells
    assert d.kv_bytes == 24 * 2 * 64 * 2 * 2 * 8192
    # the same placement without the draft holds exactly that much less
    alone = plan(spec(QWEN_32B, "qwen2.5-32b"), card(), settings(), simple_speed_model())
    gpu_alone = next(x for x in alone.device_loads if x.device == "gpu:0")
    assert gpu.total_bytes - gpu_alone.total_bytes == on["gpu:0"]
    assert gpu.reserve_bytes == gpu_alone.reserve_bytes


def test_speculative_speed_is_plain_with_an_unknown_gain() -> None:
    target = spec(QWEN_32B, "qwen2.5-32b", DRAFT)
    p = plan(target, card(), settings(), simple_speed_model())
    alone = plan(spec(QWEN_32B, "qwen2.5-32b"), card(), settings(), simple_speed_model())
    assert p.draft is not None and p.draft.accepted_per_step is None
    assert p.draft.speed_basis.startswith("unknown")
    tok = [x.throughput.tok_s for x in p.paths if x.path.value == "gpu"]
    tok_alone = [x.throughput.tok_s for x in alone.paths if x.path.value == "gpu"]
    assert tok == tok_alone  # never a made-up multiplier
    assert any("speculative decoding" in n and "unknown" in n for n in p.notes)


def test_draft_kv_types_and_layers_are_its_own() -> None:
    q = replace(DRAFT, kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0, n_gpu_layers=10)
    d = plan_draft(spec(QWEN_32B, "t", q), card(), settings())
    assert d is not None and d.n_gpu_layers == 10 and d.kv_k == "q8_0"
    assert d.kv_bytes == 24 * 2 * 64 * 2 * 8192 * 34 // 32
    assert d.on()["cpu"] > plan_draft(spec(QWEN_32B, "t", DRAFT), card(), settings()).on()["cpu"]  # type: ignore[union-attr]


def test_a_draft_of_another_vocabulary_is_refused() -> None:
    llama = replace(QWEN_05B, architecture="llama", n_vocab=128256)
    foreign = DraftModel(spec=spec(llama, "llama-3.2-1b"), quant="Q8_0")
    with pytest.raises(InvalidModelError, match=r"vocabulary.*llama.cpp refuses"):
        plan(spec(QWEN_32B, "qwen2.5-32b", foreign), card(), settings(), None)
    # 128 tokens apart is what llama.cpp still accepts (Qwen2.5 0.5B vs 32B: exactly 128)
    assert QWEN_32B.n_vocab - QWEN_05B.n_vocab == 128


def test_the_launch_command_carries_the_draft_flags() -> None:
    q = replace(DRAFT, kv_k=KvCacheType.Q8_0, n_gpu_layers=99)
    args = beside_args(spec(QWEN_32B, "t", q), settings(), hf=False)
    assert args == ["-md", "qwen2.5-0.5b-Q8_0.gguf", "-ngld", "99", "-ctkd", "q8_0"]
    assert beside_args(spec(QWEN_32B, "t", q), settings(backend=Backend.OLLAMA), hf=False) == []


def test_a_hand_placement_counts_the_draft_too() -> None:
    target = spec(QWEN_32B, "qwen2.5-32b", DRAFT)
    p = plan(target, card(), settings(), simple_speed_model())
    assert p.placement is not None
    layout = weights_layout(target, "Q4_K_M")
    loads = loads_with_beside(p.placement, target, layout, card(), p.settings)
    assert [x.draft_bytes for x in loads] == [x.draft_bytes for x in p.device_loads]


def two_cards() -> Rig:
    gpu = card().gpus[0]
    return Rig(name="2x4090", gpus=(gpu, gpu), ram_total_bytes=64 * GIB)


def test_the_draft_follows_the_command_onto_the_one_gpu_it_shows() -> None:
    # Qwen2.5-32B Q4_K_M at 8K fits one 24 GB card: the command shows llama-server that
    # card alone (CUDA_VISIBLE_DEVICES), and the draft inherits the target's devices
    target = spec(QWEN_32B, "qwen2.5-32b", DRAFT)
    rig = two_cards()
    p = plan(target, rig, settings(), simple_speed_model())
    assert p.placement is not None and p.draft is not None
    used = {u.device for u in p.placement.units if u.device != "cpu"}
    assert used == {"gpu:0"}
    on = p.draft.on()
    assert "gpu:1" not in on and on["gpu:0"] > p.draft.weights_bytes // 2
    gpu1 = next(x for x in p.device_loads if x.device == "gpu:1")
    assert gpu1.draft_bytes == 0
    # without a target placement the draft would be spread over both cards
    guess = plan_draft(target, rig, settings())
    assert guess is not None and guess.on().get("gpu:1", 0) > 0


def test_the_draft_takes_the_targets_tensor_split() -> None:
    target = spec(QWEN_32B, "qwen2.5-32b", DRAFT)
    rig = two_cards()
    s = settings(quant="Q8_0", context=32768)
    p = plan(target, rig, s, simple_speed_model())
    assert p.placement is not None and p.draft is not None
    gpus = [u.device for u in p.placement.blocks if u.device != "cpu"]
    assert set(gpus) == {"gpu:0", "gpu:1"}
    share0 = gpus.count("gpu:0") / len(gpus)
    # the draft's layers split in the target's proportion (its -ts), not by free memory
    d = plan_draft(target, rig, s, p.placement)
    assert d is not None and d.on() == p.draft.on()
    on0, on1 = d.on().get("gpu:0", 0), d.on().get("gpu:1", 0)
    assert on0 > 0 and on1 > 0
    assert abs(on0 / (on0 + on1) - share0) < 0.15
    loads = loads_with_beside(
        p.placement,
        target,
        weights_layout(target, "Q8_0"),
        rig,
        replace(s, context=p.settings.context),
    )
    assert [x.draft_bytes for x in loads] == [x.draft_bytes for x in p.device_loads]


def test_each_path_counts_the_draft_where_its_own_command_loads_it() -> None:
    # the recommended two-GPU path spreads the draft over both cards; the one-GPU path's
    # command shows llama.cpp one card, so the draft's whole GPU share is on it, and the
    # CPU-only path's command shows none, so all of it is in system memory (GPU-only
    # paths count GPU memory only, as for every other line)
    from rigspark_gui.core.placement import auto_place

    target = spec(QWEN_32B, "qwen2.5-32b", DRAFT)
    rig = two_cards()
    s = settings(quant="Q8_0", context=32768)
    p = plan(target, rig, s, simple_speed_model())
    assert p.draft is not None and p.recommended is not None
    assert p.recommended.value == "multi-gpu"
    on = p.draft.on()
    gpu_share = on["gpu:0"] + on["gpu:1"]
    by = {x.path.value: x for x in p.paths}
    assert by["multi-gpu"].breakdown.draft_bytes == gpu_share
    # one card: the whole draft's GPU part there, one compute buffer (not the part
    # GPU 0 had in the two-card spread)
    card0 = plan_draft(target, rig, s, auto_place(QWEN_32B, rig, s, gpu_ids=[0]))
    assert card0 is not None and "gpu:1" not in card0.on()
    assert by["gpu"].breakdown.draft_bytes == card0.on()["gpu:0"] > on["gpu:0"]
    # no card: everything on the CPU, as the all-CPU command loads it
    cpu_only = auto_place(QWEN_32B, rig, s, gpu_ids=[])
    alone = plan_draft(target, rig, s, cpu_only)
    assert alone is not None and set(alone.on()) == {"cpu"}
    assert by["cpu"].breakdown.draft_bytes == alone.total_bytes > on["cpu"]
