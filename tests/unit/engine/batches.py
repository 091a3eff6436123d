"""Building test batches from readable element tuples."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.types import DataType

__all__ = ["make_batch", "relation_at"]


def make_batch(types: Sequence[DataType], elems: Sequence[tuple], ticks: Sequence[int] = ()) -> Batch:
    """Elements as (ts, row) or (ts, row, weight); the batch's ticks are the element
    timestamps plus `ticks`."""
    ts = [e[0] for e in elems]
    return Batch.from_rows(
        [e[1] for e in elems],
        ts,
        [e[2] if len(e) > 2 else 1 for e in elems],
        types,
        np.asarray(sorted(set(ts) | set(ticks)), dtype=np.int64),
    )


def relation_at(elements: Iterable[tuple[int, tuple, int]], t: int) -> Counter:
    """The relation a delta stream describes at instant t: every (ts, row, weight) with
    ts ≤ t applied. A negative multiplicity is a bug in the stream."""
    c: Counter = Counter()
    for ts, row, w in elements:
        if ts <= t:
            c[row] += w
    assert all(v >= 0 for v in c.values()), (t, c)
    return +c

