"""Held-out errors of the speed model on the published runs of the newer families
(Qwen3.5/3.6, Qwen3-Next, Nemotron 3, Gemma 4, GLM-4.7-Flash, MiniMax M2, gpt-oss).

data/perf.json keeps these rows without an `arch`: the fit skips them, as it skips any
model its table does not describe. Here each row gets the geometry of its catalog model
as the engine reads it (K/V per token of the attention layers at the row's depth, sliding
layers capped at their cache, the recurrent state read and written back per token), and
every device is predicted from a fit on the other devices with these rows included.

    .venv/bin/python -m validation.speed_new_families [--no-state] [--rows]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from typing import Any

from rigspark_gui.catalog.models import load_entry
from rigspark_gui.core.memory import kv_cells, kv_row_pair_bytes, weights_layout
from rigspark_gui.core.model import KvCacheType
from rigspark_gui.core.settings import PlanSettings
from rigspark_gui.core.speed.placed import state_traffic
from validation import speed_fit, speed_rows

# model column (lower case) -> catalog model with the same text geometry; first match wins
CATALOG: tuple[tuple[str, str], ...] = (
    (r"qwen35moe 35b\.a3b|qwen3\.[56]-35b-a3b", "qwen3.6-35b-a3b"),
    (r"qwen35 27b", "qwen3.6-27b"),
    (r"gemma4 26b\.a4b|gemma-4-26b-a4b", "gemma-4-26b-a4b-it"),
    (r"gemma4 31b", "gemma-4-31b-it"),
    (r"deepseek2 30b\.a3b", "glm-4.7-flash"),
    (r"minimax-m2 230b", "minimax-m2.7"),
    (r"nemotron_h_moe 120b", "nemotron-3-super-120b-a12b"),
    (r"nemotron_h_moe 31b|nemotron-3-nano-30b", "nemotron-3-nano-30b-a3b"),
    (r"qwen3next 80b", "qwen3-next-80b-a3b-instruct"),
)
FAMILY = {
    "qwen3.6-35b-a3b": "qwen35moe", "qwen3.6-27b": "qwen35", "gemma-4-26b-a4b-it": "gemma4",
    "gemma-4-31b-it": "gemma4", "glm-4.7-flash": "deepseek2 (GLM-4.7-Flash)",
    "minimax-m2.7": "minimax-m2", "nemotron-3-super-120b-a12b": "nemotron_h_moe",
    "nemotron-3-nano-30b-a3b": "nemotron_h_moe", "qwen3-next-80b-a3b-instruct": "qwen3next",
}  # fmt: skip
F16 = KvCacheType.F16  # llama-bench's default cache


def catalog_id(model: str) -> str | None:
    m = model.lower()
    return next((mid for pat, mid in CATALOG if re.search(pat, m)), None)


def arch_of(model_id: str, depth: float, tokens: int, params_b: float | None) -> dict[str, Any]:
    """speed_rows.Arch fields of a catalog model for a row read at `depth`."""
    spec = load_entry(model_id).to_spec()
    g = spec.geometry
    layout = weights_layout(spec, spec.available_quants[0])
    d = max(int(depth), 1)
    s = PlanSettings(context=max(-(-(d + tokens) // 256) * 256, 256))
    kv = sum(
        kv_row_pair_bytes(g, il, F16, F16) * min(d, kv_cells(g, il, s)) for il in range(g.n_layer)
    )
    return {
        "n_layer": g.n_layer,
        "n_vocab": g.n_vocab,
        "n_embd": g.n_embd,
        "kv_values_per_token": kv / 2 / d,
        "params_b": params_b or layout.n_params / 1e9,
        "active_params_b": layout.n_active_params / 1e9 if g.n_expert else None,
        "tied": g.tied_embeddings,
        "state_bytes": float(sum(state_traffic(g))),
    }


def with_arch(perf: dict[str, Any], state: bool = True) -> dict[str, Any]:
    """perf.json's rows, the new-family GPU rows given their catalog geometry."""
    rows = []
    for raw in perf["rows"]:
        mid = catalog_id(str(raw.get("model")))
        parsed = speed_rows.parse_test(str(raw.get("test", "")))
        if mid is None or raw.get("arch") or raw.get("backend") == "cpu" or parsed is None:
            rows.append(raw)
            continue
        kind, tokens = parsed
        depth = float(raw.get("depth") or 0) + (tokens / 2 if kind == "tg" else 0)
        arch = arch_of(mid, depth, tokens, raw.get("params_b"))
        if not state:
            arch["state_bytes"] = 0.0
        rows.append({**raw, "arch": arch, "family": FAMILY[mid]})
    return {**perf, "rows": rows}


def _stats(ratios: list[float]) -> str:
    errs = sorted(abs(r - 1) for r in ratios)
    p90 = speed_fit.quantile(errs, 0.9)
    return (
        f"n={len(ratios):3d}  median |err| {100 * statistics.median(errs):5.1f}%  "
        f"p90 {100 * p90:5.1f}%  median measured/predicted {statistics.median(ratios):.2f}"
    )


def main(argv: list[str]) -> None:

    perf = with_arch(json.loads(speed_rows.PERF_PATH.read_text()), state="--no-state" not in argv)
    rows, _ = speed_rows.build_rows(perf, speed_rows.load_gpu_db())
    held = speed_fit.leave_one_device_out(rows)
    by: dict[tuple[str, str], list[float]] = {}
    gpu_tg: list[float] = []
    for h in held:
        if h.ratio is None:
            continue
        if h.row.kind == "tg" and not h.row.is_cpu:
            gpu_tg.append(h.ratio)
        fam = h.row.raw.get("family")
        if fam is None:
            continue
        by.setdefault((fam, h.row.kind), []).append(h.ratio)
        if "--rows" in argv and h.row.kind == "tg":
            r = h.row.raw
            print(f"{r['device'][:24]:24s} {h.row.backend:6s} {str(r['model'])[:38]:38s} "
                  f"{r['test']:6s} d{r.get('depth') or 0:<6} {h.row.measured:7.2f} "
                  f"{h.predicted:7.2f} {100 * (h.ratio - 1):+6.1f}%")  # fmt: skip
    for (fam, kind), ratios in sorted(by.items()):
        print(f"{fam:26s} {kind}  {_stats(ratios)}")
    print(f"{'all GPU decode rows':26s} tg  {_stats(gpu_tg)}")


if __name__ == "__main__":
    main(sys.argv[1:])
