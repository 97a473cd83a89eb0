"""Memoising by identity: computed once per object, never shared between equal ones."""

from rigspark_gui.core.memo import ByIdentity


def test_computes_once_per_object_and_tells_equal_objects_apart() -> None:
    calls: list[tuple[int, ...]] = []

    def total(values: tuple[int, ...]) -> int:
        calls.append(values)
        return sum(values)

    memo: ByIdentity[tuple[int, ...], int] = ByIdentity(total, maxsize=2)
    a = tuple(range(100))
    b = tuple(range(100))  # equal to a, another object
    assert a == b and a is not b
    assert memo(a) == memo(a) == 4950
    assert len(calls) == 1
    assert memo(b) == 4950
    assert len(calls) == 2  # by identity, not equality
    c = (1, 2)
    assert memo(c) == 3  # the store was full: cleared, then c stored
    assert memo(a) == 4950 and len(calls) == 4
    memo.clear()
    assert memo(c) == 3 and len(calls) == 5
