"""`rigspark-plan fit` against what llama.cpp b11434's own `llama-fit-params` printed on
every case of validation/fit_cases.json (docs/validation-fit.md): the same `-c`, `-ngl`,
`-ts` and `-ot`, or the same refusal. The cases that still differ are listed by name
with why; one that starts agreeing must leave the list."""

from __future__ import annotations

import pytest

from validation.fit_compare import Result, compare

# DeepSeek-V2-Lite over three RPC devices: the last device's buffer, bound by the head's
# logits, rises by 28 MiB when it also runs the middle device's overflowing ffn_down
# (llama.cpp 236.26 MiB against 208.0 without it). ggml-alloc puts the last layer's output
# row into a hole the guest FFN's copies left (32.26 MiB up, where it is otherwise 4 MiB
# up) and the logits above it: where that hole lies depends on every allocation before
# it, which the per-phase formula does not replay. RigSpark's GATE probe there stays
# under the target (2258 MiB against 2290) and keeps one more tensor on the device.
KNOWN_MISSES = frozenset({"fit-deepseek2-lite-Q4_0/rpc3-partial"})


@pytest.fixture(scope="module")
def results() -> list[Result]:
    return compare(["avx2", "avx512"])


def test_every_case_agrees_with_llama_fit_params(results: list[Result]) -> None:
    wrong = [
        f"{r.name}: llama.cpp {r.expected!r} (exit {r.expected_rc}), RigSpark {r.got!r}"
        for r in results
        if not r.agrees and r.name not in KNOWN_MISSES
    ]
    assert wrong == []


def test_the_known_misses_are_still_misses(results: list[Result]) -> None:
    fixed = [r.name for r in results if r.agrees and r.name in KNOWN_MISSES]
    assert fixed == [], "these agree now: take them off KNOWN_MISSES"


def test_the_suite_covers_every_kind_of_decision(results: list[Result]) -> None:
    outputs = [r.expected for r in results]
    assert len(results) >= 100
    assert any(r.expected_rc != 0 for r in results)  # fit gives up
    assert any("-ts" in o for o in outputs) and any("-ot" in o for o in outputs)
    assert any(o.startswith("-c") and "-ngl -1" in o for o in outputs)
    agree = sum(r.agrees for r in results)
    assert agree >= 99
