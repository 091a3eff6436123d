"""A total order on output rows that tolerates NULL and NaN, and bag difference."""

from __future__ import annotations

import math
from collections import Counter

__all__ = ["bag_difference", "element_key", "row_key", "value_key"]


def value_key(v: object) -> tuple:
    """NULL < booleans < numbers < NaN < strings; within a kind, the natural order."""
    if v is None:
        return (0,)
    if isinstance(v, bool):
        return (1, v)
    if isinstance(v, int | float):
        if isinstance(v, float) and math.isnan(v):
            return (3,)
        return (2, v)
    if isinstance(v, str):
        return (4, v)
    return (5, repr(v))


def row_key(row: tuple) -> tuple:
    return tuple(value_key(v) for v in row)


def element_key(element: tuple[int, str, tuple]) -> tuple:
    """Sort key of an output element (ts, op, row): by ts, then "-" before "+", then row."""
    ts, op, row = element
    return (ts, 0 if op == "-" else 1, row_key(row))


def bag_difference(a: list[tuple], b: list[tuple]) -> list[tuple]:
    """a − b as bags (each row of a not matched by a copy in b), in row order."""
    remaining = Counter(row_key(r) for r in b)
    out = []
    for r in a:
        k = row_key(r)
        if remaining[k] > 0:
            remaining[k] -= 1
        else:
            out.append(r)
    return sorted(out, key=row_key)
