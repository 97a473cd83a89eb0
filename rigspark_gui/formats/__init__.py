"""Every file and JSON format RigSpark reads or writes, as pydantic models.

One module per format. Each model validates what comes in (types, ranges, unknown
fields) and turns into the engine's plain records (`to_record`); records go back out
through the same models. The engine (`core/`) has no validation framework of its own.

Modules import pydantic, so import them where a file is read or written, not at start-up.
"""
