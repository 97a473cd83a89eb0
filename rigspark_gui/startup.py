"""Process start-up shared by the entry points."""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_PLUGIN_LOADER = "pydantic.plugin._loader"


def without_pydantic_plugins() -> None:
    """Run this process without pydantic plugins (third-party validation hooks that
    RigSpark does not use). pydantic finds plugins through importlib.metadata when it
    builds its first model, and importing that (email, zipfile, csv, ...) is ~15 ms of
    a ~200 ms `rigspark-plan` run. The stand-in answers "no plugins"; any other name
    pydantic might ask of its loader loads the real one, so a newer pydantic still works.
    A no-op once pydantic has built a model."""
    if _PLUGIN_LOADER in sys.modules:
        return
    stand_in = types.ModuleType(_PLUGIN_LOADER)

    def get_plugins() -> tuple[()]:
        return ()

    def real(name: str) -> Any:
        if name.startswith("__"):  # the import system probing (__path__, ...)
            raise AttributeError(name)
        sys.modules.pop(_PLUGIN_LOADER, None)
        return getattr(importlib.import_module(_PLUGIN_LOADER), name)

    stand_in.get_plugins = get_plugins  # type: ignore[attr-defined]
    stand_in.__getattr__ = real  # type: ignore[method-assign]
    sys.modules[_PLUGIN_LOADER] = stand_in
