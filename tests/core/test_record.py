"""Records: the validation the engine and the file formats rely on."""

from __future__ import annotations

import json
from enum import StrEnum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rigspark_gui.core.errors import validation_message
from rigspark_gui.core.record import (
    ConfigDict,
    Field,
    PrivateAttr,
    Record,
    ValidationError,
    field_validator,
    model_validator,
)
from rigspark_gui.core.rig import Cpu, Gpu, Rig


class Color(StrEnum):
    RED = "red"
    BLUE = "blue"


class Part(Record):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1, max_length=5)
    count: int = Field(default=1, ge=0)


class Box(Record):
    model_config = ConfigDict(frozen=True, extra="forbid")
    parts: tuple[Part, ...] = ()
    color: Color = Color.RED
    weight: float | None = Field(default=None, gt=0)
    tags: dict[str, int] = Field(default_factory=dict)
    pair: tuple[int, str] | None = None
    _cache: dict[str, int] = PrivateAttr(default_factory=dict)

    @field_validator("tags", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return {k.lower(): v for k, v in value.items()} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _heavy_needs_parts(self) -> Box:
        if self.weight is not None and self.weight > 100 and not self.parts:
            raise ValueError("a heavy box holds parts")
        return self


def test_lax_conversions_as_pydantic_makes_them() -> None:
    box = Box.model_validate(
        {"parts": [{"name": "a", "count": 2.0}], "color": "blue", "weight": 3, "pair": [1, "x"]}
    )
    assert box.parts == (Part(name="a", count=2),)
    assert type(box.parts[0].count) is int
    assert box.color is Color.BLUE
    assert type(box.weight) is float and box.weight == 3.0
    assert box.pair == (1, "x")


def test_every_problem_is_reported_with_its_place() -> None:
    with pytest.raises(ValidationError) as caught:
        Box.model_validate(
            {"parts": [{"name": ""}, {"name": "b", "count": -1, "x": 1}], "color": "green"}
        )
    errors = caught.value.errors()
    assert [e["loc"] for e in errors] == [
        ("parts", 0, "name"),
        ("parts", 1, "count"),
        ("parts", 1, "x"),
        ("color",),
    ]
    assert errors[0]["msg"] == "String should have at least 1 character"
    assert errors[1]["msg"] == "Input should be greater than or equal to 0"
    assert errors[2]["msg"] == "Extra inputs are not permitted"
    assert errors[3]["msg"] == "Input should be 'red' or 'blue'"
    assert "4 validation errors for Box" in str(caught.value)


def test_missing_fields_and_wrong_types() -> None:
    with pytest.raises(ValidationError) as caught:
        Part.model_validate({"count": "many"})
    assert [(e["loc"], e["type"]) for e in caught.value.errors()] == [
        (("name",), "missing"),
        (("count",), "int_parsing"),
    ]
    with pytest.raises(ValidationError, match="fractional part"):
        Part(name="a", count=1.5)
    with pytest.raises(ValidationError, match="valid dictionary or instance of Box"):
        Box.model_validate([1, 2])
    with pytest.raises(ValidationError, match="Invalid JSON"):
        Box.model_validate_json("{not json")


def test_validators_run_and_their_errors_read_as_one_line() -> None:
    assert Box(tags={"A": 1}).tags == {"a": 1}
    with pytest.raises(ValidationError) as caught:
        Box(weight=500)
    assert validation_message(caught.value) == "a heavy box holds parts"
    assert isinstance(caught.value, ValueError)


def test_frozen_hashable_equal_by_value() -> None:
    a, b = Part(name="a"), Part(name="a", count=1)
    assert a == b and hash(a) == hash(b) and a != Part(name="a", count=2)
    with pytest.raises(ValidationError, match="frozen"):
        a.count = 3  # type: ignore[misc]
    assert {a, b} == {a}


def test_copy_updates_without_checking_and_keeps_private_state() -> None:
    box = Box(parts=(Part(name="a"),))
    box._cache["k"] = 1
    copy = box.model_copy(update={"color": Color.BLUE})
    assert copy.color is Color.BLUE and copy.parts == box.parts and box.color is Color.RED
    assert copy._cache == {"k": 1}


def test_dump_python_and_json() -> None:
    box = Box(parts=(Part(name="a"),), color=Color.BLUE, tags={"t": 1}, pair=(1, "x"))
    assert box.model_dump() == {
        "parts": ({"name": "a", "count": 1},),
        "color": Color.BLUE,
        "weight": None,
        "tags": {"t": 1},
        "pair": (1, "x"),
    }
    assert json.loads(box.model_dump_json()) == {
        "parts": [{"name": "a", "count": 1}],
        "color": "blue",
        "weight": None,
        "tags": {"t": 1},
        "pair": [1, "x"],
    }
    assert box.model_dump(exclude={"tags"}, exclude_none=True).keys() == {"parts", "color", "pair"}
    assert Box.model_validate_json(box.model_dump_json()) == box


def test_unknown_fields_ignored_where_allowed() -> None:
    class Loose(Record):
        model_config = ConfigDict(extra="ignore")
        a: int = 0

    assert Loose.model_validate({"a": 1, "b": 2}).model_dump() == {"a": 1}


def test_a_rig_file_with_hosts_validates_as_before() -> None:
    rig = Rig.model_validate(
        {
            "ram_total_bytes": 64 << 30,
            "hosts": [{"name": "box2", "gpus": [{"name": "RTX 3090"}]}],
            "gpus": [{"name": "RTX 4090", "memory_total_bytes": 24 << 30}],
        }
    )
    assert [(g.name, g.host, g.index) for g in rig.gpus] == [
        ("RTX 4090", "", 0),
        ("RTX 3090", "box2", 0),
    ]
    with pytest.raises(ValidationError) as caught:
        Rig.model_validate({"ram_total_bytes": 1, "gpus": [{"name": "x", "host": "nowhere"}]})
    assert "not in hosts" in validation_message(caught.value)


_gpus = st.builds(
    Gpu,
    name=st.text(min_size=1, max_size=20).filter(lambda s: s.isprintable()),
    memory_total_bytes=st.integers(min_value=0, max_value=1 << 40),
    bandwidth_gbps=st.none() | st.floats(min_value=1, max_value=1e4),
    nvlink=st.booleans(),
)
_rigs = st.builds(
    Rig,
    ram_total_bytes=st.integers(min_value=0, max_value=1 << 42),
    gpus=st.lists(_gpus, max_size=4).map(tuple),
    cpu=st.builds(Cpu, cores=st.none() | st.integers(min_value=1, max_value=256)),
)


@given(_rigs)
def test_json_round_trip_is_exact(rig: Rig) -> None:
    assert Rig.model_validate_json(rig.model_dump_json()) == rig
    assert Rig.model_validate(rig.model_dump()) == rig


def test_a_lone_surrogate_is_not_a_string() -> None:
    """JSON may escape one; it could never be written out again as UTF-8."""
    with pytest.raises(ValidationError) as caught:
        Rig.model_validate_json('{"ram_total_bytes": 1, "name": "box\\ud800"}')
    assert caught.value.errors()[0]["type"] == "string_unicode"
    assert Rig.model_validate_json('{"ram_total_bytes": 1, "name": "bo\\u00eete"}').name == "boîte"


def test_json_has_no_nan_or_infinity() -> None:
    class Speed(Record):
        tok_s: float | None = None

    assert Speed(tok_s=float("inf")).model_dump(mode="json") == {"tok_s": None}
    assert Speed(tok_s=float("nan")).model_dump_json() == '{"tok_s":null}'
    assert Speed(tok_s=float("inf")).model_dump()["tok_s"] == float("inf")


def test_numbers_from_files_as_pydantic_reads_them() -> None:
    class Numbers(Record):
        model_config = ConfigDict(extra="forbid")
        n: int = 0
        x: float = 0
        flag: bool = False

    assert Numbers(n="5.0").n == 5  # type: ignore[arg-type]
    assert Numbers(flag=1.0).flag is True  # type: ignore[arg-type]
    assert Numbers().model_dump_json() == '{"n":0,"x":0.0,"flag":false}'
    for bad, kind in (
        ({"x": 10**400}, "float_type"),  # an integer beyond any float: an error, not a crash
        ({"n": 1e20}, "int_parsing_size"),
        ({"n": float("inf")}, "finite_number"),
        ({"n": "\u0661\u0662"}, "int_parsing"),  # Arabic-Indic digits are not a number here
        ({"flag": " true "}, "bool_parsing"),
    ):
        with pytest.raises(ValidationError) as caught:
            Numbers.model_validate(bad)
        assert caught.value.errors()[0]["type"] == kind, bad


def test_a_pattern_ending_in_dollar_refuses_a_final_newline() -> None:
    with pytest.raises(ValidationError, match="pattern"):
        Rig.model_validate({"ram_total_bytes": 1, "address": "10.0.0.2\n"})
    assert Rig.model_validate({"ram_total_bytes": 1, "address": "10.0.0.2"}).address


def test_validators_run_in_pydantic_order_and_fields_keep_their_place() -> None:
    calls: list[str] = []

    class Base(Record):
        a: int = 0
        b: int = 0

        @model_validator(mode="before")
        @classmethod
        def _b1(cls, raw: object) -> object:
            calls.append("before 1")
            return raw

        @model_validator(mode="before")
        @classmethod
        def _b2(cls, raw: object) -> object:
            calls.append("before 2")
            return raw

        @model_validator(mode="after")
        def _a1(self) -> Base:
            calls.append("after 1")
            return self

    class Child(Base):
        a: int = 1  # redefined: keeps its place

        @model_validator(mode="after")
        def _a2(self) -> Child:
            calls.append("after 2")
            return self

    assert list(Child().model_dump()) == ["a", "b"]
    assert calls == ["before 2", "before 1", "after 1", "after 2"]
    with pytest.raises(TypeError, match="no field"):

        class Wrong(Record):
            a: int = 0

            @field_validator("b")
            @classmethod
            def _b(cls, v: int) -> int:
                return v


def test_mutable_defaults_are_not_shared() -> None:
    class Bag(Record):
        items: list[int] = []  # noqa: RUF012 - the point of the test

    one, two = Bag(), Bag()
    one.items.append(1)
    assert two.items == []


def test_a_dict_key_of_the_wrong_type_says_so() -> None:
    class Table(Record):
        rows: dict[int, str] = Field(default_factory=dict)

    with pytest.raises(ValidationError) as caught:
        Table.model_validate({"rows": {"x": "a"}})
    assert caught.value.errors()[0]["loc"] == ("rows", "x", "[key]")
