"""The speed model's fitted parameters (`data/speed_model.json`, written by
scripts/calibrate_speed.py from the cited rows of `data/perf.json`)."""

from __future__ import annotations

from pathlib import Path

from rigspark_gui.catalog.json_file import parse_json
from rigspark_gui.core.errors import CatalogError, validation_message
from rigspark_gui.core.speed import SpeedModel
from rigspark_gui.resources import data_file


def parse_speed_model(raw: object, where: str = "speed_model.json") -> SpeedModel:
    from rigspark_gui.formats.speed import SpeedModelFile

    try:
        return SpeedModelFile.model_validate(raw).to_record()  # type: ignore[no-any-return]
    except ValueError as err:
        raise CatalogError(f"{where}: {validation_message(err)}") from None


def load_perf(path: Path | None = None) -> SpeedModel:
    """The calibrated speed model shipped with the program (its record kept for the same
    bytes: see `validated`)."""
    from rigspark_gui.catalog.validated import layout_of, read_bytes, read_validated
    from rigspark_gui.core.speed import Band, DecodeParams, PrefillParams

    path = path or data_file("speed_model.json")
    data = read_bytes(path, what="speed calibration", error=CatalogError, max_bytes=32 << 20)
    return read_validated(
        data,
        kind="speed",
        layout=layout_of(SpeedModel, DecodeParams, PrefillParams, Band),
        validate=lambda b: parse_speed_model(parse_json(b, path), path.name),
    )
