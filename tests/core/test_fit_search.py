"""llama.cpp's --fit decision procedure (core/fit/search.py) over hand-made dry runs:
each rule of common/fit.cpp pinned with numbers worked out by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rigspark_gui.core.fit.outcome import fit_command
from rigspark_gui.core.fit.search import (
    MIB,
    FitProblem,
    LayerFraction,
    Measurement,
    Probe,
    Use,
    common_fit,
    overflow_pattern,
)

N_LAYER = 32
LAYER = 200 * MIB  # weights of one block
HEAD = 300 * MIB  # the output layer
KV_PER_TOKEN = 64 * 1024  # bytes of KV per context cell, all layers together
COMPUTE = 100 * MIB


def dense_measure(n_layer: int = N_LAYER, gpus: int = 1) -> object:
    """Blocks of LAYER bytes, KV proportional to the layers held, COMPUTE per device that
    holds anything; the host row holds the rest (no GPU: everything)."""

    def measure(p: Probe) -> Measurement:
        kv_layer = p.context * KV_PER_TOKEN // n_layer
        if p.layers is None:
            # the user's settings: every layer on the GPU(s), split evenly
            nd = gpus
            layers = [(n_layer + 1) // gpus] * gpus
            layers[-1] += n_layer + 1 - sum(layers)
        else:
            nd = len(p.layers)
            layers = [d.n_layer for d in p.layers]
        devices = []
        for i in range(nd):
            n = layers[i] if i < len(layers) else 0
            blocks = n - (1 if i == nd - 1 and n > 0 else 0)
            model = blocks * LAYER + (HEAD if i == nd - 1 and n > 0 else 0)
            devices.append(Use(model, blocks * kv_layer, COMPUTE if n else 0))
        on_host = n_layer + 1 - sum(layers)
        host = Use(max(on_host, 0) * LAYER, 0, COMPUTE)
        return Measurement(tuple(devices), host)

    return measure


def cpu_measure(p: Probe) -> Measurement:
    return Measurement((), Use(N_LAYER * LAYER + HEAD, p.context * KV_PER_TOKEN, COMPUTE))


def problem(**kw: object) -> FitProblem:
    base: dict[str, object] = dict(
        free=(),
        host_total=16 << 30,
        margins=(1024 * MIB,),
        n_layer=N_LAYER,
        n_ctx_train=131072,
        n_expert=0,
        context=0,
        min_context=4096,
        streams=1,
    )
    base.update(kw)
    return FitProblem(**base)  # type: ignore[arg-type]


def used(ctx: int) -> int:
    return N_LAYER * LAYER + HEAD + ctx * KV_PER_TOKEN + COMPUTE


def test_nothing_changes_when_the_host_keeps_its_margin() -> None:
    total = used(131072) + 1024 * MIB
    d = common_fit(problem(host_total=total), cpu_measure)
    assert (d.status, d.context, d.ngl) == ("unchanged", 131072, None)


def test_the_context_is_interpolated_and_rounded_down_to_256() -> None:
    host = 14 << 30
    d = common_fit(problem(host_total=host), cpu_measure)
    # by hand: target = host - margin; used(c) is linear in c
    target = host - 1024 * MIB
    lo, hi = used(4096), used(131072)
    exact = 4096 + (131072 - 4096) * (target - lo) // (hi - lo)
    assert d.status == "fitted"
    assert d.context == exact - exact % 256
    assert d.context % 256 == 0 and used(d.context) <= target


def test_no_gpu_and_too_big_at_the_minimum_context_gives_up() -> None:
    d = common_fit(problem(host_total=used(4096)), cpu_measure)
    assert d.status == "failed"
    assert "unable to fit model into system memory" in d.reason
    assert d.context == 4096  # fit left the minimum in place before giving up


def test_a_context_the_user_set_is_never_shrunk() -> None:
    d = common_fit(problem(host_total=8 << 30, context=65536), cpu_measure)
    assert d.status == "failed" and d.context == 65536
    assert any("context size set by user to 65536" in line for line in d.log)


def test_dash_c_0_asks_for_the_full_context() -> None:
    d = common_fit(problem(host_total=8 << 30, min_context=None), cpu_measure)
    assert d.status == "failed" and d.context == 131072
    assert any("user has requested full context size" in line for line in d.log)


def test_streams_scale_the_context_and_its_alignment() -> None:
    d = common_fit(problem(host_total=14 << 30, streams=4), cpu_measure)
    assert d.initial_context == 4 * 131072
    assert d.context % (256 * 4) == 0 and d.context >= 4 * 4096


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"user_ngl": 20}, "n_gpu_layers already set by user to 20, abort"),
        ({"user_ngl": -2}, "n_gpu_layers already set by user to -2, abort"),
        ({"user_overrides": True}, "tensor_buft_overrides already set by user"),
    ],
)
def test_user_placement_flags_make_fit_give_up(kw: dict[str, object], reason: str) -> None:
    d = common_fit(
        problem(free=(8 << 30,), margins=(1024 * MIB,), context=8192, **kw), dense_measure()
    )
    assert d.status == "failed" and reason in d.reason


def test_a_user_split_or_row_mode_gives_up_on_several_gpus() -> None:
    two = {"free": (3 << 30, 3 << 30), "margins": (1024 * MIB, 1024 * MIB), "context": 8192}
    d = common_fit(problem(**two, user_split=True), dense_measure(gpus=2))
    assert "tensor_split already set by user" in d.reason
    d = common_fit(problem(**two, split_mode="row"), dense_measure(gpus=2))
    assert "LLAMA_SPLIT_MODE_ROW" in d.reason


def test_one_gpu_fills_the_most_layers_that_keep_the_margin() -> None:
    free = 4 << 30
    d = common_fit(problem(free=(free,), context=8192), dense_measure())
    assert d.status == "fitted" and d.ngl is not None
    kv_layer = 8192 * KV_PER_TOKEN // N_LAYER

    def need(n: int) -> int:  # n slots from the back: the head and n - 1 blocks
        return (n - 1) * (LAYER + kv_layer) + HEAD + COMPUTE

    target = free - 1024 * MIB
    assert need(d.ngl) <= target < need(d.ngl + 1)


def test_two_gpus_fill_back_to_front_and_say_so_with_ts() -> None:
    d = common_fit(
        problem(free=(4 << 30, 3 << 30), margins=(1024 * MIB,) * 2, context=8192),
        dense_measure(gpus=2),
    )
    assert d.status == "fitted"
    assert len(d.split) == 2 and sum(d.split) == d.ngl
    # the last device was filled first: it holds the head and as many blocks as fit
    assert d.split[1] > 0 and d.split[0] > 0
    assert fit_command(d.context, d.ngl or 0, d.split, ()) == (
        f"-c 8192 -ngl {d.ngl} -ts {d.split[0]},{d.split[1]}"
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2 << 30, max_value=12 << 30), st.integers(0, 4 << 30))
def test_more_free_memory_never_means_fewer_layers(free: int, more: int) -> None:
    p = problem(free=(free,), context=8192)
    a = common_fit(p, dense_measure())
    b = common_fit(replace(p, free=(free + more,)), dense_measure())
    layers = [N_LAYER + 1 if d.status == "unchanged" else (d.ngl or 0) for d in (a, b)]
    assert layers[1] >= layers[0]


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=9 << 30, max_value=24 << 30), st.integers(0, 8 << 30))
def test_more_host_memory_never_means_a_smaller_context(host: int, more: int) -> None:
    a = common_fit(problem(host_total=host), cpu_measure)
    b = common_fit(problem(host_total=host + more), cpu_measure)
    if a.status != "failed":
        assert b.status != "failed" and b.context >= a.context


def test_the_overflow_patterns_are_fits_own() -> None:
    assert overflow_pattern(7, LayerFraction.MOE) == r"blk\.7\.ffn_(up|down|gate_up|gate)_(ch|)exps"
    assert overflow_pattern(3, LayerFraction.ATTN) == r"blk\.3\.ffn_(gate|up|gate_up|down).*"
    assert overflow_pattern(3, LayerFraction.UP) == r"blk\.3\.ffn_(gate|gate_up|down).*"
    assert overflow_pattern(3, LayerFraction.GATE) == r"blk\.3\.ffn_down.*"


def test_fit_params_prints_ts_up_to_the_last_device_with_layers() -> None:
    assert fit_command(4096, 20, (20, 0), ()) == "-c 4096 -ngl 20"
    assert fit_command(4096, 30, (10, 20, 0), ("a=CPU", "b=CUDA1")) == (
        '-c 4096 -ngl 30 -ts 10,20 -ot "a=CPU,b=CUDA1"'
    )
