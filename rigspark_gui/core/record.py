"""Typed, validated records at a fraction of pydantic's start-up cost.

Every plan builds on a few dozen record classes, and every command starts by importing
them. pydantic spends ~0.25 s of a 2-core machine importing itself and building those
classes, more than a whole plan. A `Record` offers the part of pydantic's model API the
program uses, with the same behaviour:

- fields from class annotations, `Field(default=..., default_factory=..., ge=, gt=, le=,
  lt=, min_length=, max_length=, pattern=, description=)`, private `_attributes`;
- validation on construction and in `model_validate`/`model_validate_json`: types
  (with pydantic's lax conversions: a list for a tuple, a value for an enum, a dict
  for a record, an integral float for an int), constraints, unknown fields refused
  or ignored (`model_config["extra"]`), `field_validator` and `model_validator`;
- every problem found at once, in one `ValidationError` with pydantic's `errors()`;
- `model_copy`, `model_dump` (python or json mode), `model_dump_json`,
  `model_construct`, equality, hashing when frozen, immutability.

Type checks compile lazily, per class, on the first record built, so importing a module
of records costs little more than defining plain classes.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from operator import itemgetter
from typing import Any, ClassVar, TypeVar, dataclass_transform

R = TypeVar("R", bound="Record")
_MISSING: Any = object()
_INF = float("inf")
_MARK = "__record_validator__"  # what `model_validator`/`field_validator` leave on a method
Validator = Callable[[Any], Any]


def ConfigDict(**options: Any) -> dict[str, Any]:
    """Options for `model_config`: frozen, extra ("forbid" | "ignore"); others ignored."""
    return options


class FieldInfo:
    """A field's default and constraints (what `Field(...)` returns)."""

    __slots__ = (
        "_regex",
        "default",
        "default_factory",
        "description",
        "ge",
        "gt",
        "le",
        "lt",
        "max_length",
        "min_length",
        "pattern",
    )

    def __init__(
        self,
        default: Any = _MISSING,
        *,
        default_factory: Callable[[], Any] | None = None,
        description: str = "",
        ge: float | None = None,
        gt: float | None = None,
        le: float | None = None,
        lt: float | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        pattern: str | None = None,
    ) -> None:
        self.default = default
        self.default_factory = default_factory
        self.description = description
        self.ge, self.gt, self.le, self.lt = ge, gt, le, lt
        self.min_length, self.max_length = min_length, max_length
        self.pattern = pattern
        self._regex: re.Pattern[str] | None = None

    def is_required(self) -> bool:
        return self.default is _MISSING and self.default_factory is None

    def get_default(self) -> Any:
        if self.default_factory is not None:
            return self.default_factory()
        return self.default

    @property
    def constrained(self) -> bool:
        return any(
            c is not None
            for c in (self.ge, self.gt, self.le, self.lt, self.min_length, self.max_length)
        ) or bool(self.pattern)

    def check(self, value: Any) -> None:
        """Raise `_Invalid` when `value` breaks a constraint (pydantic's wording)."""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.ge is not None and not value >= self.ge:
                raise _Invalid(
                    f"Input should be greater than or equal to {_num(self.ge)}",
                    "greater_than_equal",
                )
            if self.gt is not None and not value > self.gt:
                raise _Invalid(f"Input should be greater than {_num(self.gt)}", "greater_than")
            if self.le is not None and not value <= self.le:
                raise _Invalid(
                    f"Input should be less than or equal to {_num(self.le)}", "less_than_equal"
                )
            if self.lt is not None and not value < self.lt:
                raise _Invalid(f"Input should be less than {_num(self.lt)}", "less_than")
        if isinstance(value, (str, tuple, list, dict)):
            text = isinstance(value, str)
            what = "String" if text else type(value).__name__.capitalize()
            unit = "character" if text else "item"
            kind = "string_" if text else ""
            n = len(value)
            if self.min_length is not None and n < self.min_length:
                s = "" if self.min_length == 1 else "s"
                raise _Invalid(
                    f"{what} should have at least {self.min_length} {unit}{s}", f"{kind}too_short"
                )
            if self.max_length is not None and n > self.max_length:
                s = "" if self.max_length == 1 else "s"
                raise _Invalid(
                    f"{what} should have at most {self.max_length} {unit}{s}", f"{kind}too_long"
                )
        if self.pattern and isinstance(value, str):
            if self._regex is None:
                # `$` at the end means the end of the text, not also before a final newline
                end = self.pattern.endswith("$") and not self.pattern.endswith("\\$")
                self._regex = re.compile(self.pattern[:-1] + r"\Z" if end else self.pattern)
            if not self._regex.search(value):
                raise _Invalid(
                    f"String should match pattern '{self.pattern}'", "string_pattern_mismatch"
                )


