"""What a quantization costs in quality, from measurements (data/quant_quality.json).

The measure is llama.cpp's own: the KL divergence of the quantized model's next-token
distribution from the 16-bit model's (lower is better), with the perplexity increase
and how often the top token stays the same where published. Quality orders the
quantizations Auto tries, and a type that is both larger and worse than another
(measured on the same model) is never recommended: it is "dominated".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

FULL_PRECISION = frozenset({"F32", "F16", "BF16"})
# words for a KL divergence, with the upper bound of each (llama.cpp's Llama 3 8B
# scoreboard puts Q8_0 at 0.001, Q4_K_M at 0.03, Q3_K_M at 0.1, Q2_K at 0.3-0.45)
_WORDS = (
    (0.002, "no visible loss"),
    (0.015, "very small loss"),
    (0.05, "small loss"),
    (0.12, "moderate loss"),
    (0.35, "large loss"),
    (float("inf"), "severe loss"),
)


def loss_words(kld: float | None) -> str:
    if kld is None:
        return "quality unknown"
    if kld == 0:
        return "no loss"
    return next(words for bound, words in _WORDS if kld < bound)


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantQuality:
    quant: str
    # KL divergence to 16-bit as shown (None: unmeasured)
    kld: float | None
    # with an importance matrix
    kld_imatrix: float | None = None
    # without an importance matrix
    kld_plain: float | None = None
    ppl_delta: float | None = None
    same_top_pct: float | None = None
    # its size on the measured model, for dominance
    reference_gib: float | None = None
    imatrix_required: bool = False
    words: str
    basis: str

    @property
    def label(self) -> str:
        """'Q4_K_M · small loss · KLD ≈ 0.031'."""
        if self.kld is None:
            return f"{self.quant} · {self.words}"
        if self.kld == 0:
            return f"{self.quant} · {self.words}"
        return f"{self.quant} · {self.words} · KLD ≈ {self.kld:.3g}"


@dataclass(frozen=True, slots=True, kw_only=True)
class QualityTable:
    """Measured quality per quantization type, and the ordering it implies."""

    entries: dict[str, QuantQuality]
    # the model and source the figures come from
    reference: str
    # KV cache types 'k/v' -> KL divergence to f16/f16
    kv_kld: dict[str, float] = field(default_factory=dict)
    kv_basis: str = ""

    def kv_words(self, k: str, v: str) -> str:
        """The quality cost of a KV cache precision, in words and number."""
        kld = self.kv_kld.get(f"{k}/{v}")
        if kld is None:
            return f"K {k} / V {v}: quality cost not measured"
        return f"K {k} / V {v}: {loss_words(kld)} (KLD ≈ {kld:.2g})"

    def of(self, quant: str) -> QuantQuality | None:
        q = quant.upper()
        hit = self.entries.get(q)
        if hit is None and q in FULL_PRECISION:
            return QuantQuality(quant=q, kld=0.0, words="no loss", basis="16/32-bit: the reference")
        return hit

    def sort_key(self, quant: str) -> float:
        """Best quality first; unmeasured types after every measured one."""
        if quant.upper() in FULL_PRECISION:
            return -1.0 if quant.upper() != "F32" else -2.0
        e = self.entries.get(quant.upper())
        best = _best_kld(e) if e is not None else None
        return best if best is not None else float("inf")

    def order(self, quants: Iterable[str]) -> list[str]:
        return sorted(quants, key=self.sort_key)

    def dominated_by(self, quant: str, among: Sequence[str]) -> str | None:
        """A type in `among` that is no larger and better than `quant` (measured on the
        same model), or None. Importance-matrix figures are compared where measured: the
        files people download mostly carry one."""
        me = self.entries.get(quant.upper())
        if me is None or me.reference_gib is None or _best_kld(me) is None:
            return None
        mine = _best_kld(me)
        assert mine is not None
        for other in among:
            o = self.entries.get(other.upper())
            if o is None or o.quant == me.quant or o.reference_gib is None:
                continue
            theirs = _best_kld(o)
            if theirs is None:
                continue
            smaller_or_same = o.reference_gib <= me.reference_gib
            if smaller_or_same and (
                theirs < mine or (theirs == mine and o.reference_gib < me.reference_gib)
            ):
                return o.quant
        return None

    def auto_order(self, quants: Sequence[str]) -> list[str]:
        """What Auto tries, best quality first: no dominated type."""
        kept = [q for q in quants if self.dominated_by(q, quants) is None]
        return self.order(kept)


def _best_kld(e: QuantQuality) -> float | None:
    values = [v for v in (e.kld_imatrix, e.kld_plain, e.kld) if v is not None]
    return min(values) if values else None
