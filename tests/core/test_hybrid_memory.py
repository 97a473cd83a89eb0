"""Hybrid architectures (Gated DeltaNet, Mamba-2, short convolutions) sized as llama.cpp
b11434 sizes them: attention KV on the attention layers only, a fixed f32 state per
sequence on the others, rows growing with rollback snapshots where llama.cpp allows them,
and the plan showing the state apart from the KV.

Qwen3.5-9B's shapes are its config.json's (hidden 4096, 32 layers, a full-attention layer
in four, 16 heads / 4 KV heads of 256, linear heads 16 key / 32 value of 128, conv kernel
4): its GGUF's ssm keys are inner_size 4096, state_size 128, group_count 16,
time_step_rank 32 (conversion/qwen.py, Qwen3NextModel.set_gguf_parameters)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rigspark_gui.core.memory import (
    kv_total_bytes,
    param_count,
    recurrent_state_bytes,
    state_rows,
    state_total_bytes,
    synthesize_tensors,
    weights_layout,
)
from rigspark_gui.core.memory.arch_hybrid import hybrid_block_tensors
from rigspark_gui.core.model import Geometry, KvCacheType
from rigspark_gui.core.placement import CPU, device_loads, uniform_placement
from rigspark_gui.core.settings import PlanSettings
from tests.conftest import make_rig, spec_of

QWEN35_9B = Geometry(
    architecture="qwen35",
    n_layer=32,
    n_embd=4096,
    n_head=16,
    n_head_kv=4,
    head_dim_k=256,
    head_dim_v=256,
    n_vocab=248320,
    n_ff=12288,
    recurrent_layers=tuple(i for i in range(32) if (i + 1) % 4 != 0),
    ssm_d_conv=4,
    ssm_d_inner=4096,
    ssm_d_state=128,
    ssm_dt_rank=32,
    ssm_n_group=16,
    context_length=262144,
)


def test_state_values_are_llama_cpp_n_embd_r_and_n_embd_s() -> None:
    # r = (d_conv - 1) (d_inner + 2 n_group d_state), s = d_state d_inner
    assert QWEN35_9B.recurrent_r_values == 3 * (4096 + 2 * 16 * 128)
    assert QWEN35_9B.recurrent_s_values == 128 * 4096
    lfm = replace(
        QWEN35_9B, architecture="lfm2", recurrent_r_values=0, recurrent_s_values=0,
        ssm_d_conv=0, ssm_d_inner=0, ssm_d_state=0, shortconv_l_cache=3,
    )  # fmt: skip
    assert (lfm.recurrent_r_values, lfm.recurrent_s_values) == (2 * 4096, 0)


def test_qwen35_9b_state_per_sequence() -> None:
    s = PlanSettings(context=4096)
    per_layer = (24576 + 524288) * 4
    assert recurrent_state_bytes(QWEN35_9B, 0, s) == per_layer
    assert recurrent_state_bytes(QWEN35_9B, 3, s) == 0  # an attention layer
    assert state_total_bytes(QWEN35_9B, s) == 24 * per_layer  # 50.25 MiB


def test_attention_kv_only_on_the_attention_layers() -> None:
    s = PlanSettings(context=4096)
    kv = kv_total_bytes(QWEN35_9B, s) - state_total_bytes(QWEN35_9B, s)
    assert kv == 8 * 4096 * (4 * 256 * 2) * 2  # 8 layers, K and V in f16


def test_state_ignores_context_and_cache_type_and_scales_with_sequences() -> None:
    base = state_total_bytes(QWEN35_9B, PlanSettings(context=4096))
    q8 = PlanSettings(context=65536, kv_k=KvCacheType.Q8_0, kv_v=KvCacheType.Q8_0, flash_attn=True)
    assert state_total_bytes(QWEN35_9B, q8) == base
    assert state_total_bytes(QWEN35_9B, PlanSettings(context=4096, parallel=4)) == 4 * base


@pytest.mark.parametrize(
    ("arch", "rows"),
    [("qwen35", 2 * 4), ("nemotron_h", 2 * 4), ("qwen3next", 2), ("granitehybrid", 2)],
)
def test_rollback_snapshots_only_where_llama_cpp_allows_them(arch: str, rows: int) -> None:
    # llm_arch_supports_rs_rollback: mem_size x (1 + n_rs_seq) rows, else mem_size
    assert state_rows(replace(QWEN35_9B, architecture=arch), 2, 3) == rows


def test_qwen35_blocks_follow_load_arch_tensors() -> None:
    rec = dict(hybrid_block_tensors(QWEN35_9B, 0))
    attn = dict(hybrid_block_tensors(QWEN35_9B, 3))
    assert rec["blk.0.attn_qkv.weight"] == (4096, 2 * 16 * 128 + 32 * 128)
    assert rec["blk.0.ssm_conv1d.weight"] == (4, 8192)
    assert rec["blk.0.ssm_out.weight"] == (4096, 4096)
    assert "blk.0.attn_k.weight" not in rec
    assert attn["blk.3.attn_q.weight"] == (4096, 2 * 16 * 256)  # the query and its gate
    assert attn["blk.3.attn_k.weight"] == (4096, 4 * 256)
    assert "blk.3.post_attention_norm.weight" in attn and "blk.3.ffn_norm.weight" not in attn


def test_ssm_tensors_stay_f32_under_a_k_quant() -> None:
    types = {t.name: t.type for t in synthesize_tensors(QWEN35_9B, "Q4_K_M")}
    for name in ("ssm_conv1d.weight", "ssm_a", "ssm_dt.bias", "ssm_norm.weight"):
        assert types[f"blk.0.{name}"] == "F32"
    assert types["blk.0.ssm_out.weight"] != "F32"


def test_nemotron_ffn_layers_are_ungated_and_hold_no_kv_or_state() -> None:
    g = Geometry(
        architecture="nemotron_h", n_layer=3, n_embd=512, n_head=8, n_head_kv=2,
        n_head_kv_per_layer=(0, 2, 0), head_dim_k=64, head_dim_v=64, n_vocab=1000,
        n_ff=1024, n_ff_per_layer=(0, 0, 1024), recurrent_layers=(0,), ssm_d_conv=4,
        ssm_d_inner=1024, ssm_d_state=64, ssm_dt_rank=16, ssm_n_group=2, context_length=4096,
    )  # fmt: skip
    names = [n for n, _ in hybrid_block_tensors(g, 2)]
    assert names == ["blk.2.attn_norm.weight", "blk.2.ffn_up.weight", "blk.2.ffn_down.weight"]
    s = PlanSettings(context=4096)
    assert kv_total_bytes(g, s) == 4096 * 2 * 64 * 2 * 2 + recurrent_state_bytes(g, 0, s)


def test_device_loads_show_the_state_apart_from_the_kv() -> None:
    spec = spec_of(QWEN35_9B, "qwen3.5-9b", ("Q4_K_M",))
    rig = make_rig(0, ram_gib=64)
    s = PlanSettings(context=8192, parallel=2)
    layout = weights_layout(spec, "Q4_K_M")
    (load,) = device_loads(uniform_placement(QWEN35_9B, rig, s, CPU), QWEN35_9B, layout, rig, s)
    assert load.state_bytes == state_total_bytes(QWEN35_9B, s) > 0
    assert load.kv_bytes == kv_total_bytes(QWEN35_9B, s) - load.state_bytes
    assert load.required_bytes == load.weights_bytes + load.kv_bytes + load.state_bytes + (
        load.compute_bytes + load.projector_bytes
    )


def test_qwen3_coder_next_parameters_match_its_published_total() -> None:
    """Qwen3-Coder-Next's config.json (hidden 2048, 48 layers, 512 experts of 512, a
    shared expert of 512, linear heads 16 key / 32 value of 128) and its published total,
    79,674,391,296 parameters (CMander02/ModelSheet tests/test_catalog_parameters.py
    @26a3cf21): the qwen3next tensor list holds every one of them."""
    g = Geometry(
        architecture="qwen3next", n_layer=48, n_embd=2048, n_head=16, n_head_kv=2,
        head_dim_k=256, head_dim_v=256, n_vocab=151936, n_ff=0, n_expert=512,
        n_expert_used=10, n_ff_expert=512, n_shared_expert=1, n_ff_shared_expert=512,
        recurrent_layers=tuple(i for i in range(48) if (i + 1) % 4 != 0), ssm_d_conv=4,
        ssm_d_inner=4096, ssm_d_state=128, ssm_dt_rank=32, ssm_n_group=16,
        context_length=262144,
    )  # fmt: skip
    assert param_count(spec_of(g, "qwen3-coder-next", ("Q4_K_M",))).total == 79_674_391_296


def test_an_mtp_block_is_a_slot_without_weights_kv_or_state() -> None:
    """The converter writes Qwen3.5's MTP block after the trunk; llama.cpp counts it as a
    placement slot (-ngl over n_layer_all + 1) but skips its tensors and keeps no KV or
    state for it in the main context."""
    with_mtp = replace(QWEN35_9B, n_layer=33, n_layer_nextn=1, n_head_kv_per_layer=(4,) * 32 + (0,))
    s = PlanSettings(context=8192, parallel=2)
    assert kv_total_bytes(with_mtp, s) == kv_total_bytes(QWEN35_9B, s)
    assert state_total_bytes(with_mtp, s) == state_total_bytes(QWEN35_9B, s)
    assert hybrid_block_tensors(with_mtp, 32) == []
    a = weights_layout(spec_of(with_mtp, "a", ("F16",)), "F16")
    b = weights_layout(spec_of(QWEN35_9B, "b", ("F16",)), "F16")
    assert a.total_bytes == b.total_bytes and len(a.block_bytes) == 33
