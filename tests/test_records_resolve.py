"""Every pydantic model of the program resolves its field types and builds its schema:
a name that cannot be found would only fail when the first file of that format is read.
And the engine's records stay plain frozen dataclasses."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

from pydantic import BaseModel

import rigspark_gui


def _all_subclasses(cls: type) -> set[type]:
    out: set[type] = set()
    for sub in cls.__subclasses__():
        out |= {sub, *_all_subclasses(sub)}
    return out


def _import_all() -> None:
    for info in pkgutil.walk_packages(rigspark_gui.__path__, "rigspark_gui."):
        if ".ui" in info.name or info.name.endswith(("__main__", "probe_script")):
            continue  # the window's modules need Qt; the probe script runs in a child
        importlib.import_module(info.name)


def test_every_boundary_model_builds_its_schema() -> None:
    _import_all()
    models = {c for c in _all_subclasses(BaseModel) if c.__module__.startswith("rigspark_gui")}
    assert len(models) > 25
    for cls in models:
        if getattr(cls, "__pydantic_generic_metadata__", {}).get("parameters"):
            continue
        schema = cls.model_json_schema()
        assert schema.get("type") == "object" or "$ref" in schema, cls


def test_engine_records_are_frozen_slotted_dataclasses() -> None:
    _import_all()
    import sys

    core = [m for name, m in sys.modules.items() if name.startswith("rigspark_gui.core")]
    records = [
        obj
        for m in core
        for obj in vars(m).values()
        if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == m.__name__
    ]
    assert len(records) > 40
    for cls in records:
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen, cls
        assert "__slots__" in vars(cls), cls
    assert not any(
        issubclass(c, BaseModel) for m in core for c in vars(m).values() if isinstance(c, type)
    )
