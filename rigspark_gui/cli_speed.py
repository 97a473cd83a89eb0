"""The speed model the CLI plans with: the published prior, scaled on this machine's
devices by its own calibration when `rigspark-plan calibrate` has run."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rigspark_gui.core.speed import SpeedModel


def speed_model() -> SpeedModel:
    from rigspark_gui.calibrate import with_local_calibration
    from rigspark_gui.catalog.perf import load_perf

    return with_local_calibration(load_perf())