def _num(limit: float) -> str:
    """A limit as pydantic prints it: 1000000, not 1000000.0."""
    return str(int(limit)) if isinstance(limit, float) and limit.is_integer() else str(limit)


def Field(default: Any = _MISSING, **options: Any) -> Any:
    return FieldInfo(default, **options)


class PrivateAttr:
    """A per-instance attribute outside the record's fields (a cache, an index)."""

    __slots__ = ("default", "default_factory")

    def __init__(self, default: Any = None, *, default_factory: Callable[[], Any] | None = None):
        self.default = default
        self.default_factory = default_factory

    def get_default(self) -> Any:
        return self.default_factory() if self.default_factory is not None else self.default


def model_validator(*, mode: str) -> Callable[[Any], Any]:
    """`mode="before"`: a classmethod given the raw input; `"after"`: a method given the
    built record, returning it."""

    if mode not in ("before", "after"):
        raise ValueError(f"validators run before or after, not {mode!r}")

    def mark(fn: Any) -> Any:
        target = fn.__func__ if isinstance(fn, classmethod) else fn
        setattr(target, _MARK, ("model", mode, ()))
        return fn

    return mark


def field_validator(*fields: str, mode: str = "after") -> Callable[[Any], Any]:
    """A classmethod given one field's value, before or after its type is checked."""

    if mode not in ("before", "after"):
        raise ValueError(f"validators run before or after, not {mode!r}")

    def mark(fn: Any) -> Any:
        target = fn.__func__ if isinstance(fn, classmethod) else fn
        setattr(target, _MARK, ("field", mode, fields))
        return fn

    return mark


class _Invalid(Exception):
    """One problem with one value; `loc` grows as it travels out of nested values."""

    def __init__(
        self,
        msg: str,
        kind: str,
        loc: tuple[Any, ...] = (),
        errors: list[dict[str, Any]] | None = None,
    ):
        super().__init__(msg)
        self.msg, self.kind, self.loc = msg, kind, loc
        self.nested = errors  # a nested record's own list of problems


class ValidationError(ValueError):
    """Every problem found in one input, each as pydantic reports it: `loc`, `msg`, `type`,
    `input`."""

    def __init__(self, title: str, errors: list[dict[str, Any]]) -> None:
        self.title = title
        self._errors = errors
        super().__init__(self._text())

    def errors(self) -> list[dict[str, Any]]:
        return [dict(e) for e in self._errors]

    def error_count(self) -> int:
        return len(self._errors)

    def _text(self) -> str:
        n = len(self._errors)
        lines = [f"{n} validation error{'s' if n != 1 else ''} for {self.title}"]
        for e in self._errors:
            if e["loc"]:
                lines.append(".".join(str(p) for p in e["loc"]))
            shown = repr(e.get("input"))
            if len(shown) > 80:
                shown = shown[:37] + "..." + shown[-37:]
            kind = type(e.get("input")).__name__
            lines.append(f"  {e['msg']} [type={e['type']}, input_value={shown}, input_type={kind}]")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._text()


def _error(loc: tuple[Any, ...], msg: str, kind: str, value: Any) -> dict[str, Any]:
    return {"type": kind, "loc": loc, "msg": msg, "input": value}


def _validator_error(exc: Exception) -> tuple[str, str]:
    if isinstance(exc, AssertionError):
        return f"Assertion failed, {exc}", "assertion_error"
    return f"Value error, {exc}", "value_error"


