"""Engine benchmarks (not tests): one plan (llama.cpp, vLLM, several hosts), the catalog ×
every KV type, a placement edit on a 126-layer model, and the CLI's whole-process time.

Run: .venv/bin/python benchmarks/bench_engine.py
Targets (issue: planning engine): plan ≤ 2 ms, catalog × KV types ≤ 100 ms,
move_layers + device_loads ≤ 5 ms, `rigspark-plan plan --json` ≤ 0.2 s.
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rigspark_gui.catalog.gpu_database import load_gpu_database  # noqa: E402
from rigspark_gui.catalog.models import load_catalog  # noqa: E402
from rigspark_gui.catalog.perf import load_perf  # noqa: E402
from rigspark_gui.catalog.rig_file import load_rig  # noqa: E402
from rigspark_gui.core.memory import weights_layout  # noqa: E402
from rigspark_gui.core.model.ggml_types import KvCacheType  # noqa: E402
from rigspark_gui.core.placement import auto_place, device_loads, move_layers  # noqa: E402
from rigspark_gui.core.plan.planner import plan  # noqa: E402
from rigspark_gui.core.plan.ranking import rank_models  # noqa: E402
from rigspark_gui.core.settings import PlanSettings  # noqa: E402
from rigspark_gui.resources import data_file  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, float]:
    """(median, best) milliseconds of `repeat` runs after one warm-up."""
    fn()
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t) * 1000)
    return statistics.median(runs), min(runs)


def main() -> None:
    db = load_gpu_database(data_file("gpus.json"), lenient=True)
    rig = load_rig(ROOT / "examples" / "rig-2x3090.json", db)
    perf = load_perf()
    catalog = load_catalog()
    specs = list(catalog.specs())
    spec = catalog.find("llama-3.1-8b-instruct").to_spec()
    s = PlanSettings(context=8192)
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    )

    med, best = timed(lambda: plan(spec, rig, s, perf, ladders=False), 200)
    print(f"one plan (Llama-3.1-8B, 2x RTX 3090, 8K): median {med:.2f} ms, best {best:.2f} ms")
    med, best = timed(lambda: plan(spec, rig, s, perf), 100)
    print(
        f"  the same with every path's ladder (22 quantizations): median {med:.2f} ms, "
        f"best {best:.2f} ms"
    )
    from rigspark_gui.catalog.quality import load_quality
    from rigspark_gui.core.plan.suggestions import suggest

    big70 = catalog.find("llama-3.3-70b-instruct").to_spec()
    s32 = replace(s, context=32768)
    suggest(big70, rig, s32, perf, load_quality())  # layouts synthesized once
    med, best = timed(lambda: suggest(big70, rig, s32, perf, load_quality()), 10)
    print(f"suggestions (Llama-3.3-70B at 32K): median {med:.2f} ms, best {best:.2f} ms")

    big = catalog.find("llama-3.1-405b-instruct").to_spec()
    med, best = timed(lambda: plan(big, rig, s, perf, ladders=False), 50)
    print(f"one plan (Llama-3.1-405B, 126 layers): median {med:.2f} ms, best {best:.2f} ms")

    from rigspark_gui.core.settings import make_settings

    vllm = make_settings(backend="vllm", context=8192)
    med, best = timed(lambda: plan(spec, rig, vllm, perf), 100)
    print(f"one vLLM plan (Llama-3.1-8B, 2x RTX 3090): median {med:.2f} ms, best {best:.2f} ms")
    nodes = load_rig(ROOT / "examples" / "rig-2x8xh100.json", db)
    vllm32 = make_settings(backend="vllm", context=32768)
    med, best = timed(lambda: plan(big, nodes, vllm32, perf), 30)
    print(
        f"one vLLM plan (Llama-3.1-405B, two 8x H100 nodes): median {med:.2f} ms, "
        f"best {best:.2f} ms"
    )
    hosts = load_rig(ROOT / "examples" / "rig-two-hosts-3090.json", db)
    med, best = timed(lambda: plan(big70, hosts, s, perf, ladders=False), 50)
    print(
        f"one multi-host plan (Llama-3.3-70B, two RTX 3090 hosts): median {med:.2f} ms, "
        f"best {best:.2f} ms"
    )

    kv_types = [k for k in KvCacheType if k.llama_cpp]

    def catalog_all_kv() -> None:
        for k in kv_types:
            rank_models(specs, rig, replace(s, kv_k=k, kv_v=k, flash_attn=True), perf)

    t = time.perf_counter()
    catalog_all_kv()  # first: layouts, KV tables and compute buffers not yet cached
    cold = (time.perf_counter() - t) * 1000
    print(f"catalog ({len(specs)} models) x {len(kv_types)} KV types, first run: {cold:.1f} ms")
    med, best = timed(catalog_all_kv, 5)
    print(
        f"catalog ({len(specs)} models) x {len(kv_types)} KV types: "
        f"median {med:.1f} ms, best {best:.1f} ms"
    )

    layout = weights_layout(big, "Q4_K_M")
    placement = auto_place(big.geometry, rig, s)

    def edit() -> None:
        moved = move_layers(placement, ["blk.60"], "cpu")
        device_loads(moved, big.geometry, layout, rig, s)

    med, best = timed(edit, 200)
    print(f"move_layers + device_loads (126 layers): median {med:.2f} ms, best {best:.2f} ms")

    cli = [
        str(ROOT / ".venv" / "bin" / "rigspark-plan"),
        "plan",
        "--model",
        "llama-3.1-8b-instruct",
        "--rig",
        str(ROOT / "examples" / "rig-2x3090.json"),
        "--json",
    ]

    def whole() -> None:
        subprocess.run(cli, capture_output=True, check=True)

    med, best = timed(whole, 10)
    print(f"rigspark-plan plan --json, whole process: median {med:.0f} ms, best {best:.0f} ms")


if __name__ == "__main__":
    main()
