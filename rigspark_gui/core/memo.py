"""Memoising pure functions of immutable objects by the object's identity.

Planning asks for the same derived tables (a layout's prefix sums, a model's layouts)
thousands of times a second. `functools.lru_cache` hashes its argument on every call,
and hashing a frozen model or a long tuple costs more than the lookup saves. Here the
key is `id(obj)`; each entry keeps `obj` alive, so its id cannot be reused by another
object while the entry exists, and the identity check guards the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class ByIdentity(Generic[T, R]):
    """`fn(obj)`, computed once per object (never mutate the objects passed in)."""

    def __init__(self, fn: Callable[[T], R], maxsize: int = 4096) -> None:
        self._fn = fn
        self._maxsize = maxsize
        self._store: dict[int, tuple[T, R]] = {}

    def __call__(self, obj: T) -> R:
        hit = self._store.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        value = self._fn(obj)
        if len(self._store) >= self._maxsize:
            self._store.clear()
        self._store[id(obj)] = (obj, value)
        return value

    def clear(self) -> None:
        self._store.clear()
