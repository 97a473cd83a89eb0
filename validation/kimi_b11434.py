"""Kimi Linear (`kimi-linear`: KDA recurrent layers + MLA attention layers, MoE) against
llama.cpp b11434's own allocator, in exact bytes.

Writes the synthetic GGUFs of synth_kimi.py, quantizes them with b11434's
llama_model_quantize, loads each on the CPU with the probe of hybrid_b11434.py
(validation/b11434_probe.c linked against b11434's static libraries, logging every
buffer's exact size) over a matrix of context, sequences, K/V types, flash attention and
a unified cache, and records every buffer beside RigSpark's prediction for the imported
GGUF header (the same predictions as the other hybrids: weights, latent KV, KDA state,
output and compute of a CPU-only load):

    python validation/kimi_b11434.py               # measure, write JSON
    python validation/kimi_b11434.py --report-only  # re-predict the recorded cases

No rollback snapshots: kimi-linear is not in llm_arch_supports_rs_rollback. No quantized
cache where `value_length` (config.json's head_dim, 72 for Kimi-Linear-48B) is not a
multiple of 32: MLA needs K and V of one type, a quantized V needs flash attention, and
flash attention with a quantized V needs n_embd_head_v divisible by its block
(llama_init_from_model, src/llama-context.cpp), so b11434 refuses the context. The recorded
cases (validation/kimi_b11434.json) are re-predicted by tests/validation/test_kimi_b11434.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from validation.arch_b11434 import run_cli  # noqa: E402
from validation.hybrid_b11434 import (  # noqa: E402
    FTYPES,
    MACHINE,
    PROBE,
    build_probe,
    parse_log,
    report,
    spec_json,
)

OUT = Path(__file__).with_name("kimi_b11434.json")
WORK = ROOT / "validation" / ".work" / "kimi"


def _grid(quant: str, name: str) -> list[dict[str, Any]]:
    base = {"n_ctx": 4096, "n_seq": 1, "type_k": "f16", "type_v": "f16", "flash_attn": True}
    cases = [base]
    if quant == "F16":
        cases += [
            {**base, "flash_attn": False},
            {**base, "n_ctx": 16384, "n_seq": 4},
            {**base, "n_ctx": 1000, "type_k": "q8_0", "type_v": "q8_0"},
            {**base, "n_ctx": 32768, "flash_attn": False},
            {**base, "n_ctx": 8192, "n_seq": 4, "kv_unified": True},
        ]
    if quant == "F16" and name == "kimi-linear-48b-widths":
        # beyond the cases the compute estimate was written on (compute_kimi): other
        # contexts (at 512 the scores fit in the hole Q's projections leave), two and
        # three sequences (513 reserved tokens) without and with flash attention, and
        # sixteen, where the KDA layers' delta-rule state outgrows MLA's Q at these widths.
        # Not on the small models: b11434 aborts building kimi-linear-moe's graph for three
        # sequences (GGML_ASSERT(ggml_can_repeat(b, a)) in ggml_add)
        cases += [
            {**base, "n_ctx": 512, "flash_attn": False},
            {**base, "n_ctx": 2048, "flash_attn": False},
            {**base, "n_ctx": 65536},
            {**base, "n_ctx": 8192, "n_seq": 2, "flash_attn": False},
            {**base, "n_ctx": 12288, "n_seq": 3},
            {**base, "n_ctx": 16384, "n_seq": 16},
        ]
    return cases


# K / V pairs whose context b11434 may refuse (flash attention on, as a quantized V needs)
_PAIRS = (("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q8_0", "f16"), ("f16", "q8_0"), ("f32", "f32"))


def _try_pair(key: str, path: Path, k: str, v: str) -> dict[str, Any]:
    """Whether b11434 creates a 4096-token context with this cache pair, and its error."""
    cmd = [str(PROBE), "measure", str(path), "4096", "1", k, v, "1", "0", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    errs = [ln for ln in p.stderr.splitlines() if "llama_init_from_model" in ln]
    refused = "RSDONE" not in p.stderr
    return {"model": key, "type_k": k, "type_v": v, "flash_attn": True, "refused": refused,
            "message": errs[-1].strip() if refused and errs else ""}  # fmt: skip


def measure(only: set[str] | None) -> dict[str, Any]:
    from rigspark_gui.catalog.gguf_import import import_gguf
    from validation.synth_kimi import MODELS, write_gguf

    if not PROBE.exists():
        build_probe()
    WORK.mkdir(parents=True, exist_ok=True)
    models: dict[str, Any] = {}
    cases: list[dict[str, Any]] = []
    refusals: list[dict[str, Any]] = []
    for m in MODELS:
        if only and m.name not in only:
            continue
        src = WORK / f"{m.name}-F32.gguf"
        write_gguf(m, src)
        for quant, ftype in FTYPES.items():
            if quant not in m.quants:
                continue
            path = WORK / f"{m.name}-{quant}.gguf"
            subprocess.run(
                [str(PROBE), "quantize", str(src), str(path), str(ftype)],
                check=True, capture_output=True,
            )  # fmt: skip
            key = f"{m.name}-{quant}"
            spec = import_gguf(path)
            models[key] = {"arch": m.geometry.architecture, "quant": quant, "spec": spec_json(spec)}
            for c in _grid(quant, m.name):
                if c["type_v"] != "f16" and (m.geometry.n_embd // m.geometry.n_head) % 32:
                    continue  # value_length not a multiple of the block: b11434 refuses
                cmd = [str(PROBE), "measure", str(path), str(c["n_ctx"]), str(c["n_seq"])]
                cmd += [c["type_k"], c["type_v"], str(int(c["flash_attn"]))]
                cmd += ["0", str(int(c.get("kv_unified", False)))]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                if p.returncode != 0 or "RSDONE" not in p.stderr:
                    raise RuntimeError(f"{key}: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
                cases.append({"model": key, **c, "measured": parse_log(p.stderr)})
            if quant == "F16":
                refusals += [_try_pair(key, path, k, v) for k, v in _PAIRS]
    return {
        "llama_cpp": "b11434 (static libraries, ~/.cache/rigspark/llama-src/build)",
        "machine": MACHINE,
        "models": models,
        "cases": cases,
        "refusals": refusals,
    }


def main() -> None:
    run_cli(__doc__.splitlines()[0], OUT, measure, report, only=True)


if __name__ == "__main__":
    main()
