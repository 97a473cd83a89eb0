"""RigSpark's serving figures against the start-up logs in validation/serving_cases.json.

`budget` cases are planned from the GPU and the memory the log says was free before the
weights loaded (free = that + the CUDA context RigSpark assumes, so both sides start from
the same number); `pool` cases start from the KV memory the engine reported; `weights`
and `activation` cases compare the weights loaded and the profiled torch peak of the
same plan; `verdict` cases (a log that ends before any figure) only whether it starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from rigspark_gui.catalog.models import load_entry
from rigspark_gui.core.model import Geometry
from rigspark_gui.core.model.ggml_types import KvCacheType
from rigspark_gui.core.rig import Gpu, Rig, Vendor
from rigspark_gui.core.serving import (
    CUDA_CONTEXT_BYTES,
    ServingPlan,
    kv_bytes_per_token,
    sglang_pool,
    size_serving,
    vllm_hybrid_pool,
    vllm_pool,
)
from rigspark_gui.core.settings import make_settings

CASES = Path(__file__).with_name("serving_cases.json")
GIB = 1 << 30
KV_TARGET = 0.05  # the KV pool within 5 % of the engine's


@dataclass(frozen=True)
class Outcome:
    case: dict[str, object]
    kv_ours: float  # tokens (or GiB for cases that log only memory)
    kv_logged: float
    starts_ours: bool
    largest_ours: int | None = None
    concurrency_ours: float | None = None
    needed_ours_gib: float | None = None
    weights_ours_gib: float | None = None

    @property
    def kv_error(self) -> float:
        return self.kv_ours / self.kv_logged - 1 if self.has_figure else 0.0

    @property
    def has_figure(self) -> bool:
        """False for a log that ends before it prints a figure (verdict only)."""
        return self.case["kind"] != "verdict"

    @property
    def verdict_right(self) -> bool:
        logged = self.case["logged"]
        assert isinstance(logged, dict)
        return self.starts_ours == bool(logged["starts"])


def load_cases() -> list[dict[str, object]]:
    cases: list[dict[str, object]] = json.loads(CASES.read_text())["cases"]
    return cases


def _plan(case: dict[str, object], g: Geometry) -> ServingPlan:
    """The plan for a case's GPUs, settings and format, from the model alone."""
    n = int(case["gpus"])  # type: ignore[call-overload]
    tp = int(case["tp"])  # type: ignore[call-overload]
    total = int(float(case["gpu_total_gib"]) * GIB)  # type: ignore[arg-type]
    free = int(float(case["free_before_load_gib"]) * GIB) + CUDA_CONTEXT_BYTES  # type: ignore[arg-type]
    gpu = Gpu(
        name=str(case["gpu"]),
        vendor=Vendor.NVIDIA,
        memory_total_bytes=total,
        memory_free_bytes=min(free, total),
        nvlink=bool(case.get("nvlink", False)),
        compute_capability="9.0" if case.get("nvlink") else None,
    )
    rig = Rig(gpus=tuple(replace(gpu, index=i) for i in range(n)), ram_total_bytes=1 << 40)
    s = make_settings(
        backend=case["engine"],
        context=case["context"],
        kv_k=KvCacheType(str(case["kv"])),
        kv_v=KvCacheType(str(case["kv"])),
        memory_utilization=case["memory_utilization"],
        max_num_seqs=case.get("max_num_seqs"),
        max_num_batched_tokens=case.get("max_num_batched_tokens"),
    )
    return size_serving(g, rig, s, list(range(n)), tp, n // tp, str(case["format"]), None)


def _budget(case: dict[str, object]) -> Outcome:
    entry = load_entry(str(case["model"]))
    sp = _plan(case, entry.geometry)
    logged = case["logged"]
    assert isinstance(logged, dict)
    if "kv_cache_tokens" in logged:
        ours, theirs = float(sp.kv_cache_tokens), float(logged["kv_cache_tokens"])
    else:
        b = sp.gpus[0]
        # vLLM logs what is left of its claim, negative when nothing is
        raw = b.budget_bytes - b.weights_bytes - b.activation_bytes - b.non_torch_bytes
        ours = (raw if case["engine"] == "vllm" else b.kv_cache_bytes) / GIB
        theirs = float(logged.get("available_kv_gib", ours))
    return Outcome(
        case,
        ours,
        theirs,
        sp.starts,
        largest_ours=sp.largest_max_model_len,
        concurrency_ours=sp.max_concurrency,
        weights_ours_gib=sp.weights_bytes / GIB,
    )


def _pool(case: dict[str, object]) -> Outcome:
    g = load_entry(str(case["model"])).geometry
    tp = int(case["tp"])  # type: ignore[call-overload]
    kv_b = 1 if case["kv"] == "fp8" else 2
    per_token = kv_bytes_per_token(g, range(g.n_layer), tp, kv_b)
    available = int(float(case["available_kv_gib"]) * GIB)  # type: ignore[arg-type]
    ctx = int(case["context"])  # type: ignore[call-overload]
    attn = [il for il in range(g.n_layer) if g.kv_heads(il)]
    sliding = [il for il in attn if g.is_sliding(il)] if g.sliding_window else []
    if case["engine"] == "vllm" and sliding:
        # vLLM's hybrid manager (gpt-oss, Gemma): groups of full and sliding layers
        batched = int(case.get("max_num_batched_tokens", 2048))  # type: ignore[call-overload]
        pool = vllm_hybrid_pool(
            available, per_token // len(attn), len(attn) - len(sliding), len(sliding),
            g.sliding_window or 0, batched, ctx, g.context_length,
        )  # fmt: skip
    else:
        pool = (vllm_pool if case["engine"] == "vllm" else sglang_pool)(available, per_token, ctx)
    logged = case["logged"]
    assert isinstance(logged, dict)
    starts = pool.blocks > 0 and pool.needed_bytes <= available
    if "kv_cache_tokens" in logged:
        ours, theirs = float(pool.tokens), float(logged["kv_cache_tokens"])
    else:
        ours, theirs = float(pool.largest_max_model_len), float(logged["largest_max_model_len"])
    return Outcome(
        case,
        ours,
        theirs,
        starts,
        largest_ours=pool.largest_max_model_len,
        concurrency_ours=round(pool.max_concurrency, 2),
        needed_ours_gib=pool.needed_bytes / GIB,
    )


def _weights(case: dict[str, object]) -> Outcome:
    o = _budget(case)
    logged = case["logged"]
    assert isinstance(logged, dict)
    w = o.weights_ours_gib or 0.0
    return Outcome(case, w, float(logged["weights_gib"]), o.starts_ours, weights_ours_gib=w)


def _activation(case: dict[str, object]) -> Outcome:
    """The profiled torch peak ("torch peak memory increase") of the planned budget."""
    entry = load_entry(str(case["model"]))
    sp = _plan(case, entry.geometry)
    logged = case["logged"]
    assert isinstance(logged, dict)
    ours = sp.activation_bytes / GIB
    return Outcome(case, ours, float(logged["activation_gib"]), sp.starts)


def _verdict(case: dict[str, object]) -> Outcome:
    o = _budget(case)
    return Outcome(case, 1.0, 1.0, o.starts_ours, weights_ours_gib=o.weights_ours_gib)


def evaluate() -> list[Outcome]:
    kinds = {
        "budget": _budget,
        "pool": _pool,
        "weights": _weights,
        "activation": _activation,
        "verdict": _verdict,
    }
    return [kinds[str(c["kind"])](c) for c in load_cases()]


def _link(c: dict[str, object]) -> str:
    src = str(c["source"])
    return f"[{c['id']}]({src})" if src.startswith("http") else f"{c['id']} ({src})"


def table() -> str:
    """The Markdown table docs/validation-serving.md shows."""
    rows = [
        "| case | engine | kind | what | logged | RigSpark | error | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    whats = {"weights": "weights", "activation": "torch peak", "verdict": "start"}
    for o in evaluate():
        c = o.case
        unit = "tokens" if o.kv_logged > 1000 else "GiB"
        what = whats.get(str(c["kind"]), "KV pool")

        def fmt(v: float, tokens: bool = unit == "tokens") -> str:
            return f"{v:,.0f}" if tokens else f"{v:.2f} GiB"

        verdict = "starts" if o.starts_ours else "refuses"
        logged, ours, err = (
            (fmt(o.kv_logged), fmt(o.kv_ours), f"{o.kv_error:+.1%}")
            if o.has_figure
            else ("—", "—", "—")
        )
        rows.append(
            f"| {_link(c)} | {c['engine']} {c['version']} | {c['kind']} | {what} | "
            f"{logged} | {ours} | {err} | {verdict} {'✓' if o.verdict_right else '✗'} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
