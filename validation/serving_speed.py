"""Serving decode speed against published vLLM runs (held out: nothing here was fitted
to them; the shares of bandwidth and FLOPS come from llama.cpp's calibration).

Each case: GPU with its spec-sheet bandwidth and FP16 FLOPS, model, format, TP, the
concurrency, the tokens in context while decoding, and the measured per-request decode
speed (1 / TPOT) it reported.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from rigspark_gui.catalog.models import load_entry
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.core.rig import Gpu, Rig, Vendor
from rigspark_gui.core.serving import size_serving
from rigspark_gui.core.settings import make_settings

GIB = 1 << 30
# spec sheets: memory GiB, bandwidth GB/s, dense FP16 TFLOPS
GPUS = {
    "H100 SXM": (80, 3350.0, 989.4),
    "A100 SXM 80GB": (80, 2039.0, 312.0),
    "A100 SXM 40GB": (40, 1555.0, 312.0),
    "RTX 4090": (24, 1008.0, 165.2),
}


# the runs FOUR_BIT_DECODE was fitted on (every other run is held out)
FITTED = {("qwen2.5-7b-instruct", "AWQ"), ("qwen2.5-32b-instruct", "AWQ")}


class Case(NamedTuple):
    source: str
    what: str
    gpu: str
    tp: int
    model: str
    fmt: str
    users: int
    depth: int  # tokens in context during decode (input + half the output)
    measured_tok_s: float  # per request


CASES = (
    Case("https://yobitelcomm.github.io/bench/recipes/concurrency-sweep/",
         "vLLM 0.21.0, TPOT p50 6.48 ms", "H100 SXM", 1, "llama-3.1-8b-instruct", "BF16",
         1, 512, 1000 / 6.48),
    Case("https://yobitelcomm.github.io/bench/recipes/concurrency-sweep/",
         "vLLM 0.21.0, 4 concurrent, TPOT p50 6.59 ms", "H100 SXM", 1,
         "llama-3.1-8b-instruct", "BF16", 4, 512, 1000 / 6.59),
    Case("https://johnmusgrave.com/p/vllm-throughput-latency-sweep-on",
         "vLLM 0.23.0, 1024 in / 128 out, 'about 75 tokens/sec'", "A100 SXM 40GB", 1,
         "llama-3.1-8b-instruct", "BF16", 1, 1088, 75.0),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, 2048 tokens out of 1 in", "A100 SXM 80GB", 1, "qwen2.5-7b-instruct",
         "BF16", 1, 1024, 84.28),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3", "A100 SXM 80GB", 1, "qwen2.5-14b-instruct", "BF16", 1, 1024, 46.30),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, TP 4", "A100 SXM 80GB", 4, "qwen2.5-72b-instruct", "BF16", 1, 1024,
         31.37),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, AWQ", "A100 SXM 80GB", 1, "qwen2.5-7b-instruct", "AWQ", 1, 1024, 148.10),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, AWQ", "A100 SXM 80GB", 1, "qwen2.5-14b-instruct", "AWQ", 1, 1024, 92.66),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, GPTQ-Int4", "A100 SXM 80GB", 1, "qwen2.5-7b-instruct", "GPTQ", 1, 1024,
         154.05),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, GPTQ-Int4", "A100 SXM 80GB", 1, "qwen2.5-32b-instruct", "GPTQ", 1, 1024,
         55.83),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, AWQ", "A100 SXM 80GB", 1, "qwen2.5-32b-instruct", "AWQ", 1, 1024, 51.92),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, AWQ, TP 2", "A100 SXM 80GB", 2, "qwen2.5-72b-instruct", "AWQ", 1, 1024,
         44.30),
    Case("https://qwen.readthedocs.io/en/latest/benchmark/speed_benchmark.html",
         "vLLM 0.6.3, GPTQ-Int8", "A100 SXM 80GB", 1, "qwen2.5-7b-instruct", "INT8", 1, 1024,
         122.01),
    Case("https://github.com/tenstorrent/tt-inference-server/issues/125",
         "vLLM, 128 in / 128 out, TPOT 17.1 ms (dtype not stated: BF16 assumed)", "RTX 4090",
         1, "qwen2.5-7b-instruct", "BF16", 1, 192, 1000 / 17.1),
)  # fmt: skip


def predict(c: Case) -> tuple[float, float, float]:
    """(point, low, high) per-request tokens/s RigSpark gives for a case."""
    mem, bw, tflops = GPUS[c.gpu]
    gpu = Gpu(
        name=c.gpu, vendor=Vendor.NVIDIA, memory_total_bytes=mem * GIB, bandwidth_gbps=bw,
        fp16_tflops=tflops, compute_capability="9.0" if "H100" in c.gpu else "8.0",
        nvlink="RTX" not in c.gpu,
    )  # fmt: skip
    rig = Rig(gpus=tuple(replace(gpu, index=i) for i in range(c.tp)),
              ram_total_bytes=512 * GIB)  # fmt: skip
    g = load_entry(c.model).geometry
    s = make_settings(backend="vllm", context=4096, prompt_tokens=c.depth)
    perf = load_perf()
    sp = size_serving(g, rig, s, list(range(c.tp)), c.tp, 1, c.fmt, perf, users_at=[c.users])
    point = sp.concurrency[0].per_user_tok_s
    assert perf.decode is not None
    return point, point * perf.decode.band.low, point * perf.decode.band.high


def table() -> str:
    rows = [
        "| run | GPU | model | format | users | measured tok/s | RigSpark (band) | error |",
        "|---|---|---|---|---:|---:|---|---:|",
    ]
    for c in CASES:
        point, low, high = predict(c)
        fit = " (fitted)" if (c.model, c.fmt) in FITTED else ""
        rows.append(
            f"| [{c.what}]({c.source}) | {c.tp}× {c.gpu} | {c.model} | {c.fmt}{fit} | "
            f"{c.users} | {c.measured_tok_s:.1f} | {point:.1f} ({low:.0f}–{high:.0f}) | "
            f"{point / c.measured_tok_s - 1:+.0%} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
