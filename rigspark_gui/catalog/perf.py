"""The speed model's fitted parameters (`data/speed_model.json`, written by
scripts/calibrate_speed.py from the cited rows of `data/perf.json`)."""

from __future__ import annotations

from pathlib import Path

from rigspark_gui.catalog.json_file import read_json
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
    """The calibrated speed model shipped with the program."""
    path = path or data_file("speed_model.json")
    return parse_speed_model(
        read_json(path, what="speed calibration", error=CatalogError), path.name
    )
