"""Finding the stored rows a retraction retracts, by value.

A synopsis fed by anything but a window (a join's output, an aggregate's) sees retractions in
no particular order. To hold exactly its input's current rows, it cancels each retraction
against stored rows equal to it: `row_hash` finds candidates (a 64-bit hash of all of a row's
values, kept sorted per run of the synopsis), `same_rows` confirms them, and `allocate` shares a
retraction's weight among equal rows. The join's synopses use it
(engine/operators/join_synopsis.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["allocate", "row_hash", "same_rows"]


def same_rows(
    a: list[pa.Array], ai: np.ndarray, b: list[pa.Array], bi: np.ndarray
) -> np.ndarray | None:
    """Whether row ai[k] of columns `a` equals row bi[k] of columns `b`, for each k (NULL
    equal to NULL); None when a column's type cannot be compared."""
    same = np.ones(len(ai), bool)
    try:
        for x, y in zip(a, b):
            if not (x.null_count or y.null_count) and x.type == y.type and _fixed_width(x.type):
                same &= x.to_numpy()[ai] == y.to_numpy()[bi]  # no copies, no Arrow calls
                continue
            x, y = x.take(pa.array(ai)), y.take(pa.array(bi))
            eq = pc.equal(x, y)
            if x.null_count or y.null_count:
                eq = pc.or_kleene(eq, pc.and_(x.is_null(), y.is_null()))
            same &= np.asarray(eq.fill_null(False))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return None
    return same


_FNV_OFFSET, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


def row_hash(cols: list[pa.Array]) -> np.ndarray:
    """A 64-bit hash of each row's values: equal rows (NULL equal to NULL) hash alike."""
    h = np.full(len(cols[0]) if cols else 0, _FNV_OFFSET, np.uint64)
    for c in cols:
        h ^= _column_hash(c)
        h *= _FNV_PRIME
    return h


def _column_hash(c: pa.Array) -> np.ndarray:
    """Each value's bits for numbers and times (-0.0 as 0.0, NULL as 0), else Python's hash."""
    t = c.type
    floating, unsigned = pa.types.is_floating(t), pa.types.is_unsigned_integer(t)
    if len(c) and _fixed_width(t):
        kind = "f" if floating else "u" if unsigned else "i"
        raw = np.frombuffer(c.buffers()[1], f"{kind}{t.bit_width // 8}", len(c) + c.offset)
        a = raw[c.offset :].astype(np.float64 if floating else np.uint64 if unsigned else np.int64)
        if floating:
            a += 0.0
        if c.null_count:
            a[~np.asarray(c.is_valid())] = 0
        return a.view(np.uint64)
    return np.fromiter((_py_hash(v) for v in c.to_pylist()), np.int64, len(c)).view(np.uint64)


def _py_hash(v: object) -> int:
    try:
        return hash(v)
    except TypeError:  # a list or a map
        return hash(repr(v))


def _fixed_width(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_duration(t)
    )


def allocate(cls: np.ndarray, amount: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """Items with `amount` each, in classes `cls` (items sorted by position): each class's
    `budget[cls]` given out to its items in order, each item getting at most its amount."""
    order = np.argsort(cls, kind="stable")
    c, a = cls[order], amount[order]
    before = np.cumsum(a) - a
    first = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    before -= np.repeat(before[first], np.diff(np.r_[first, len(c)]))
    out = np.empty_like(a)
    out[order] = np.clip(budget[c] - before, 0, a)
    return out
