"""RigSpark: will this LLM run on this machine, where, and how fast."""

from rigspark_gui.identity import APP_VERSION as __version__

__all__ = ["__version__"]
