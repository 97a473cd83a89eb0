"""Synthesized file sizes of every quantization type against published GGUF files
(data/quant_sizes.json), and docs/validation-quant.md showing the recomputed figures."""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from rigspark_gui.core.model.quant_recipe import LLAMA_QUANTIZE_TYPES

ROOT = Path(__file__).resolve().parents[2]
# Types no published file with a usable size was found for (see the page's last note)
UNSOURCED = {"TQ1_0", "TQ2_0", "Q2_K_S"}
LLAMA_8B = {"llama-3.1-8b-instruct", "meta-llama-3-8b-instruct"}  # the same tensor shapes


@cache
def report() -> ModuleType:
    path = ROOT / "scripts" / "quant_size_report.py"
    spec = importlib.util.spec_from_file_location("quant_size_report", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@cache
def checks() -> list[Any]:
    result: list[Any] = report().compute()
    return result


def test_every_row_within_its_target() -> None:
    counted = [c for c in checks() if not c.excluded]
    assert len(counted) >= 100
    off = [f"{c.model} {c.quant}: {c.error:+.2%}" for c in counted if not c.within_target]
    assert not off


def test_exact_rows_agree_to_the_header() -> None:
    """Files with exact sizes differ by the tokenizer header alone, the same for every
    type of one publisher's model, once the file's own imatrix setting is used."""
    gaps: dict[str, set[int]] = {}
    for c in checks():
        if c.rounding == 0 and c.model == "llama-3.1-8b-instruct" and c.quant != "F32":
            gaps.setdefault(c.model, set()).add(c.published - c.matched)
        if c.rounding == 0 and c.model == "qwen3-30b-a3b" and c.quant not in ("IQ4_XS", "Q5_0"):
            gaps.setdefault(c.model, set()).add(c.published - c.matched)
    assert len(gaps["llama-3.1-8b-instruct"]) == 1  # 3,714,464 bytes, every type
    assert len(gaps["qwen3-30b-a3b"]) == 1


def test_excluded_rows_say_why() -> None:
    excluded = [c for c in checks() if c.excluded]
    assert [(c.model, c.quant) for c in excluded] == [("meta-llama-3-8b-instruct", "Q2_K_S")]
    assert all(len(c.excluded) > 40 for c in excluded)


def test_llama_8b_covers_every_type_and_a_moe_model_most() -> None:
    dense = {c.quant for c in checks() if c.model in LLAMA_8B and not c.excluded}
    missing = set(LLAMA_QUANTIZE_TYPES) - dense
    assert missing == UNSOURCED | {"MXFP4_MOE"}  # MXFP4_MOE: gpt-oss, a MoE model
    moe = {c.quant for c in checks() if c.moe and not c.excluded}
    assert len(moe) >= 20 and "MXFP4_MOE" in moe


def test_every_row_cites_a_revision_or_url() -> None:
    for r in report().load_rows():
        assert re.search(r"@[0-9a-f]{7,}|https://|file id \d+", r["source"]), r


def test_doc_shows_the_recomputed_figures() -> None:
    doc = (ROOT / "docs" / "validation-quant.md").read_text(encoding="utf-8")
    assert doc == report().render(checks()), "stale: run scripts/quant_size_report.py"
