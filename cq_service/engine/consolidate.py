"""Consolidation: the net effect of a batch of deltas, per instant.

Within one instant an operator may emit a row and retract it again (a window that is full, an
aggregate changing twice). What the instant means is only the net weight of each distinct row:
`consolidate` computes it; `expand` turns weights into single ``+``/``−`` elements.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cq_service.engine.batch import Batch

__all__ = ["consolidate", "expand", "unique_sorted"]


def unique_sorted(ts: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array."""
    if len(ts) <= 1:
        return ts
    keep = np.empty(len(ts), dtype=bool)
    keep[0] = True
    np.not_equal(ts[1:], ts[:-1], out=keep[1:])
    return ts[keep]


def consolidate(batch: Batch) -> Batch:
    """Net weight per (timestamp, row), zero weights dropped, ordered by timestamp with
    retractions before insertions within an instant. Ticks are kept."""
    n = len(batch)
    if n == 0 or bool((batch.w > 0).all()):
        return batch
    names = [f"c{i}" for i in range(batch.num_columns)]
    table = pa.table(
        {**dict(zip(names, batch.columns)), "__ts": batch.ts, "__w": batch.w}
    )
    grouped = table.group_by(["__ts", *names], use_threads=False).aggregate([("__w", "sum")])
    w = grouped.column("__w_sum").to_numpy()
    keep = np.flatnonzero(w != 0)
    ts = grouped.column("__ts").to_numpy()[keep]
    w = w[keep]
    order = np.lexsort((w > 0, ts))
    idx = pa.array(keep[order])
    cols = tuple(grouped.column(name).take(idx).combine_chunks() for name in names)
    return Batch(cols, ts[order].astype(np.int64), w[order].astype(np.int64), batch.ticks)


def expand(batch: Batch) -> Batch:
    """One element per unit of weight: weight k becomes |k| elements of weight ±1."""
    w = batch.w
    if len(w) == 0 or bool((np.abs(w) == 1).all()):
        return batch
    reps = np.abs(w)
    idx = np.repeat(np.arange(len(w)), reps)
    out = batch.take(idx)
    return Batch(out.columns, out.ts, np.sign(out.w).astype(np.int64), batch.ticks)
