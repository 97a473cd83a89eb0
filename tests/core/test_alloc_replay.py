"""The replay of llama.cpp's scheduler and ggml-alloc (core/fit/alloc_replay.py) over the
DeepSeek-V2 graph (core/fit/graph_deepseek2.py) against the compute buffers llama.cpp
b11434 reserved.

Expected figures: `sched_reserve: <device> compute buffer size = X MiB` printed by
llama-fit-params b11434 (`-lv 5`, fit's no_alloc dry run) for the fit-deepseek2-lite-Q4_0
GGUF of validation/fit_cases.json over three local ggml-rpc-servers (validation/
fit_suite.py), with `-ngl 28`, the `-c`, `-ts` and `-ot` given per case."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from rigspark_gui.core.fit import graph_deepseek2
from rigspark_gui.core.fit.alloc_replay import _Tallocr, allocate, split_graph
from rigspark_gui.core.model import Geometry
from tests.core.test_kv_cache import DEEPSEEK_V2_LITE

# DeepSeek-V2-Lite, as validation/fit_suite.py writes it (the same geometry)
DSV2_LITE = DEEPSEEK_V2_LITE
CPU = 3  # three RPC devices, then the CPU
EXPS = r"blk\.{}\.ffn_(up|down|gate_up|gate)_(ch|)exps"


def _replay(
    ctx: int,
    split: Sequence[int],
    rules: list[tuple[str, int]],
    g: Geometry = DSV2_LITE,
    copies: int = 1,
) -> list[float]:
    homes = [d for d, n in enumerate(split) for _ in range(n)]
    graph = graph_deepseek2.build(
        g,
        512,
        ctx,
        homes[: g.n_layer],
        homes[-1],
        graph_deepseek2.weight_homes(rules),
        len(split),
        pin_norms=False,
    )
    peaks = allocate(split_graph(graph, len(split) + 1, copies))
    return [round(peaks.get(d, 0) / 2**20, 2) for d in range(len(split))]


def _experts_on_cpu(first: int) -> list[tuple[str, int]]:
    return [(EXPS.format(il), CPU) for il in range(first, DSV2_LITE.n_layer)]


# (case, -c, -ts, -ot as (pattern, backend), llama.cpp's MiB per device)
CASES = [
    # fit's GATE probe of rpc3-partial: the middle device's ffn_down runs on the last
    (
        "guest-down",
        16384,
        (9, 5, 14),
        [
            (r"blk\.8\.ffn_down.*", 1),
            (r"blk\.13\.ffn_down.*", 2),
            (r"blk\.18\.ffn_(gate|gate_up|down).*", CPU),
            *_experts_on_cpu(19),
        ],
        [96.13, 79.01, 236.26],
    ),
    (
        "no-guest",
        16384,
        (9, 5, 14),
        [
            (r"blk\.8\.ffn_down.*", 1),
            (r"blk\.18\.ffn_(gate|gate_up|down).*", CPU),
            *_experts_on_cpu(19),
        ],
        [96.13, 79.01, 208.00],
    ),
    ("experts-4k", 4096, (9, 5, 14), _experts_on_cpu(17), [84.13, 61.77, 236.26]),
    ("experts-40k", 40960, (9, 5, 14), _experts_on_cpu(17), [120.13, 97.77, 232.26]),
    (
        "guest-ffn",
        16384,
        (13, 10, 5),
        [(r"blk\.22\.ffn_(gate|up|gate_up|down).*", 2), *_experts_on_cpu(26)],
        [96.13, 73.77, 208.00],
    ),
    (
        "guest-ffn-down",
        16384,
        (13, 10, 5),
        [(r"blk\.22\.ffn_down.*", 2), *_experts_on_cpu(26)],
        [96.13, 73.77, 236.26],
    ),
    ("idle-middle", 16384, (8, 0, 20), [(r"blk\.7\.ffn_down.*", 2)], [96.13, 0.0, 236.26]),
]


@pytest.mark.parametrize(
    ("ctx", "split", "rules", "llama"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_replay_reserves_what_llama_cpp_reserved(
    ctx: int, split: tuple[int, int, int], rules: list[tuple[str, int]], llama: list[float]
) -> None:
    assert _replay(ctx, split, rules) == llama


# A q-LoRA variant (the same model with 28 layers, which llama.cpp does not take for the
# Lite, and q_lora_rank 768), -ts 9,5,14 over -ngl 29: layers 0-9, 10-14 and 15-27 (its
# load_tensors lines); blk.13's FFN tensors run on the last device.
QLORA = replace(DSV2_LITE, n_layer=28, q_lora_rank=768)


@pytest.mark.parametrize(
    ("ctx", "guest", "llama"),
    [
        (16384, r"blk\.13\.ffn_down.*", [96.13, 73.77, 208.00]),
        (4096, r"blk\.13\.ffn_(gate|up|gate_up|down).*", [84.13, 61.77, 236.26]),
    ],
)
def test_replay_follows_a_low_rank_q(ctx: int, guest: str, llama: list[float]) -> None:
    rules = [(guest, 2), *((EXPS.format(il), CPU) for il in range(17, 28))]
    assert _replay(ctx, (10, 5, 14), rules, QLORA) == llama


@pytest.mark.parametrize(
    ("ctx", "split", "llama"),
    [
        (4096, (14, 14), [153.04, 256.03]),
        (16384, (9, 5, 14), [201.04, 181.02, 304.03]),
    ],
)
def test_replay_keeps_four_copies_of_each_input_under_pipeline_parallelism(
    ctx: int, split: tuple[int, ...], llama: list[float]
) -> None:
    """No -ot and every layer on a device: llama.cpp logs `pipeline parallelism enabled`
    and `sched copies = 4`."""
    assert _replay(ctx, split, [], copies=4) == llama


def test_best_fit_takes_the_smallest_hole_and_else_grows_the_end() -> None:
    a = _Tallocr()
    x, y, z = a.alloc(100), a.alloc(64), a.alloc(200)  # 128 + 64 + 224 with 32 B alignment
    assert (x, y, z) == (0, 128, 192)
    a.free(x, 100)  # a 128 B hole at 0
    a.free(z, 200)  # merges into the end
    assert a.alloc(64) == 0  # the hole, not the end
    assert a.alloc(96) == 192  # too big for the 64 B left at 64: the end
    assert a.max == 416
    a.free(y, 64)  # 64 and 128 merge into one 128 B hole at 64
    assert a.alloc(128) == 64


def test_covers_deepseek_v2_files_with_flash_attention_and_softmax_routing() -> None:
    v2 = ["blk.1.ffn_gate_inp.weight", "blk.1.ffn_down_exps.weight"]
    assert graph_deepseek2.covers(DSV2_LITE, True, v2)
    assert not graph_deepseek2.covers(DSV2_LITE, False, v2)
    # V3-style routing (its router bias), or unknown (a catalog model without a file)
    assert not graph_deepseek2.covers(DSV2_LITE, True, [*v2, "blk.1.exp_probs_b.bias"])
    assert not graph_deepseek2.covers(DSV2_LITE, True, None)
    llama = Geometry(
        architecture="llama",
        n_layer=2,
        n_embd=64,
        n_head=4,
        n_head_kv=4,
        head_dim_k=16,
        head_dim_v=16,
        n_vocab=100,
        n_ff=128,
        context_length=1024,
    )
    assert not graph_deepseek2.covers(llama, True, ["blk.0.attn_q.weight"])