# ---- type checks, compiled once per annotation -------------------------------------------

_NoneType = type(None)


_INT_LIMIT = 1 << 63  # pydantic's largest integer from a float or a decimal string


def _int(v: Any) -> Any:
    if type(v) is int:
        return v
    if isinstance(v, int):  # bool, IntEnum
        return int(v)
    if isinstance(v, float):
        return _int_of_float(v)
    if isinstance(v, str):
        text = v.strip()
        if text.isascii():
            try:
                return int(text)
            except ValueError:
                pass
            try:  # "5.0" is 5, as pydantic reads it
                return _int_of_float(float(text))
            except (ValueError, _Invalid):
                pass
        raise _Invalid(
            "Input should be a valid integer, unable to parse string as an integer", "int_parsing"
        )
    raise _Invalid("Input should be a valid integer", "int_type")


def _int_of_float(v: float) -> int:
    if v != v or v in (_INF, -_INF):
        raise _Invalid("Input should be a finite number", "finite_number")
    if not v.is_integer():
        raise _Invalid(
            "Input should be a valid integer, got a number with a fractional part",
            "int_from_float",
        )
    if abs(v) >= _INT_LIMIT:
        raise _Invalid(
            "Unable to parse input string as an integer, exceeded maximum size",
            "int_parsing_size",
        )
    return int(v)


def _float(v: Any) -> Any:
    if type(v) is float:
        return v
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:  # an integer beyond any float
            raise _Invalid("Input should be a valid number", "float_type") from None
    if isinstance(v, str):
        text = v.strip()
        if text.isascii():
            try:
                return float(text)
            except ValueError:
                pass
        raise _Invalid(
            "Input should be a valid number, unable to parse string as a number", "float_parsing"
        )
    raise _Invalid("Input should be a valid number", "float_type")


def _str(v: Any) -> Any:
    if isinstance(v, str):
        if v.isascii():
            return v
        try:  # a lone surrogate (JSON can escape one) could not be written out again
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise _Invalid(
                "Input should be a valid string, unable to parse raw data as a unicode string",
                "string_unicode",
            ) from None
        return v
    raise _Invalid("Input should be a valid string", "string_type")


_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off"}


def _bool(v: Any) -> Any:
    if v is True or v is False:
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        low = v.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise _Invalid("Input should be a valid boolean, unable to interpret input", "bool_parsing")
    raise _Invalid("Input should be a valid boolean", "bool_type")


def _none(v: Any) -> Any:
    if v is None:
        return v
    raise _Invalid("Input should be None", "none_required")


def _any(v: Any) -> Any:
    return v


def _items(v: Any, item: Validator, what: str) -> list[Any]:
    if not isinstance(v, (list, tuple)) or isinstance(v, str):
        raise _Invalid(f"Input should be a valid {what}", f"{what}_type")
    out: list[Any] = []
    problems: list[dict[str, Any]] = []
    for i, e in enumerate(v):
        try:
            out.append(item(e))
        except _Invalid as bad:
            problems.extend(_nested(bad, (i,), e))
    if problems:
        raise _Invalid("", "nested", errors=problems)
    return out


def _nested(bad: _Invalid, loc: tuple[Any, ...], value: Any) -> list[dict[str, Any]]:
    """The problems under `bad`, with `loc` put in front of their own."""
    if bad.nested is not None:
        return [{**e, "loc": (*loc, *e["loc"])} for e in bad.nested]
    return [_error((*loc, *bad.loc), bad.msg, bad.kind, value)]


