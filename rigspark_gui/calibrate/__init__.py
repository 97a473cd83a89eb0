"""Calibrate the speed model on this machine with llama.cpp itself."""

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
