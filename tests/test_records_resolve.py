"""Every record class's annotations name things that exist at run time: a field whose
type cannot be found would be checked as `Any`, and looked up again on every record."""

from __future__ import annotations

import importlib
import pkgutil

import rigspark_gui
from rigspark_gui.core.record import Record


def _all_subclasses(cls: type) -> set[type]:
    out: set[type] = set()
    for sub in cls.__subclasses__():
        out |= {sub, *_all_subclasses(sub)}
    return out


def test_every_record_class_resolves_its_field_types() -> None:
    for info in pkgutil.walk_packages(rigspark_gui.__path__, "rigspark_gui."):
        if ".ui" in info.name or info.name.endswith(("__main__", "probe_script")):
            continue  # the window's modules need Qt; the probe script runs in a child
        importlib.import_module(info.name)
    classes = {c for c in _all_subclasses(Record) if c.__module__.startswith("rigspark_gui")}
    assert len(classes) > 60
    unresolved = []
    for cls in classes:
        cls._type_checks()
        if cls.__checks__ is None:
            unresolved.append(f"{cls.__module__}.{cls.__qualname__}")
    assert unresolved == []
