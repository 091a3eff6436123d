"""Recognising a window's retractions: insertions, and retractions of the oldest rows in order.

A synopsis fed by a window sees, in the common case, new rows and the expiry of its oldest
ones. When a delta is exactly that, the synopsis can stay a FIFO (append the insertions, drop
the retracted rows from its front) instead of carrying rows of negative weight. The join's and
the mark join's synopses share this test.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["oldest_retracted"]


def oldest_retracted(
    cols: list[pa.Array],
    w: np.ndarray,
    size: int,
    head: Callable[[int], list[pa.Array]],
) -> tuple[list[pa.Array], pa.Array, int] | None:
    """For a delta (`cols`, weights `w`) on a synopsis of `size` rows in arrival order whose
    first k rows `head(k)` gives: when every weight is ±1 and the k retractions are exactly
    the synopsis's first k rows, in order (reaching into the delta's own insertions when k >
    `size`), the inserted rows' columns, their positions in the delta, and k; otherwise None."""
    if not cols or not bool((np.abs(w) == 1).all()):
        return None
    minus = np.flatnonzero(w < 0)
    if len(minus) == 0:
        return None
    plus = np.flatnonzero(w > 0)
    k = len(minus)
    if k > size + len(plus):
        return None
    pi = pa.array(plus)
    new = [c.take(pi) for c in cols]
    first = head(min(k, size)) if size else [c.slice(0, 0) for c in new]
    if k > size:
        first = [pa.concat_arrays([h, c.slice(0, k - size)]) for h, c in zip(first, new)]
    mi = pa.array(minus)
    for h, col in zip(first, cols):
        gone = col.take(mi)
        same = pc.or_kleene(pc.equal(h, gone), pc.and_(h.is_null(), gone.is_null()))
        if not pc.all(same.fill_null(False)).as_py():
            return None
    return new, pi, k
