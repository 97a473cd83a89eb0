"""Calibrate the speed model on this machine with llama.cpp itself."""

from typing import TYPE_CHECKING, Any

from rigspark_gui.calibrate.calibration import (
    DEFAULT_QUANTS,
    DeviceRun,
    LocalCalibration,
    apply,
    calibration_path,
    load_calibration,
    run_calibration,
    save_calibration,
    with_local_calibration,
)

if TYPE_CHECKING:
    from rigspark_gui.calibrate.runners import (
        CalibrationCancelled,
        CalibrationError,
        find_runner,
    )

__all__ = [
    "DEFAULT_QUANTS",
    "CalibrationCancelled",
    "CalibrationError",
    "DeviceRun",
    "LocalCalibration",
    "apply",
    "calibration_path",
    "find_runner",
    "load_calibration",
    "run_calibration",
    "save_calibration",
    "with_local_calibration",
]


def __getattr__(name: str) -> Any:
    """The llama.cpp runners (subprocess and friends) load only when calibrating."""
    if name in ("CalibrationCancelled", "CalibrationError", "find_runner"):
        from rigspark_gui.calibrate import runners

        return getattr(runners, name)
    raise AttributeError(name)
