"""Serving figures against vLLM and SGLang start-up logs (validation/serving_cases.json).

Every case must land within 5 % of what the engine logged, with the engine's verdict
(starts or refuses), except the misses listed here with the bound docs/validation-serving.md
states for them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from validation.serving import KV_TARGET, evaluate

OUTCOMES = {str(o.case["id"]): o for o in evaluate()}
# vLLM's activation peak of a 235B MoE at TP 4 is under-estimated by ~1.3 GiB (its
# fused-MoE and sampler buffers together): the pool comes out high.
KNOWN_MISSES = {"vllm-qwen3-235b-fp8-4xh200": 0.20}


@pytest.mark.parametrize("case_id", sorted(OUTCOMES))
def test_case_within_target(case_id: str) -> None:
    o = OUTCOMES[case_id]
    bound = KNOWN_MISSES.get(case_id, KV_TARGET)
    assert abs(o.kv_error) <= bound, f"{case_id}: {o.kv_ours:.2f} vs {o.kv_logged:.2f}"
    assert o.verdict_right


def test_enough_cases_of_each_engine() -> None:
    engines = [str(o.case["engine"]) for o in OUTCOMES.values() if o.case["kind"] != "weights"]
    assert engines.count("vllm") >= 5 and engines.count("sglang") >= 4


def test_refusals_give_the_engines_estimate() -> None:
    refused = [o for o in OUTCOMES.values() if o.case["kind"] == "pool" and not o.starts_ours]
    assert refused
    for o in refused:
        logged = o.case["logged"]
        assert isinstance(logged, dict)
        assert o.needed_ours_gib == pytest.approx(float(logged["needed_kv_gib"]), abs=0.01)
