"""The measured quality of each quantization (data/quant_quality.json), loaded once, and
the quantization list a synthesized model offers: every llama-quantize type the recipe
knows, best quality first, with the dominated ones marked."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from rigspark_gui.catalog.json_file import parse_json
from rigspark_gui.core.errors import CatalogError, validation_message
from rigspark_gui.core.model import QualityTable, QuantQuality, loss_words, quant_recipe
from rigspark_gui.resources import data_file

REFERENCE_MODEL = "llama-3-8b"
# llama-quantize refuses these without an importance matrix (tools/quantize/quantize.cpp)
_IMATRIX_FALLBACK = frozenset({"IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "Q2_K_S"})


def imatrix_required() -> frozenset[str]:
    return frozenset(getattr(quant_recipe, "IMATRIX_REQUIRED", _IMATRIX_FALLBACK))


def quality_file() -> Path:
    return data_file("quant_quality.json")


@lru_cache(maxsize=1)
def load_quality() -> QualityTable:
    """The quality table, validated (its records kept for the same bytes)."""
    from rigspark_gui.catalog.validated import layout_of, read_bytes, read_validated

    path = quality_file()
    data = read_bytes(path, what="quantization quality", error=CatalogError, max_bytes=1 << 20)
    return read_validated(
        data,
        kind="quality",
        layout=layout_of(QualityTable, QuantQuality),
        validate=lambda b: parse_quality(parse_json(b, path), path.name),
    )


def parse_quality(raw: object, source: str = "quant_quality.json") -> QualityTable:
    from rigspark_gui.catalog.files import QualityFile

    try:
        checked = QualityFile.model_validate(raw)
    except ValueError as err:  # pydantic's ValidationError
        raise CatalogError(f"{source}: {validation_message(err)}") from None
    return build_table(checked.model_dump())


def build_table(raw: dict[str, Any]) -> QualityTable:
    sources: dict[str, str] = raw.get("sources", {})
    rows = [r for r in raw.get("rows", []) if r.get("model") == REFERENCE_MODEL]
    top = {
        r["quant"]: r["same_top_pct"]
        for r in raw.get("scaling", [])
        if r.get("model") == REFERENCE_MODEL and "same_top_pct" in r
    }
    small = {r["quant"]: r["kld"] for r in raw.get("scaling", []) if r.get("model") == "llama-2-7b"}
    needs = imatrix_required()
    entries: dict[str, QuantQuality] = {}
    for quant in dict.fromkeys(r["quant"] for r in rows):
        plain = next((r for r in rows if r["quant"] == quant and not r["imatrix"]), None)
        imat = next((r for r in rows if r["quant"] == quant and r["imatrix"]), None)
        shown = plain or imat
        assert shown is not None
        how = "without an importance matrix" if plain else "with an importance matrix"
        basis = f"measured on Llama 3 8B {how} ({sources.get(shown['source'], shown['source'])})"
        if quant in small:
            basis += (
                f"; Llama 2 7B loses less at the same type (KLD {small[quant]:.3g}): "
                "older and larger models quantize more gracefully"
            )
        if plain and imat:
            basis += f"; with an importance matrix: KLD {imat['kld']:.3g}"
        entries[quant] = QuantQuality(
            quant=quant,
            kld=shown["kld"],
            kld_imatrix=imat["kld"] if imat else None,
            kld_plain=plain["kld"] if plain else None,
            ppl_delta=shown["ppl_delta"],
            same_top_pct=top.get(quant),
            reference_gib=shown["size_gib"],
            imatrix_required=quant in needs,
            words=loss_words(shown["kld"]),
            basis=basis,
        )
    kv = {
        f"{r['kv_k']}/{r['kv_v']}": float(r["kld"])
        for r in raw.get("kv_rows", [])
        if r.get("model") == REFERENCE_MODEL
    }
    return QualityTable(
        entries=entries,
        reference=sources.get("llama3-8b-scoreboard", ""),
        kv_kld=kv,
        kv_basis="measured on Llama 3 8B: " + sources.get("kv-cache-pr7412", ""),
    )


def synthesized_quants(full: str) -> tuple[tuple[str, ...], dict[str, str]]:
    quants, dominated = _synthesized(full)
    return quants, dict(dominated)


@lru_cache(maxsize=4)  # the same for every model with the same 16-bit form
def _synthesized(full: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Every type llama-quantize offers, best quality first (16-bit `full` leads,
    unmeasured types last), and the ones Auto never picks with what beats them."""
    table = load_quality()
    # 16-bit is `full`; the ternary TQ types keep only weights trained ternary (BitNet):
    # for any other model they are larger than IQ1_S and worse, so Auto never picks them
    ternary = ("TQ1_0", "TQ2_0")
    skip = {"F32", "F16", "BF16", "MXFP4", *ternary}
    known = [q for q in quant_recipe.FTYPE_DEFAULT if q not in skip]
    other = "F16" if full == "BF16" else "BF16"
    ordered = (full, other, "F32", *table.order(known), *ternary)
    dominated = {q: by for q in ordered if (by := table.dominated_by(q, ordered)) is not None}
    dominated["F32"] = full  # the same weights at twice the size
    # MXFP4_MOE is the format gpt-oss is released in; on other models its quality is not
    # measured, so Auto does not bet on it (it stays a choice)
    if "MXFP4_MOE" in ordered:
        dominated["MXFP4_MOE"] = ""
    if "IQ1_S" in ordered:
        dominated.update({t: "IQ1_S" for t in ternary})
    return ordered, tuple(dominated.items())


def quality_of(quants: tuple[str, ...]) -> dict[str, QuantQuality]:
    """The measured quality of each of `quants` that has been measured."""
    return dict(_quality_of(quants))


@lru_cache(maxsize=8)
def _quality_of(quants: tuple[str, ...]) -> tuple[tuple[str, QuantQuality], ...]:
    table = load_quality()
    return tuple((q, found) for q in quants if (found := table.of(q)) is not None)
