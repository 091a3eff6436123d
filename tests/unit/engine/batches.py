"""Building test batches from readable element tuples."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.types import DataType

__all__ = ["make_batch"]


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