def _compile(tp: Any, owner: type) -> Validator:
    """A function that checks (and leniently converts) a value for annotation `tp`."""
    if tp is Any or tp is object:
        return _any
    if tp is int:
        return _int
    if tp is float:
        return _float
    if tp is str:
        return _str
    if tp is bool:
        return _bool
    if tp is None or tp is _NoneType:
        return _none
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        return _union([_compile(a, owner) for a in args], args)
    if origin is typing.Literal:
        allowed = args
        shown = " or ".join(repr(a) for a in allowed)

        def literal(v: Any) -> Any:
            for a in allowed:
                if v == a and type(v) is type(a):
                    return a
            for a in allowed:
                if isinstance(a, enum.Enum) and v == a.value:
                    return a
            raise _Invalid(f"Input should be {shown}", "literal_error")

        return literal
    if origin is typing.ClassVar:
        return _any
    if origin is tuple:
        if not args:
            return lambda v: tuple(_items(v, _any, "tuple"))
        if len(args) == 2 and args[1] is Ellipsis:
            item = _compile(args[0], owner)
            exact = args[0] if isinstance(args[0], type) and args[0] not in (float, bool) else None

            def tuple_of(v: Any) -> Any:
                if type(v) is tuple and exact is not None and all(type(e) is exact for e in v):
                    return v
                return tuple(_items(v, item, "tuple"))

            return tuple_of
        parts = [_compile(a, owner) for a in args]

        def fixed(v: Any) -> Any:
            if not isinstance(v, (list, tuple)) or len(v) != len(parts):
                raise _Invalid(f"Tuple should have {len(parts)} items", "tuple_type")
            out: list[Any] = []
            problems: list[dict[str, Any]] = []
            for i, (part, e) in enumerate(zip(parts, v, strict=True)):
                try:
                    out.append(part(e))
                except _Invalid as bad:
                    problems.extend(_nested(bad, (i,), e))
            if problems:
                raise _Invalid("", "nested", errors=problems)
            return tuple(out)

        return fixed
    if origin in (list, typing.List):  # noqa: UP006
        item = _compile(args[0], owner) if args else _any
        return lambda v: _items(v, item, "list")
    if origin in (set, frozenset):
        item = _compile(args[0], owner) if args else _any
        made = origin

        def set_of(v: Any) -> Any:
            if isinstance(v, (set, frozenset)):
                v = list(v)
            return made(_items(v, item, "set"))

        return set_of
    if origin in (dict, Mapping, typing.Dict):  # noqa: UP006
        key = _compile(args[0], owner) if args else _any
        val = _compile(args[1], owner) if args else _any

        def dict_of(v: Any) -> Any:
            if not isinstance(v, Mapping):
                raise _Invalid("Input should be a valid dictionary", "dict_type")
            out = {}
            problems: list[dict[str, Any]] = []
            for k, e in v.items():
                try:
                    checked = key(k)
                except _Invalid as bad:
                    problems.extend(_nested(bad, (k, "[key]"), k))
                    continue
                try:
                    out[checked] = val(e)
                except _Invalid as bad:
                    problems.extend(_nested(bad, (k,), e))
            if problems:
                raise _Invalid("", "nested", errors=problems)
            return out

        return dict_of
    if origin is not None:  # Sequence[...], Callable[...] and the like: trust the engine
        return _any
    if isinstance(tp, type):
        if issubclass(tp, Record):
            return tp._as_field
        if issubclass(tp, enum.Enum):
            return _enum(tp)
        if hasattr(tp, "__fspath__"):  # pathlib.Path and friends
            as_path: Callable[[Any], Any] = tp

            def path(v: Any) -> Any:
                if isinstance(v, tp):
                    return v
                if isinstance(v, str) or hasattr(v, "__fspath__"):
                    return as_path(v)
                raise _Invalid("Input is not a valid path", "path_type")

            return path
        cls = tp

        def instance(v: Any) -> Any:
            if isinstance(v, cls):
                return v
            raise _Invalid(f"Input should be an instance of {cls.__name__}", "is_instance_of")

        return instance
    return _any


def _enum(cls: type[enum.Enum]) -> Validator:
    members = list(cls)
    shown = ", ".join(repr(m.value) for m in members[:-1])
    shown = f"{shown} or {members[-1].value!r}" if shown else repr(members[-1].value)

    def check(v: Any) -> Any:
        if isinstance(v, cls):
            return v
        try:
            return cls(v)
        except (ValueError, TypeError):
            raise _Invalid(f"Input should be {shown}", "enum") from None

    return check


