"""Seed-OSS, Apertus, ERNIE 4.5 MoE, MiniMax M2 and Mistral Small 4 against llama.cpp
b11434's own loader.

The method of arch_b11434.py (llama-server under gdb, every buffer's exact bytes) on the
synthetic GGUFs of synth_more.py; the importer reads each file back into the geometry it
was written from. The prediction is the catalog path's (weights synthesized from the
geometry at F16, not read from the header).

    python validation/more_b11434.py                 # measure, write the JSON
    python validation/more_b11434.py --report-only   # re-predict the recorded rows
    python validation/more_b11434.py --report-only --doc
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import validation.arch_b11434 as arch  # noqa: E402
from rigspark_gui.catalog.gguf_import import import_gguf  # noqa: E402
from rigspark_gui.formats.jsonable import jsonable  # noqa: E402
from validation.arch_b11434 import MIB, SETTINGS, evaluate, run_server  # noqa: E402
from validation.run_validation import parse_log  # noqa: E402
from validation.synth_more import MODELS, write_gguf  # noqa: E402

OUT = Path(__file__).with_name("more_b11434.json")
WORK = ROOT / "validation" / ".work" / "more"


def measure() -> dict[str, Any]:
    WORK.mkdir(parents=True, exist_ok=True)
    arch.WORK, arch.PORT = WORK, 18994  # its own gdb script and port beside arch_b11434's
    rows: list[dict[str, Any]] = []
    models: dict[str, Any] = {}
    for name, g in MODELS.items():
        path = WORK / f"{name}.gguf"
        write_gguf(g, path)
        imported = import_gguf(path).geometry
        models[name] = {
            "geometry": jsonable(g),
            "import_round_trip": imported == g,
            "skipped_bytes": 0,
        }
        for ctx, fa, kv in SETTINGS:
            log = run_server(path, ctx, fa, kv)
            m = parse_log(log)
            if not m["buffers"]:
                raise SystemExit(f"{name}: no buffer lines\n{log[-3000:]}")
            rows.append({"model": name, "context": ctx, "flash_attn": fa, "kv_type": kv,
                         "load_mode": "auto",
                         "measured": {k: m[k] for k in ("weights", "kv", "compute", "output")},
                         "exact": m["exact"], "buffers": m["buffers"]})  # fmt: skip
            print(name, ctx, fa, kv, {k: m[k] for k in ("weights", "kv", "compute", "output")})
    return {"llama_cpp": "b11434 (llama-server under gdb)", "models": models, "rows": rows}


DOC_HEADER = (
    "## Seed-OSS, Apertus, ERNIE 4.5 MoE, MiniMax M2 and Mistral Small 4 against llama.cpp b11434"
)

DOC_INTRO = """
`validation/more_b11434.py` applies the method above (llama-server of build b11434 under
gdb, CPU, `-np 1`, `-ub 512`) to synthetic GGUFs written by `validation/synth_more.py` from
RigSpark's synthesized tensor list (`core/memory/arch_more.py`); each file is read back
through the GGUF importer into the geometry it was written from, and llama.cpp's refusal
of any missing, extra or misshapen tensor makes each load a proof of the list.
`tests/validation/test_more_b11434.py` re-predicts every row.

The models: `seed-oss-like` (Q/K/V biases, the pre-FFN norm stored as
`post_attention_norm`); `apertus-like` (per-head Q/K norms, ungated FFN, xIELU parameters
as metadata); `ernie45-moe-like` (a dense first layer, then 8 experts with the router's
bias and two shared experts of twice the expert width, tied embeddings);
`minimax-m2-like` (Q/K norms over the whole projection, rotary on half of each head,
experts with a sigmoid router and its bias on every layer); `mistral4-like` (Mistral
Small 4 as `conversion/mistral3.py` writes it for deepseek2's loader: MLA with split
`attn_k_b` / `attn_v_b` and a latent cache of kv_lora_rank + rope values, experts with gate
and up fused in one `ffn_gate_up_exps`, a shared expert).
"""


def doc_section(data: dict[str, Any]) -> str:
    lines = [DOC_HEADER, DOC_INTRO]
    lines.append("| model | ctx | FA | K/V | weights B (err) | KV B (err) | output B (err) | "
                 "compute MiB pred / act |")  # fmt: skip
    lines.append("|---|---|---|---|---|---|---|---|")
    rows = evaluate(data)
    for r in rows:
        m, e, p = r["measured"], r["error"], r["predicted"]
        lines.append(
            f"| {r['model']} | {r['context']} | {'on' if r['flash_attn'] else 'off'} | "
            f"{r['kv_type']} | {m['weights']} ({e['weights']:+d}) | {m['kv']} ({e['kv']:+d}) "
            f"| {m['output']} ({e['output']:+d}) | "
            f"{p['compute'] / MIB:.2f} / {m['compute'] / MIB:.2f} |"
        )
    exact = sum(all(r["error"][k] == 0 for k in ("weights", "kv", "output")) for r in rows)
    round_trips = sum(v["import_round_trip"] for v in data["models"].values())
    lines.append("")
    lines.append(
        f"Weights, KV and output as predicted in {exact} of {len(rows)} rows (0 bytes off); "
        f"the GGUF importer returned the written geometry for {round_trips} of "
        f"{len(data['models'])} files."
    )
    for name in data["models"]:
        sel = [r for r in rows if r["model"] == name]
        worst = max(sel, key=lambda r: abs(r["error"]["compute"]))
        tol = max(0.02 * worst["measured"]["compute"], 32 * MIB)
        verdict = "within" if abs(worst["error"]["compute"]) <= tol else "outside"
        lines.append(
            f"- {name}: compute max |error| {abs(worst['error']['compute']) / MIB:.2f} MiB "
            f"(c{worst['context']}), {verdict} the tolerance max(2 %, 32 MiB)"
        )
    lines.append("")
    return "\n".join(lines)


def report(data: dict[str, Any]) -> str:
    out = []
    for r in evaluate(data):
        e = r["error"]
        out.append(
            f"{r['model']} c{r['context']} fa{int(r['flash_attn'])} {r['kv_type']}: "
            f"weights {e['weights']:+d} B, KV {e['kv']:+d} B, output {e['output']:+d} B, "
            f"compute {e['compute'] / MIB:+.2f} MiB of {r['measured']['compute'] / MIB:.2f}"
        )
    return "\n".join(out)


def main() -> None:
    arch.run_cli(__doc__.splitlines()[0], OUT, measure, report, doc_section)


if __name__ == "__main__":
    main()
