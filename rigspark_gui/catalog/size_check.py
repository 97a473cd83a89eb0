"""Compare the recipe-based file size of catalog models with cited published GGUFs."""

from __future__ import annotations

from dataclasses import dataclass

from rigspark_gui.catalog.models import Catalog
from rigspark_gui.core.memory import file_bytes_estimate, weights_layout

# Publishers whose files are made with llama-quantize's default recipe. Qwen's own
# small-model GGUFs keep more tensors at high precision and are excluded from the
# agreement target (they are still listed).
STOCK_RECIPE_PUBLISHERS = ("bartowski/", "TheBloke/", "lmstudio-community/", "unsloth/")


@dataclass(frozen=True, slots=True, kw_only=True)
class SizeCheck:
    model_id: str
    quant: str
    published_bytes: int
    estimated_bytes: int
    source: str

    @property
    def error(self) -> float:
        return (self.estimated_bytes - self.published_bytes) / self.published_bytes

    @property
    def stock_recipe(self) -> bool:
        return self.source.startswith(STOCK_RECIPE_PUBLISHERS)


def size_checks(catalog: Catalog) -> list[SizeCheck]:
    out = []
    for entry in catalog.entries:
        spec = entry.to_spec()
        for quant, pub in entry.published.items():
            if quant not in spec.available_quants:
                continue
            est = file_bytes_estimate(weights_layout(spec, quant), spec.geometry)
            out.append(
                SizeCheck(
                    model_id=entry.id,
                    quant=quant,
                    published_bytes=pub.file_bytes,
                    estimated_bytes=est,
                    source=pub.source,
                )
            )
    return out