def _union(parts: list[Validator], args: tuple[Any, ...]) -> Validator:
    exact = [(a, p) for a, p in zip(args, parts, strict=True)]

    def check(v: Any) -> Any:
        if v is None and _NoneType in args:
            return None
        for a, p in exact:  # an exact match first, as pydantic's smart mode does
            if isinstance(a, type) and type(v) is a:
                return p(v)
        problems: list[_Invalid] = []
        for a, p in exact:
            if a is _NoneType:
                continue
            try:
                return p(v)
            except _Invalid as bad:
                problems.append(bad)
        if len(problems) == 1:
            raise problems[0]
        # The most specific complaint: a nested record's own problems, else the first.
        nested = next((p for p in problems if p.nested is not None), None)
        raise nested or problems[0]

    return check


# The most common annotations, known without evaluating them in their module.
_PLAIN_NOTES: dict[str, Any] = {
    "int": int,
    "str": str,
    "float": float,
    "bool": bool,
    "int | None": int | None,
    "str | None": str | None,
    "float | None": float | None,
    "bool | None": bool | None,
    "tuple[str, ...]": tuple[str, ...],
    "tuple[int, ...]": tuple[int, ...],
    "tuple[float, ...]": tuple[float, ...],
    "dict[str, int]": dict[str, int],
    "dict[str, float]": dict[str, float],
    "dict[str, str]": dict[str, str],
}


# ---- the record -------------------------------------------------------------------------


