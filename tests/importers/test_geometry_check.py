"""The pydantic-free geometry check (catalog/geometry_check.py) applies the boundary's own
rule: its table equals formats.model_spec.Geometry field by field, it gives the same
record, and whatever it is not sure of goes to pydantic."""

from __future__ import annotations

import dataclasses

import pytest
from annotated_types import Ge, Gt, Le
from pydantic_core import PydanticUndefined

from rigspark_gui.catalog.geometry_check import RANGES, checked_geometry
from rigspark_gui.core.model import Geometry
from rigspark_gui.formats.model_spec import Geometry as GeometryFile

_KINDS = {int: "int", bool: "bool", str: "str", tuple[int, ...]: "ints"}


def test_the_table_is_the_pydantic_model() -> None:
    assert set(RANGES) == set(GeometryFile.model_fields)
    record_defaults = {f.name: f.default for f in dataclasses.fields(Geometry)}
    for name, f in GeometryFile.model_fields.items():
        ann = f.annotation
        args = getattr(ann, "__args__", ())
        optional = type(None) in args
        base = next(a for a in args if a is not type(None)) if optional else ann
        kind = _KINDS[base] + ("?" if optional else "")
        low = next((m.gt for m in f.metadata if isinstance(m, Gt)), None)
        strict = low is not None
        if low is None:
            low = next((m.ge for m in f.metadata if isinstance(m, Ge)), None)
        high = next((m.le for m in f.metadata if isinstance(m, Le)), None)
        assert RANGES[name] == (kind, low, strict, high), name
        if f.default is not PydanticUndefined:  # the record's default is the format's
            assert record_defaults[name] == f.default, name


def _fields(**kw: object) -> dict[str, object]:
    base: dict[str, object] = dict(
        architecture="llama", n_layer=32, n_embd=4096, n_head=32, n_head_kv=8,
        head_dim_k=128, head_dim_v=128, n_vocab=128256, n_ff=14336, context_length=131072,
    )  # fmt: skip
    base.update(kw)
    return base


@pytest.mark.parametrize(
    "kw",
    [{}, {"sliding_window": 4096, "swa_pattern": 2}, {"recurrent_layers": [1, 3]},
     {"n_ff_per_layer": tuple(range(32))}, {"tied_embeddings": True}],
)  # fmt: skip
def test_the_same_record_as_pydantic(kw: dict[str, object]) -> None:
    assert checked_geometry(_fields(**kw)) == GeometryFile(**_fields(**kw)).to_record()


@pytest.mark.parametrize(
    "kw",
    [{"n_layer": 0}, {"n_layer": 5000}, {"n_expert_used": 9, "n_expert": 8, "n_ff_expert": 64},
     {"bogus": 1}, {"n_layer": "x"}, {"n_ff_per_layer": (0, 1, 2)}],
)  # fmt: skip
def test_what_pydantic_refuses_is_refused_alike(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError) as ours:
        checked_geometry(_fields(**kw))
    with pytest.raises(ValueError) as theirs:
        GeometryFile(**_fields(**kw)).to_record()
    assert str(ours.value) == str(theirs.value)


def test_a_value_pydantic_converts_is_converted_by_pydantic() -> None:
    assert checked_geometry(_fields(tied_embeddings=1)).tied_embeddings is True
