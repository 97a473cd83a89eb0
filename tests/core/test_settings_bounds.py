"""PlanSettings checks its own ranges (flags and controls build it without pydantic); the
settings file model declares the same bounds. Both must agree, value by value."""

from __future__ import annotations

import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rigspark_gui.core.errors import InvalidSettingsError
from rigspark_gui.core.settings import SETTING_RANGES, make_settings
from rigspark_gui.formats.settings import PlanSettings as SettingsFile

SERVING = {"memory_utilization", "tensor_parallel", "pipeline_parallel", "max_num_seqs",
           "max_num_batched_tokens", "cpu_offload_gb"}  # fmt: skip


def _metadata(name: str) -> list[object]:
    """The field's constraints; for a number that may also be "auto", the number's."""
    field = SettingsFile.model_fields[name]
    found = list(field.metadata)
    for member in typing.get_args(field.annotation):
        if typing.get_origin(member) is typing.Annotated:
            for m in member.__metadata__:
                found.extend(getattr(m, "metadata", [m]))
    return found


def _bounds(name: str) -> tuple[float | None, float | None, bool]:
    low = high = None
    strict = False
    for m in _metadata(name):
        if getattr(m, "ge", None) is not None:
            low = m.ge
        if getattr(m, "gt", None) is not None:
            low, strict = m.gt, True
        if getattr(m, "le", None) is not None:
            high = m.le
    return low, high, strict


@pytest.mark.parametrize("name", sorted(SETTING_RANGES))
def test_the_file_model_declares_the_same_bounds(name: str) -> None:
    low, high, strict = SETTING_RANGES[name]
    assert _bounds(name) == (low, high, strict)


def _agree(name: str, value: float) -> None:
    extra = {"backend": "vllm"} if name in SERVING else {}
    try:
        make_settings(**{name: value}, **extra)
        core_ok = True
    except InvalidSettingsError:
        core_ok = False
    try:
        SettingsFile.model_validate({name: value, **extra}).to_record()
        file_ok = True
    except (ValidationError, InvalidSettingsError):
        file_ok = False
    assert core_ok == file_ok, (name, value)


@given(
    st.sampled_from(sorted(SETTING_RANGES)),
    st.one_of(st.integers(-5, 1 << 25), st.floats(-2, 2e6, allow_nan=False)),
)
def test_flags_and_files_accept_the_same_values(name: str, value: float) -> None:
    if isinstance(value, float) and name not in ("min_tok_s", "memory_utilization",
                                                 "cpu_offload_gb"):  # fmt: skip
        value = int(value)
    _agree(name, value)


@pytest.mark.parametrize(
    ("name", "value"), [("context", 0), ("context", 1 << 24), ("context", (1 << 24) + 1),
                        ("memory_utilization", 0.0), ("memory_utilization", 1.0),
                        ("min_tok_s", 0), ("parallel", 257)],
)  # fmt: skip
def test_at_the_edges(name: str, value: float) -> None:
    _agree(name, value)


def test_a_bad_value_names_the_setting() -> None:
    with pytest.raises(InvalidSettingsError, match=r"^parallel: 0 is out of range"):
        make_settings(parallel=0)
    with pytest.raises(InvalidSettingsError, match=r"^kv_v: 'q3' is not one of"):
        make_settings(kv_v="q3")
    with pytest.raises(InvalidSettingsError, match=r"^colour: not a plan setting"):
        make_settings(colour="red")
    with pytest.raises(InvalidSettingsError, match=r"^context: expected a number"):
        make_settings(context="big")