@dataclass_transform(kw_only_default=True, field_specifiers=(Field, FieldInfo, PrivateAttr))
class Record:
    """Base of validated records; subclasses declare fields as class annotations."""

    model_config: ClassVar[dict[str, Any]] = {}
    model_fields: ClassVar[dict[str, FieldInfo]] = {}
    __private__: ClassVar[dict[str, PrivateAttr]] = {}
    __frozen__: ClassVar[bool] = False
    __forbid__: ClassVar[bool] = False
    __names__: ClassVar[tuple[str, ...]] = ()
    __values__: ClassVar[Any]  # the field values of an instance's __dict__, as a tuple
    __checks__: ClassVar[dict[str, Validator] | None] = None
    __before__: ClassVar[tuple[Callable[..., Any], ...]] = ()
    __after__: ClassVar[tuple[Callable[..., Any], ...]] = ()
    __field_before__: ClassVar[dict[str, tuple[Callable[..., Any], ...]]] = {}
    __field_after__: ClassVar[dict[str, tuple[Callable[..., Any], ...]]] = {}
    __post__: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        config: dict[str, Any] = {}
        fields: dict[str, FieldInfo] = {}
        private: dict[str, PrivateAttr] = {}
        for base in reversed(cls.__mro__):
            if not (isinstance(base, type) and issubclass(base, Record)):
                continue
            config.update(base.__dict__.get("model_config", {}))
            fields.update(base.__dict__.get("__own_fields__", {}))
            private.update(base.__dict__.get("__own_private__", {}))
        own: dict[str, FieldInfo] = {}
        own_private: dict[str, PrivateAttr] = {}
        for name, note in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 - inspect costs 5 ms
            text = note if isinstance(note, str) else repr(note)
            if "ClassVar" in text.split("[", 1)[0] or name == "model_config":
                continue
            value = cls.__dict__.get(name, _MISSING)
            if name.startswith("_"):
                own_private[name] = (
                    value
                    if isinstance(value, PrivateAttr)
                    else PrivateAttr(None if value is _MISSING else value)
                )
                if value is not _MISSING:
                    delattr(cls, name)
                continue
            info = value if isinstance(value, FieldInfo) else FieldInfo(value)
            if type(info.default) in (list, dict, set):  # each record gets its own
                info = FieldInfo(
                    **{a: getattr(info, a) for a in FieldInfo.__slots__ if a[0] != "_"}
                )
                plain = info.default
                made: Callable[[Any], Any] = type(plain)
                info.default, info.default_factory = _MISSING, partial(made, plain)
            own[name] = info  # a redefined field keeps its base's place, as in pydantic
            if isinstance(value, FieldInfo):
                delattr(cls, name)
        fields.update(own)
        private.update(own_private)
        cls.__own_fields__ = own  # type: ignore[attr-defined]
        cls.__own_private__ = own_private  # type: ignore[attr-defined]
        cls.model_config = config
        cls.model_fields = fields
        cls.__private__ = private
        cls.__frozen__ = bool(config.get("frozen", False))
        cls.__forbid__ = config.get("extra", "ignore") == "forbid"
        cls.__names__ = tuple(fields)
        names = cls.__names__
        if len(names) == 1:
            only = names[0]
            cls.__values__ = staticmethod(lambda d: (d[only],))
        elif names:
            cls.__values__ = itemgetter(*names)
        else:
            cls.__values__ = staticmethod(lambda d: ())
        cls.__checks__ = None
        # validators in definition order, bases first; a method of the same name in a
        # subclass replaces its base's
        found: dict[str, tuple[str, str, tuple[str, ...]]] = {}
        for base in reversed(cls.__mro__):
            if base is Record or base is object:
                continue  # Record's own methods carry no validators
            for attr, fn in base.__dict__.items():
                target = fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn
                mark = getattr(target, _MARK, None)
                found.pop(attr, None)
                if mark is not None:
                    found[attr] = mark
        before: list[Callable[..., Any]] = []
        after: list[Callable[..., Any]] = []
        field_before: dict[str, list[Callable[..., Any]]] = {}
        field_after: dict[str, list[Callable[..., Any]]] = {}
        for attr, (kind, mode, names_of) in found.items():
            bound = getattr(cls, attr)
            if kind == "model":
                (before if mode == "before" else after).append(bound)
                continue
            for f in names_of:
                if f not in fields:
                    raise TypeError(f"{cls.__name__}.{attr} validates {f!r}, which is no field")
                (field_before if mode == "before" else field_after).setdefault(f, []).append(bound)
        # as pydantic: before-validators run last-defined first, after-validators in order
        cls.__before__ = tuple(reversed(before))
        cls.__after__ = tuple(after)
        cls.__field_before__ = {k: tuple(reversed(v)) for k, v in field_before.items()}
        cls.__field_after__ = {k: tuple(v) for k, v in field_after.items()}
        cls.__post__ = any("model_post_init" in b.__dict__ for b in cls.__mro__ if b is not Record)

    # -- building ------------------------------------------------------------------------

    def __init__(self, **data: Any) -> None:
        type(self)._build(data, self)

    @classmethod
    def _type_checks(cls) -> dict[str, Validator]:
        checks = cls.__checks__
        if checks is not None:
            return checks
        module = sys.modules.get(cls.__module__)
        namespace = dict(vars(module)) if module is not None else {}
        hints: dict[str, Any] = {}
        unresolved = False
        for base in reversed(cls.__mro__):
            notes = base.__dict__.get("__annotations__", {})  # noqa: RUF063
            base_module = sys.modules.get(base.__module__)
            globs = vars(base_module) if base_module is not None else namespace
            for name in notes:
                if name in cls.model_fields:
                    note = notes[name]
                    if not isinstance(note, str):
                        hints[name] = note
                        continue
                    if note in _PLAIN_NOTES:
                        hints[name] = _PLAIN_NOTES[note]
                        continue
                    try:  # our own annotations, written in our modules
                        hints[name] = eval(note, globs, {base.__name__: base})
                    except NameError:  # not defined yet, or only for type checkers
                        hints[name] = Any
                        unresolved = True
        checks = {}
        for name, info in cls.model_fields.items():
            hint = hints.get(name, Any)
            check = _compile(hint, cls)
            if info.constrained:
                check = _constrained(check, info)
            checks[name] = check
            if (hint is float or hint == float | None) and type(info.default) is int:
                info.default = float(info.default)  # written as a float, as pydantic does
        if not unresolved:  # else trusted this once, and looked up again next time
            cls.__checks__ = checks
        return checks

    @classmethod
    def _build(cls: type[R], data: Mapping[str, Any], into: R | None = None) -> R:
        for before in cls.__before__:
            try:
                data = before(data)
            except (ValueError, AssertionError) as exc:
                msg, kind = _validator_error(exc)
                raise ValidationError(cls.__name__, [_error((), msg, kind, data)]) from None
        if not isinstance(data, Mapping):
            raise ValidationError(
                cls.__name__,
                [
                    _error(
                        (),
                        f"Input should be a valid dictionary or instance of {cls.__name__}",
                        "model_type",
                        data,
                    )
                ],
            )
        checks = cls.__checks__ or cls._type_checks()
        fields = cls.model_fields
        values: dict[str, Any] = {}
        problems: list[dict[str, Any]] = []
        field_before, field_after = cls.__field_before__, cls.__field_after__
        given = 0
        for name, check in checks.items():
            value = data.get(name, _MISSING)
            if value is not _MISSING:
                given += 1
            else:
                info = fields[name]
                if info.default_factory is not None:
                    values[name] = info.default_factory()
                elif info.default is _MISSING:
                    problems.append(_error((name,), "Field required", "missing", dict(data)))
                else:
                    values[name] = info.default
                continue
            try:
                if field_before:
                    for fn in field_before.get(name, ()):
                        value = fn(value)
                value = check(value)
                if field_after:
                    for fn in field_after.get(name, ()):
                        value = fn(value)
            except _Invalid as bad:
                problems.extend(_nested(bad, (name,), value))
                continue
            except (ValueError, AssertionError) as exc:
                msg, kind = _validator_error(exc)
                problems.append(_error((name,), msg, kind, value))
                continue
            values[name] = value
        if given < len(data) and cls.__forbid__:
            problems.extend(
                _error((k,), "Extra inputs are not permitted", "extra_forbidden", data[k])
                for k in data
                if k not in fields
            )
        if problems:
            raise ValidationError(cls.__name__, problems)
        obj = into if into is not None else cls.__new__(cls)
        object.__setattr__(obj, "__dict__", values)
        if cls.__private__:
            for name, attr in cls.__private__.items():
                values[name] = attr.get_default()
        try:
            if cls.__post__:
                obj.model_post_init(None)  # type: ignore[attr-defined]
            for after in cls.__after__:
                obj = after(obj)
        except (ValueError, AssertionError) as exc:
            msg, kind = _validator_error(exc)
            raise ValidationError(cls.__name__, [_error((), msg, kind, dict(data))]) from None
        return obj

    @classmethod
    def _as_field(cls, v: Any) -> Any:
        """Check a value given for a field of this record's type."""
        if isinstance(v, cls):
            return v
        if isinstance(v, Mapping):
            try:
                return cls._build(v)
            except ValidationError as err:
                raise _Invalid("", "nested", errors=err._errors) from None
        raise _Invalid(
            f"Input should be a valid dictionary or instance of {cls.__name__}", "model_type"
        )

    @classmethod
    def model_validate(cls: type[R], obj: Any) -> R:
        if isinstance(obj, cls):
            return obj
        return cls._build(obj)

    @classmethod
    def model_validate_json(cls: type[R], text: str | bytes) -> R:
        try:
            raw = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise ValidationError(
                cls.__name__, [_error((), f"Invalid JSON: {exc}", "json_invalid", text)]
            ) from None
        return cls._build(raw)

    @classmethod
    def model_construct(cls: type[R], **values: Any) -> R:
        """A record from trusted values, unchecked (defaults filled in)."""
        for name, info in cls.model_fields.items():
            if name not in values:
                values[name] = info.get_default()
        obj = cls.__new__(cls)
        object.__setattr__(obj, "__dict__", values)
        for name, attr in cls.__private__.items():
            values[name] = attr.get_default()
        if cls.__post__:
            obj.model_post_init(None)  # type: ignore[attr-defined]
        return obj

    def model_copy(self: R, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> R:
        """A copy with `update` applied as given (unchecked, as pydantic does)."""
        values = dict(self.__dict__)
        if deep:
            import copy

            values = copy.deepcopy(values)
        if update:
            values.update(update)
        obj = type(self).__new__(type(self))
        object.__setattr__(obj, "__dict__", values)
        return obj

    # -- reading -------------------------------------------------------------------------

    def model_dump(
        self,
        *,
        mode: str = "python",
        exclude: Iterable[str] | None = None,
        include: Iterable[str] | None = None,
        exclude_none: bool = False,
        exclude_defaults: bool = False,
        by_alias: bool = False,
    ) -> dict[str, Any]:
        as_json = mode == "json"
        skip = set(exclude or ())
        keep = set(include) if include is not None else None
        out: dict[str, Any] = {}
        d = self.__dict__
        for name, info in self.model_fields.items():
            if name in skip or (keep is not None and name not in keep):
                continue
            value = d[name]
            if exclude_none and value is None:
                continue
            if exclude_defaults and not info.is_required() and value == info.get_default():
                continue
            out[name] = _dump(value, as_json, exclude_none)
        return out

    def model_dump_json(self, *, indent: int | None = None, **options: Any) -> str:
        data = self.model_dump(mode="json", **options)
        if indent is None:
            return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        return json.dumps(data, ensure_ascii=False, indent=indent)

    # -- behaving as a value -------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.__private__:
            self.__dict__[name] = value
            return
        if self.__frozen__:
            raise ValidationError(
                type(self).__name__,
                [_error((name,), "Instance is frozen", "frozen_instance", value)],
            )
        if name not in self.model_fields:
            raise ValueError(f'"{type(self).__name__}" object has no field "{name}"')
        self.__dict__[name] = value

    def __delattr__(self, name: str) -> None:
        if self.__frozen__:
            raise ValidationError(
                type(self).__name__,
                [_error((name,), "Instance is frozen", "frozen_instance", None)],
            )
        super().__delattr__(name)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        values = self.__values__
        return bool(values(self.__dict__) == values(other.__dict__))

    def __hash__(self) -> int:
        if not self.__frozen__:
            raise TypeError(f"unhashable type: '{type(self).__name__}'")
        return hash(self.__values__(self.__dict__))

    def __repr__(self) -> str:
        d = self.__dict__
        inner = ", ".join(f"{n}={d[n]!r}" for n in self.__names__)
        return f"{type(self).__name__}({inner})"

    def __str__(self) -> str:
        d = self.__dict__
        return " ".join(f"{n}={d[n]!r}" for n in self.__names__)

    def __iter__(self) -> Any:
        d = self.__dict__
        return iter([(n, d[n]) for n in self.__names__])

    def __copy__(self: R) -> R:
        return self.model_copy()

    def __deepcopy__(self: R, memo: dict[int, Any]) -> R:
        return self.model_copy(deep=True)

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), dict(self.__dict__)))


