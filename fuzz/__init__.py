"""Structural fuzzing of everything RigSpark reads from files strangers share.

`python -m fuzz` runs the campaign (see `fuzz/__main__.py`); `tests/fuzz/` runs a few
hundred inputs of it in the normal suite.
"""
