"""MTP drafting (`--spec-type draft-mtp`) in a plan: the MTP blocks' weights, their draft
context's KV and compute and the target's extra recurrent rows, on the devices of the
target's MTP slots (core/plan/mtp.py), the speed basis and the launch flag."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.launch.beside_args import beside_args
from rigspark_gui.core.memory import recurrent_state_bytes
from rigspark_gui.core.model import KvCacheType, ModelSpec
from rigspark_gui.core.plan.draft import plan_draft
from rigspark_gui.core.plan.mtp import (
    DRAFT_N_MAX,
    mtp_kv_bytes,
    mtp_tensors,
    rollback_state_bytes,
)
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import GIB, Gpu, Rig, Vendor
from rigspark_gui.core.settings import Backend, make_settings
from tests.conftest import simple_speed_model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "validation"))

from synth_gemma_dsa import MODELS as DSA  # noqa: E402
from synth_gemma_dsa import MTP_MODELS as DSA_MTP  # noqa: E402
from synth_hybrid import MODELS, NEMOTRON_MTP, _mtp_block, _nemotron_mtp_block  # noqa: E402

MIB = 1 << 20
QWEN35 = next(m for m in MODELS if m.name == "qwen35-gdn").geometry
QWEN35_MOE = next(m for m in MODELS if m.name == "qwen35moe-gdn").geometry


def spec(g=QWEN35) -> ModelSpec:  # type: ignore[no-untyped-def]
    return ModelSpec(id="q35", name="Qwen3.5 synth", geometry=g, quants=("Q8_0", "F16"))


def card() -> Rig:
    gpu = Gpu(
        name="NVIDIA GeForce RTX 4090",
        vendor=Vendor.NVIDIA,
        memory_total_bytes=24 * GIB,
        memory_free_bytes=24 * GIB - 400 * MIB,
        bandwidth_gbps=1008.0,
    )
    return Rig(name="4090", gpus=(gpu,), ram_total_bytes=64 * GIB)


def settings(**kw: object):  # type: ignore[no-untyped-def]
    base = {"context": 8192, "quant": "Q8_0", "flash_attn": True, "mtp_draft": True}
    return make_settings(**{**base, **kw})


def test_the_mtp_block_is_the_one_the_converter_writes() -> None:
    got = sorted(mtp_tensors(QWEN35))
    assert got == sorted(_mtp_block(QWEN35, 8))
    assert all(name.startswith("blk.8.") for name, _ in got)


def test_mtp_memory_sits_on_the_device_of_the_mtp_slot() -> None:
    p = plan(spec(), card(), settings(), simple_speed_model())
    d = p.draft
    assert d is not None and d.mtp and d.n_gpu_layers == 1
    assert p.placement is not None and p.placement.unit("blk.8").device == "gpu:0"
    on = d.on()
    gpu = next(x for x in p.device_loads if x.device == "gpu:0")
    assert gpu.draft_bytes == on["gpu:0"] > d.weights_bytes + d.kv_bytes
    # the MTP context's cache: one layer, 2 KV heads x 128 x (K + V) f16, 8192 cells
    assert d.kv_bytes == 2 * 128 * 2 * 2 * 8192
    # the target keeps n_max (3) more rows of every recurrent layer's state
    s = settings()
    rows = sum(
        recurrent_state_bytes(QWEN35, il, s, DRAFT_N_MAX) - recurrent_state_bytes(QWEN35, il, s)
        for il in QWEN35.recurrent_layers
    )
    assert (
        d.state_bytes
        == rows
        == 3 * sum(recurrent_state_bytes(QWEN35, il, s) for il in QWEN35.recurrent_layers)
    )
    # the host holds the MTP context's output buffer and graph inputs
    assert on["cpu"] >= 4 * QWEN35.n_vocab


def test_without_mtp_there_is_no_draft_and_the_speed_is_plain() -> None:
    with_mtp = plan(spec(), card(), settings(), simple_speed_model())
    alone = plan(spec(), card(), settings(mtp_draft=False), simple_speed_model())
    assert alone.draft is None and with_mtp.draft is not None
    assert with_mtp.draft.accepted_per_step is None
    assert with_mtp.draft.speed_basis.startswith("unknown")
    tok = [x.throughput.tok_s for x in with_mtp.paths if x.path.value == "gpu"]
    tok_alone = [x.throughput.tok_s for x in alone.paths if x.path.value == "gpu"]
    assert tok == tok_alone  # never a made-up multiplier
    assert any("MTP blocks" in n and "unknown" in n for n in with_mtp.notes)


def test_moe_mtp_blocks_carry_experts_and_a_cpu_rig_keeps_them_there() -> None:
    cpu = Rig(name="cpu", gpus=(), ram_total_bytes=64 * GIB)
    g = replace(QWEN35_MOE, n_layer=9, n_layer_nextn=1)
    names = [n for n, _ in mtp_tensors(g)]
    assert any("ffn_gate_exps" in n for n in names) and "blk.8.nextn.eh_proj.weight" in names
    d = plan_draft(spec(g), cpu, settings())
    assert d is not None and set(d.on()) == {"cpu"} and d.n_gpu_layers == 0


def test_refusals() -> None:
    plain = replace(QWEN35, n_layer=8, n_layer_nextn=0, n_head_kv_per_layer=None)
    with pytest.raises(InvalidSettingsError, match="no MTP"):
        plan_draft(spec(plain), card(), settings())
    with pytest.raises(InvalidSettingsError, match="flash attention"):
        from rigspark_gui.core.model import KvCacheType
        from rigspark_gui.core.plan.mtp import mtp_loads

        mtp_loads(spec(), card(), settings(flash_attn=False), None, kv_v=KvCacheType.Q8_0)


def test_b11434_refusals_are_one_line_each() -> None:
    from rigspark_gui.core.plan.mtp import check_mtp

    dsv4 = replace(QWEN35, architecture="deepseek4")
    with pytest.raises(InvalidSettingsError, match=r"deepseek4 .* not planned yet"):
        check_mtp(spec(dsv4), settings())
    gemma = replace(QWEN35, architecture="gemma4", n_layer_nextn=0, n_head_kv_per_layer=None)
    with pytest.raises(InvalidSettingsError, match="gemma4-assistant"):
        check_mtp(spec(gemma), settings())


def test_nemotron_mtp_block_is_attention_plus_moe() -> None:
    """Nemotron-H MoE's folded MTP block: the converter's tensors (the synthetic file's,
    which b11434 loads), its KV heads from the file's per-layer array."""
    g = NEMOTRON_MTP.geometry
    want = sorted(_nemotron_mtp_block(g, g.n_layer - 1))
    assert sorted(mtp_tensors(g)) == want
    assert any(n.endswith("post_attention_norm.weight") for n, _ in want)
    assert not any("gate_exps" in n for n, _ in want)  # ReLU^2 experts: no gate