def _rebuild(cls: type[R], values: dict[str, Any]) -> R:
    obj = cls.__new__(cls)
    object.__setattr__(obj, "__dict__", values)
    return obj


def _constrained(check: Validator, info: FieldInfo) -> Validator:
    def constrained(v: Any) -> Any:
        v = check(v)
        if v is not None:
            info.check(v)
        return v

    return constrained


def _dump(value: Any, as_json: bool, exclude_none: bool) -> Any:
    if type(value) is float and as_json and (value != value or value in (_INF, -_INF)):
        return None  # JSON has no NaN or infinity: null, as pydantic writes them
    if value is None or type(value) in (int, float, str, bool):
        return value
    if isinstance(value, Record):
        return value.model_dump(mode="json" if as_json else "python", exclude_none=exclude_none)
    if isinstance(value, enum.Enum):
        return value.value if as_json else value
    if isinstance(value, tuple):
        items = [_dump(v, as_json, exclude_none) for v in value]
        return items if as_json else tuple(items)
    if isinstance(value, list):
        return [_dump(v, as_json, exclude_none) for v in value]
    if isinstance(value, (set, frozenset)):
        items = [_dump(v, as_json, exclude_none) for v in value]
        return items if as_json else type(value)(items)
    if isinstance(value, dict):
        return {
            (_key(k) if as_json else k): _dump(v, as_json, exclude_none) for k, v in value.items()
        }
    if as_json and hasattr(value, "__fspath__"):
        return str(value)
    return value


def _key(k: Any) -> Any:
    if isinstance(k, enum.Enum):
        return k.value
    return k if isinstance(k, str) else str(k)
