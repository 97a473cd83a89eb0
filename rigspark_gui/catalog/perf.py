"""Backend efficiencies (`data/perf.json`), each calibrated on cited measurements."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from rigspark_gui.catalog.json_file import read_json
from rigspark_gui.core.errors import CatalogError
from rigspark_gui.core.throughput import BackendPerf, EfficiencyRange, PerfProfile
from rigspark_gui.resources import data_file


def _range(raw: object, where: str) -> EfficiencyRange | None:
    if raw is None:
        return None
    try:
        return EfficiencyRange.model_validate(raw)
    except ValidationError as err:
        raise CatalogError(f"perf.json {where}: {err.errors()[0]['msg']}") from None


def parse_perf(raw: object) -> PerfProfile:
    if not isinstance(raw, dict) or not isinstance(raw.get("backends"), dict):
        raise CatalogError("perf.json: expected an object with a 'backends' object")
    backends: dict[str, BackendPerf] = {}
    for key, entry in raw["backends"].items():
        if not isinstance(entry, dict):
            raise CatalogError(f"perf.json backend {key}: expected an object")
        decode = _range(entry.get("decode_efficiency"), f"{key}.decode_efficiency")
        if decode is None:
            continue  # no sourced decode figure: estimates for it stay unknown
        calib = entry.get("calibration") or []
        sources = "; ".join(str(c.get("source", "")) for c in calib if isinstance(c, dict))
        backends[key] = BackendPerf(
            decode_efficiency=decode,
            prefill_efficiency=_range(entry.get("prefill_efficiency"), f"{key}.prefill"),
            source=sources[:2000],
        )
    return PerfProfile(backends=backends, source="data/perf.json")


def load_perf(path: Path | None = None) -> PerfProfile:
    path = path or data_file("perf.json")
    return parse_perf(read_json(path, what="speed calibration", error=CatalogError))
