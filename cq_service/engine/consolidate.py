"""Consolidation: the net effect of a batch of deltas, per instant.

Within one instant an operator may emit a row and retract it again (a window that is full, an
aggregate changing twice). What the instant means is only the net weight of each distinct row:
`consolidate` computes it; `expand` turns weights into single ``+``/``−`` elements.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.engine.batch import Batch, unique_sorted

__all__ = ["canonical_order", "consolidate", "expand", "row_codes", "unique_sorted"]


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
    idx = pa.array(keep)
    cols = tuple(grouped.column(name).take(idx).combine_chunks() for name in names)
    ts = grouped.column("__ts").to_numpy()[keep].astype(np.int64)
    return canonical_order(Batch(cols, ts, w[keep].astype(np.int64), batch.ticks))


def canonical_order(batch: Batch) -> Batch:
    """The elements ordered by instant, retractions first, then by the row's values.

    Within an instant the order carries no meaning; a canonical one makes output files
    byte-identical whatever the batch sizes and scheduling were."""
    if len(batch) <= 1:
        return batch
    names = [f"c{i}" for i in range(batch.num_columns)]
    table = pa.table(
        {"__ts": batch.ts, "__ins": batch.w > 0, **dict(zip(names, batch.columns))}
    )
    order = pc.sort_indices(
        table,
        sort_keys=[("__ts", "ascending", "at_start"), ("__ins", "ascending", "at_start")]
        + [(name, "ascending", "at_start") for name in names],
    ).to_numpy()
    if bool((order[1:] > order[:-1]).all()):
        return batch
    return batch.take(order)


def expand(batch: Batch) -> Batch:
    """One element per unit of weight: weight k becomes |k| elements of weight ±1."""
    w = batch.w
    if len(w) == 0 or bool((np.abs(w) == 1).all()):
        return batch
    reps = np.abs(w)
    idx = np.repeat(np.arange(len(w)), reps)
    out = batch.take(idx)
    return Batch(out.columns, out.ts, np.sign(out.w).astype(np.int64), batch.ticks)


def row_codes(batch: Batch) -> np.ndarray:
    """A small integer per element such that equal rows (as SQL's DISTINCT sees them: NULLs
    equal, -0.0 equal to 0.0) get equal codes and different rows different ones."""
    code = np.zeros(len(batch), dtype=np.int64)
    for col in batch.columns:
        if pa.types.is_floating(col.type):
            col = pc.add(col, pa.scalar(0.0, col.type))  # -0.0 + 0.0 is 0.0
        enc = pc.dictionary_encode(col, null_encoding="encode")
        idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        code = code * len(enc.dictionary) + idx
        _, code = np.unique(code, return_inverse=True)
    return code.astype(np.int64, copy=False)
