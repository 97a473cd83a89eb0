"""Hardware detection: each probe turns one part of the machine into `Rig` figures."""

from rigspark_gui.hardware.detect import detect, to_json

__all__ = ["detect", "to_json"]