def test_dsa_mtp_blocks_load_their_indexer_but_cache_no_indexer_keys() -> None:
    """DeepSeek V3.2 / GLM-5: the indexer weights load with the MTP block, the router
    bias loads with the trunk; the MTP cache is MLA's latent row alone."""
    for g in (DSA["deepseek32-mtp-like"], DSA_MTP["glm-dsa-mtp-like"]):
        names = [n for n, _ in mtp_tensors(g)]
        assert "blk.4.indexer.attn_k.weight" in names
        assert not any("exp_probs_b" in n for n in names)
        s = settings(context=4096)
        row = 2 * ((g.kv_lora_rank or 0) + (g.rope_head_dim or 0))
        assert mtp_kv_bytes(g, s, KvCacheType.F16, KvCacheType.F16) == row * 4096


def test_the_launch_command_carries_the_spec_type() -> None:
    args = beside_args(spec(), settings(), hf=False)
    assert args == ["--spec-type", "draft-mtp"]
    assert beside_args(spec(), settings(mtp_draft=False), hf=False) == []
    # Ollama has no MTP drafting: no flag, no draft memory
    ollama = settings(backend=Backend.OLLAMA, kv_k="f16", kv_v="f16")
    assert "--spec-type" not in beside_args(spec(), ollama, hf=False)
    assert plan_draft(spec(), card(), ollama) is None


