"""Serving engines (vLLM, SGLang) sized as they size themselves, and plans over hosts."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.catalog.models import load_entry
from rigspark_gui.cli import gpu_database
from rigspark_gui.cli_speed import speed_model
from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.plan.paths import PathName
from rigspark_gui.core.plan.planner import plan
from rigspark_gui.core.rig import Gpu, Host, Network, NetworkPreset, Rig, Vendor
from rigspark_gui.core.serving import checkpoint_bytes, pp_partition, size_serving
from rigspark_gui.core.settings import make_settings

GIB = 1 << 30
DB = gpu_database()
PERF = speed_model()


def card(name: str, **extra: object) -> Gpu:
    assert DB is not None
    return replace(DB.fill(Gpu(name=name, vendor=Vendor.NVIDIA)), **extra)


def rig_of(*gpus: Gpu, hosts: tuple[Host, ...] = (), network: Network | None = None) -> Rig:
    numbered = tuple(replace(g, index=i) for i, g in enumerate(gpus))
    return Rig(gpus=numbered, ram_total_bytes=64 * GIB, hosts=hosts, network=network)


def spec(model_id: str):  # type: ignore[no-untyped-def]
    return load_entry(model_id).to_spec()


LLAMA8B = spec("llama-3.1-8b-instruct")
R3090 = rig_of(card("RTX 3090"))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_llama8b_bf16_on_a_3090_at_20000(engine: str) -> None:
    p = plan(LLAMA8B, R3090, make_settings(backend=engine, context=20000, quant="BF16"), PERF)
    assert [x.path for x in p.paths] == [PathName.GPU]  # no cpu-offload, no cpu
    sp = p.serving
    assert sp is not None and sp.fits and sp.refusal is None
    assert sp.weights_bytes == pytest.approx(14.99 * GIB, rel=0.002)  # vLLM logs 14.9888 GiB
    assert all(d.device.startswith("gpu:") for d in p.device_loads)  # every weight on the GPU
    assert sp.kv_cache_tokens > 20000 and sp.max_concurrency >= 1
    assert (
        sp.concurrency[0].users == 1
        and sp.concurrency[-1].total_tok_s > sp.concurrency[0].total_tok_s
    )


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_context_the_pool_cannot_hold_is_refused_with_the_largest_it_takes(engine: str) -> None:
    s = make_settings(backend=engine, context=131072, quant="BF16")
    p = plan(LLAMA8B, R3090, s, PERF)
    sp = p.serving
    assert sp is not None and not sp.fits and p.recommended is None
    assert sp.refusal is not None and str(sp.largest_max_model_len) in sp.refusal
    largest = sp.largest_max_model_len
    ok = plan(LLAMA8B, R3090, replace(s, context=largest), PERF)
    assert ok.serving is not None and ok.serving.fits
    step = 16 if engine == "vllm" else 1
    over = plan(LLAMA8B, R3090, replace(s, context=largest + step), PERF)
    assert over.serving is not None and not over.serving.fits
    if engine == "sglang":
        assert sp.starts  # SGLang starts, then rejects each request this long
    else:
        assert "estimated maximum model length" in sp.refusal and not sp.starts


def test_gguf_quantizations_are_not_checkpoints() -> None:
    with pytest.raises(InvalidSettingsError, match="checkpoint format"):
        plan(LLAMA8B, R3090, make_settings(backend="vllm", quant="Q4_K_M"), PERF)


def test_auto_takes_the_best_checkpoint_that_fits() -> None:
    s = make_settings(backend="vllm", context=4096)
    p = plan(spec("qwen3-14b"), R3090, s, PERF)
    gpu = p.paths[0]
    assert gpu.fits and gpu.quant == "FP8"  # BF16 (27.5 GiB) exceeds 24 GB
    assert [o.quant for o in gpu.ladder] == ["FP8", "INT8", "AWQ"]
    too_big = plan(spec("llama-3.1-70b-instruct"), R3090, s, PERF).paths[0]
    assert not too_big.fits and too_big.quant == "AWQ" and too_big.shortfall_bytes


def test_memory_knobs_refused_for_llama_cpp() -> None:
    with pytest.raises(InvalidSettingsError, match="vLLM/SGLang setting"):
        make_settings(memory_utilization=0.8)


def test_tensor_parallel_halves_weights_and_checks_heads() -> None:
    two = rig_of(card("RTX 3090"), card("RTX 3090"))
    p = plan(LLAMA8B, two, make_settings(backend="vllm", context=8192, quant="BF16"), PERF)
    multi = next(x for x in p.paths if x.path is PathName.MULTI_GPU)
    assert multi.serving is not None and multi.serving.tensor_parallel == 2
    one = next(x for x in p.paths if x.path is PathName.GPU)
    assert one.serving is not None
    assert multi.serving.weights_bytes < 0.52 * one.serving.weights_bytes
    three = rig_of(*(card("RTX 3090") for _ in range(3)))
    with pytest.raises(InvalidSettingsError, match="divisible by tensor parallel size"):
        plan(LLAMA8B, three, make_settings(backend="vllm", tensor_parallel=3), PERF)


def test_kv_heads_are_replicated_past_their_count() -> None:
    g = spec("llama-3.1-8b-instruct").geometry  # 8 KV heads
    big = rig_of(*(card("H100 SXM") for _ in range(16)))
    s = make_settings(backend="vllm", context=8192)
    at8 = size_serving(g, big, s, list(range(8)), 8, 1, "BF16", None)
    at16 = size_serving(g, big, s, list(range(16)), 16, 1, "BF16", None)
    # one KV head per GPU either way: per-GPU KV bytes per token do not halve again
    assert at16.kv_cache_tokens == pytest.approx(at8.kv_cache_tokens, rel=0.15)


def test_checkpoint_sizes() -> None:
    g = spec("llama-3.1-70b-instruct").geometry
    assert checkpoint_bytes(g, "INT8") / GIB == pytest.approx(67.7229, abs=0.05)  # vLLM #12569
    assert checkpoint_bytes(g, "AWQ") < checkpoint_bytes(g, "FP8") < checkpoint_bytes(g, "BF16")


def test_pipeline_partition_like_vllm() -> None:
    assert pp_partition(126, 2) == (63, 63)
    assert pp_partition(32, 3) == (11, 11, 10)  # the remainder before the last stage
    assert sum(pp_partition(61, 4)) == 61


@settings(max_examples=40, deadline=None)
@given(
    total=st.integers(min_value=16, max_value=192),
    extra=st.integers(min_value=1, max_value=64),
    util=st.floats(min_value=0.5, max_value=0.95),
    engine=st.sampled_from(["vllm", "sglang"]),
)
def test_more_memory_never_shrinks_the_pool(
    total: int, extra: int, util: float, engine: str
) -> None:
    g = LLAMA8B.geometry
    # batch limits held: vLLM's defaults step up at 70 GiB (1024 sequences, 8192 tokens),
    # and the larger dummy sampling step that brings can take more than the extra memory
    s = make_settings(
        backend=engine,
        context=4096,
        memory_utilization=round(util, 3),
        max_num_seqs=256,
        max_num_batched_tokens=2048,
    )

    def pool(gib: int) -> int:
        r = rig_of(card("RTX 3090", memory_total_bytes=gib * GIB))
        return size_serving(g, r, s, [0], 1, 1, "BF16", None).kv_cache_tokens

    assert pool(total + extra) >= pool(total)


def two_hosts(gpu: str, per_host: int, preset: NetworkPreset) -> Rig:
    local = [card(gpu) for _ in range(per_host)]
    remote = [card(gpu, host="box2") for _ in range(per_host)]
    numbered = [replace(g, index=i) for i, g in enumerate(local)]
    numbered += [replace(g, index=i) for i, g in enumerate(remote)]
    return Rig(
        gpus=tuple(numbered),
        ram_total_bytes=64 * GIB,
        hosts=(Host(name="box2", address="192.168.1.11", ram_total_bytes=64 * GIB),),
        network=Network(preset=preset),
    )


def test_two_3090_hosts_run_llama70b_over_rpc() -> None:
    rig = two_hosts("RTX 3090", 1, NetworkPreset.GBE_10)
    s = make_settings(context=8192, quant="Q4_K_M")
    p = plan(spec("llama-3.3-70b-instruct"), rig, s, PERF)
    mh = next(x for x in p.paths if x.path is PathName.MULTI_HOST)
    assert mh.fits and p.recommended is PathName.MULTI_HOST
    assert mh.devices == ("cpu", "gpu:1", "gpu:0")  # the other host's GPU first
    assert p.launch is not None and p.launch.supported
    first, main = p.launch.scripts
    assert first.host == "box2" and "rpc-server" in first.text and first.order == 1
    assert "--rpc 192.168.1.11:50052" in main.text and main.host == ""
    # the network costs speed: the same two GPUs in one box decode faster
    one_box = rig_of(card("RTX 3090"), card("RTX 3090"))
    local = next(
        x
        for x in plan(spec("llama-3.3-70b-instruct"), one_box, s, PERF).paths
        if x.path is PathName.MULTI_GPU
    )
    assert mh.tok_s is not None and local.tok_s is not None and mh.tok_s < local.tok_s
    slow = two_hosts("RTX 3090", 1, NetworkPreset.GBE_1)
    mh_slow = next(
        x
        for x in plan(spec("llama-3.3-70b-instruct"), slow, s, PERF).paths
        if x.path is PathName.MULTI_HOST
    )
    assert mh_slow.tok_s is not None and mh_slow.tok_s < mh.tok_s


def test_hosts_leave_single_host_paths_alone() -> None:
    s = make_settings(context=8192)
    alone = plan(spec("llama-3.3-70b-instruct"), rig_of(card("RTX 3090")), s, PERF)
    joined = plan(
        spec("llama-3.3-70b-instruct"), two_hosts("RTX 3090", 1, NetworkPreset.GBE_10), s, PERF
    )
    for a in alone.paths:
        b = next(x for x in joined.paths if x.path is a.path)
        assert (a.quant, a.required_bytes, a.usable_bytes, a.fits) == (
            b.quant,
            b.required_bytes,
            b.usable_bytes,
            b.fits,
        )


def test_405b_on_two_h100_nodes_is_tp8_pp2_over_ray() -> None:
    rig = two_hosts("H100 SXM", 8, NetworkPreset.INFINIBAND)
    p = plan(
        spec("llama-3.1-405b-instruct"), rig, make_settings(backend="vllm", context=32768), PERF
    )
    assert p.recommended is PathName.MULTI_HOST
    sp = p.serving
    assert sp is not None and (sp.tensor_parallel, sp.pipeline_parallel) == (8, 2)
    assert p.launch is not None
    roles = [sc.role for sc in p.launch.scripts]
    assert (
        roles[0] == "Ray head" and roles[1] == "Ray worker" and roles[-1].startswith("vllm serve")
    )
    serve = p.launch.scripts[-1].text
    assert "--tensor-parallel-size 8" in serve and "--pipeline-parallel-size 2" in serve
    assert "--distributed-executor-backend ray" in serve
    sg = plan(
        spec("llama-3.1-405b-instruct"), rig, make_settings(backend="sglang", context=32768), PERF
    )
    assert sg.launch is not None and [sc.host for sc in sg.launch.scripts] == ["", "box2"]
    assert all("--nnodes 2" in sc.text for sc in sg.launch.scripts)


def test_the_catalog_ranks_serving_engines_by_checkpoint_format() -> None:
    from rigspark_gui.core.plan.ranking import RankVerdict, rank_model

    two = rig_of(card("RTX 3090"), card("RTX 3090"))
    r = rank_model(spec("llama-3.3-70b-instruct"), two, make_settings(backend="vllm"), PERF)
    assert r.verdict is not RankVerdict.NO and r.quant == "AWQ" and r.path is PathName.MULTI_GPU
    none = rank_model(spec("llama-3.1-405b-instruct"), R3090, make_settings(backend="sglang"), PERF)
    assert none.verdict is RankVerdict.NO and none.note.startswith("needs")


def test_suggestions_stay_with_llama_cpp_quantizations() -> None:
    from rigspark_gui.catalog.quality import load_quality
    from rigspark_gui.core.plan.suggestions import suggest

    s = make_settings(backend="vllm", context=32768)
    assert suggest(spec("qwen3-32b"), R3090, s, PERF, load_quality()) == ()


def test_models_released_quantized_are_served_as_released() -> None:
    h100 = rig_of(*(card("H100 SXM") for _ in range(8)))
    oss = plan(spec("gpt-oss-120b"), h100, make_settings(backend="vllm", context=32768), PERF)
    assert oss.serving is not None and oss.serving.format == "MXFP4"
    # 4-bit experts with 16-bit attention: between all-4-bit AWQ and all-8-bit FP8
    g = spec("gpt-oss-120b").geometry
    assert checkpoint_bytes(g, "AWQ") < checkpoint_bytes(g, "MXFP4") < checkpoint_bytes(g, "FP8")
    ds = plan(spec("deepseek-v3"), h100, make_settings(backend="vllm", context=8192), PERF)
    assert all(p.quant == "FP8" for p in ds.paths)


def test_vllm_holds_sliding_layers_at_their_window() -> None:
    g3 = spec("gemma-3-27b-it")
    s = make_settings(backend="vllm", context=32768, quant="AWQ")
    hybrid = plan(g3, R3090, s, PERF).serving
    full = plan(g3, R3090, replace(s, swa_full=True), PERF).serving
    assert hybrid is not None and full is not None
    # per request the windowed layers need ~1K tokens, not 32K: more requests fit
    assert hybrid.max_concurrency > 2 * full.max_concurrency


def test_tensor_parallel_must_split_the_kv_heads_too() -> None:
    five = rig_of(*(card("RTX 3090") for _ in range(5)))
    q32 = spec("qwen2.5-32b-instruct")  # 40 heads, 8 KV heads: TP 5 splits neither evenly
    p = plan(q32, five, make_settings(backend="vllm", context=4096), PERF)
    multi = next(x for x in p.paths if x.path is PathName.MULTI_GPU)
    assert multi.serving is not None and multi.serving.tensor_parallel == 1
    assert multi.serving.pipeline_parallel == 5
    with pytest.raises(InvalidSettingsError, match="KV heads"):
        plan(q32, five, make_settings(backend="vllm", tensor_parallel=5), PERF)


def test_multi_host_tp_is_the_widest_that_splits_the_heads() -> None:
    rig = two_hosts("H100 SXM", 8, NetworkPreset.INFINIBAND)
    p = plan(spec("qwen2.5-7b-instruct"), rig, make_settings(backend="vllm"), PERF)  # 28 heads
    mh = next(x for x in p.paths if x.path is PathName.MULTI_HOST)
    assert mh.serving is not None and (
        mh.serving.tensor_parallel,
        mh.serving.pipeline_parallel,
    ) == (4, 2)
    assert {g.host for g in mh.serving.gpus} == {"", "box2"}
    only_pp = plan(
        spec("qwen2.5-7b-instruct"), rig, make_settings(backend="vllm", pipeline_parallel=2), PERF
    )
    assert only_pp.recommended is not None  # a size not given follows the GPUs


def test_tied_embeddings_load_again_on_the_last_stage() -> None:
    g = spec("qwen2.5-3b-instruct").geometry
    assert g.tied_embeddings
    rig = rig_of(card("RTX 3090"), card("RTX 3090"))
    s = make_settings(backend="vllm", context=4096)
    sp = size_serving(g, rig, s, [0, 1], 1, 2, "BF16", None)
    first, last = sp.gpus
    embedding = 2 * g.n_vocab * g.n_embd
    # the first stage has the embedding, the last the same table again as its head
    assert abs(last.weights_bytes - first.weights_bytes) < 0.1 * embedding


def test_compute_capability_compares_as_numbers() -> None:
    from rigspark_gui.core.serving.throughput import compute_at_least

    assert compute_at_least(card("RTX 3090", compute_capability="10.0"), 8, 9)
    assert not compute_at_least(card("RTX 3090", compute_capability="8.6"), 8, 9)
    assert not compute_at_least(card("RTX 3090", compute_capability=None), 8, 9)


def test_rigs_refuse_names_that_would_break_a_script_line() -> None:
    from pydantic import ValidationError

    from rigspark_gui.formats.rig import read_rig

    with pytest.raises(ValidationError, match=r"hosts\.0\.name"):
        read_rig({"ram_total_bytes": 1, "hosts": [{"name": "box2\ntouch /tmp/x #"}]})
    with pytest.raises(ValidationError, match="address"):
        read_rig({"ram_total_bytes": 1, "address": "10.0.0.1\nrm -rf ~"})


def test_a_placement_on_two_hosts_follows_llama_cpp_order() -> None:
    from rigspark_gui.core.launch import Engine, launch_command
    from rigspark_gui.core.placement import auto_place

    rig = two_hosts("RTX 3090", 1, NetworkPreset.GBE_10)
    m = spec("llama-3.3-70b-instruct")
    s = make_settings(context=8192)
    placement = auto_place(m.geometry, rig, s)  # what Auto-place and `place --ngl` give
    assert placement.unit("blk.0").device == "gpu:1" and placement.unit("output").device == "gpu:0"
    cmd = launch_command(Engine.LLAMA_CPP, placement, m, "Q4_K_M", s, rig)
    assert cmd.supported and "--rpc 192.168.1.11:50052" in cmd.text


def test_a_rig_of_several_hosts_saves_and_opens_as_it_was(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from pathlib import Path

    from rigspark_gui.catalog.rig_file import load_rig, save_rig

    root = Path(__file__).resolve().parents[2]
    rig = load_rig(root / "examples" / "rig-two-hosts-3090.json", DB)
    assert [(g.host, g.index) for g in rig.gpus] == [("", 0), ("box2", 0)]
    assert rig.link.label == "10 GbE" and rig.address == "192.168.1.10"
    save_rig(rig, tmp_path / "rig.json")
    assert load_rig(tmp_path / "rig.json", DB) == rig


def test_nvlink_sharp_buffers_only_for_groups_over_two_gpus() -> None:
    """NCCL sets up NVLink SHARP (NVLS) buffers only when a communicator spans more than
    two GPUs (src/transport/nvls.cc, ncclNvlsInit): TP 2 on NVLink-switched H100s grows
    by the PCIe figure (0.55 GiB logged, llm-d-benchmark), TP 4 by ~2 GiB (vllm#21429)."""
    h100 = card("H100 SXM", nvlink=True, compute_capability="9.0")
    s = make_settings(backend="vllm", context=16000)
    g = load_entry("qwen3-32b").geometry
    two = size_serving(g, rig_of(h100, h100), s, [0, 1], 2, 1, "BF16", None)
    four = size_serving(g, rig_of(h100, h100, h100, h100), s, [0, 1, 2, 3], 4, 1, "BF16", None)
    assert two.non_torch_bytes < 0.5 * GIB
    assert four.non_torch_bytes > 1.5 * GIB


def test_mxfp4_on_hopper_notes_the_triton_layout() -> None:
    """Marlin's padded MXFP4 layout is planned; on Hopper the note gives what vLLM's
    Triton backend loads instead: 64.38 GiB logged for gpt-oss-120b on one H100
    (llm-d-benchmark, vllm#33155), 13.47 for gpt-oss-20b."""
    from rigspark_gui.core.serving.checkpoint import mxfp4_triton_saving

    h100 = card("H100 SXM", compute_capability="9.0")
    s = make_settings(backend="vllm", context=16000, memory_utilization=0.95)
    for model_id, logged in (("gpt-oss-120b", 64.38), ("gpt-oss-20b", 13.47)):
        g = load_entry(model_id).geometry
        sp = size_serving(g, rig_of(h100), s, [0], 1, 1, "MXFP4", None)
        triton = (sp.weights_bytes - mxfp4_triton_saving(g, 1)) / GIB
        assert triton == pytest.approx(logged, rel=0.01)
        assert any("Triton backend on Hopper" in n for n in sp.notes)
