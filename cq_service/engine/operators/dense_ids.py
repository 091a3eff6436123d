"""Dense ids for int codes, numbered in order of first appearance, and where each first appears.

Codes spanning a range not much wider than their count (group keys 0..G, (instant, group)
pairs) are numbered by direct addressing: a table over the span holds each code's first row
(np.minimum.at, exact whatever the order of duplicates), the first rows marked in a row mask
read in row order give the ids' order, and one gather numbers every row. That is a few linear
passes with no hashing. Wider spans go through Arrow's hash (`dictionary_encode`, which numbers
in order of first appearance too) and the first rows from a running maximum.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["dense_ids", "first_occurrences", "int_codes"]

_SLACK = 1024  # a span up to 2n + this is addressed directly
_ROWS = np.zeros(0, dtype=np.int64)  # 0, 1, 2, ...: read-only, grown on demand


def _row_numbers(n: int) -> np.ndarray:
    """0 .. n − 1 (a read-only view of one shared array)."""
    global _ROWS
    if len(_ROWS) < n:
        rows = np.arange(max(n, 2 * len(_ROWS)), dtype=np.int64)
        rows.flags.writeable = False
        _ROWS = rows
    return _ROWS[:n]


def dense_ids(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's dense id (int64, 0.. in order of first appearance) and each id's first row."""
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    lo, hi = int(codes.min()), int(codes.max())
    span = hi - lo + 1
    if span > 2 * n + _SLACK:
        enc = pc.dictionary_encode(pa.array(codes, type=pa.int64()))
        ids = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        return ids, first_occurrences(ids)
    v = codes.astype(np.int64, copy=False)
    if lo:
        v = v - lo
    first_row = np.full(span, n, dtype=np.int64)
    np.minimum.at(first_row, v, _row_numbers(n))
    is_first = np.zeros(n, dtype=bool)
    is_first[first_row[first_row < n]] = True
    firsts = np.flatnonzero(is_first)  # row order: the order of first appearance
    number = np.empty(span, dtype=np.int64)
    number[v[firsts]] = _row_numbers(len(firsts))
    return number[v], firsts


def first_occurrences(ids: np.ndarray) -> np.ndarray:
    """Where each id first occurs, for dense ids numbered in order of first appearance: the
    rows whose id exceeds every id before them."""
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.empty(len(ids), dtype=bool)
    first[0] = True
    np.greater(ids[1:], np.maximum.accumulate(ids)[:-1], out=first[1:])
    return np.flatnonzero(first)


def int_codes(column: pa.Array) -> np.ndarray | None:
    """A key column's values as int64 codes when they are ints (or timestamps) without NULLs
    and fit int64 (equal codes exactly when equal values); None otherwise."""
    t = column.type
    if column.null_count or not (
        pa.types.is_signed_integer(t) or pa.types.is_timestamp(t)
        or t in (pa.uint8(), pa.uint16(), pa.uint32())
    ):
        return None
    if pa.types.is_timestamp(t):
        column = column.view(pa.int64())
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.int64)