def test_kv_follows_the_context_and_state_rows_only_rollback_archs() -> None:
    s = settings(context=4096, parallel=4)
    assert mtp_kv_bytes(QWEN35, s, *(2 * [settings().kv_k])) == 2 * 128 * 2 * 2 * 4096
    assert rollback_state_bytes(replace(QWEN35, architecture="qwen3next"), s, 0) == 0


def test_a_pasted_command_line_asks_for_mtp_drafting() -> None:
    from rigspark_gui.core.launch import split_projector_flags

    argv = ["llama-server", "-m", "m.gguf", "--spec-type", "draft-mtp", "-c", "4096"]
    out, found = split_projector_flags(argv)
    assert out == argv and found == {"mtp_draft": True}
    assert split_projector_flags(["--spec-type=ngram-simple"])[1] == {}
    assert split_projector_flags(["--spec-type=ngram-simple,draft-mtp"])[1] == {"mtp_draft": True}


def test_the_llama_server_command_of_the_plan_says_draft_mtp() -> None:
    from rigspark_gui.core.launch.llama_cpp import llama_server_command

    p = plan(spec(), card(), settings(), simple_speed_model())
    path = next(x for x in p.paths if x.path is p.recommended)
    assert p.placement is not None and path.quant is not None
    cmd = llama_server_command(p.placement, spec(), path.quant, p.settings, card())
    at = cmd.argv.index("--spec-type")
    assert cmd.argv[at + 1] == "draft-mtp" and "-md" not in cmd.argv


def test_on_auto_the_mtp_blocks_take_the_quantization_the_plan_chose() -> None:
    # F16 is listed first, but this CPU-only rig (2 GiB kept for the system) holds only
    # Q8_0 with its MTP block: that block is quantized like the rest of the file
    # (5,024,768 B at Q8_0 against b11434)
    both = replace(spec(), quants=("F16", "Q8_0"))
    rig = Rig(name="cpu", gpus=(), ram_total_bytes=2 * GIB + 135 * MIB)
    auto = plan(both, rig, settings(quant=None), simple_speed_model())
    shown = next(p for p in auto.paths if p.path is auto.recommended)
    assert shown.quant == "Q8_0" and auto.draft is not None
    f16 = plan_draft(both, rig, settings(quant="F16"), auto.placement)
    q8 = plan_draft(both, rig, settings(quant="Q8_0"), auto.placement)
    assert f16 is not None and q8 is not None and f16.weights_bytes != q8.weights_bytes
    assert auto.draft.weights_bytes == q8.weights_bytes


def test_each_path_sizes_its_mtp_blocks_at_its_own_quantization() -> None:
    # GLM-4.5-Air on two RTX 3090 at 8K, Auto: the paths settle on different
    # quantizations, and each path's MTP block is quantized like that path's file
    from rigspark_gui.catalog.models import load_catalog
    from rigspark_gui.core.rig import GIB as _GIB

    entry = next(e for e in load_catalog().entries if e.id == "glm-4.5-air")
    gpu = replace(card().gpus[0], name="NVIDIA GeForce RTX 3090", memory_total_bytes=24 * _GIB)
    rig = Rig(name="2x3090", gpus=(gpu, gpu), ram_total_bytes=64 * _GIB)
    p = plan(entry.to_spec(), rig, settings(quant=None), simple_speed_model())
    by = {x.path.value: x for x in p.paths}
    quants = {k: v.quant for k, v in by.items()}
    assert quants["gpu"] != quants["multi-gpu"] or quants["multi-gpu"] != quants["cpu-offload"]
    bits = {k: by[k].breakdown.draft_bytes for k in ("gpu", "multi-gpu")}
    assert 0 < bits["gpu"] < bits["multi-gpu"] < by["cpu-offload"].breakdown.draft_bytes
