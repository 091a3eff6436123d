"""Elements in columnar batches: the one data unit on every queue.

An element is ⟨tuple, τ, weight⟩: weight +1 is an insertion (``+``), −1 a deletion (``−``);
after consolidation a weight may be any non-zero integer (a multiplicity). A `Batch` holds many
elements column by column: one Arrow array per schema field, and numpy arrays for timestamps and
weights. Timestamps in a batch are non-decreasing, and batches on a queue follow each other in
non-decreasing timestamp order.

`ticks` lists instants (sorted, unique) that matter to downstream operators even when no element
survives to carry them: an arrival on a source, a window's content changing. Rstream and global
aggregates read them; every other operator just passes them on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

from cq_service.types import DataType, arrow_type

__all__ = ["EMPTY_TICKS", "Batch", "merge_ticks"]

EMPTY_TICKS = np.empty(0, dtype=np.int64)


def merge_ticks(*ticks: np.ndarray) -> np.ndarray:
    """The sorted union of tick arrays."""
    parts = [t for t in ticks if len(t)]
    if not parts:
        return EMPTY_TICKS
    if len(parts) == 1:
        return parts[0]
    if all(a[-1] < b[0] for a, b in itertools.pairwise(parts)):
        return np.concatenate(parts)  # consecutive batches of one queue: already in order
    first = parts[0]
    if all(len(p) == len(first) and np.array_equal(p, first) for p in parts[1:]):
        return first  # the inputs of a join often carry the same instants
    # Each part is sorted: a stable sort (a merge of runs) is far cheaper than np.unique's.
    merged = np.concatenate(parts)
    merged.sort(kind="stable")
    return unique_sorted(merged)


def unique_sorted(ts: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted array."""
    if len(ts) <= 1:
        return ts
    keep = np.empty(len(ts), dtype=bool)
    keep[0] = True
    np.not_equal(ts[1:], ts[:-1], out=keep[1:])
    return ts[keep]


class Batch:
    """Columnar elements; see the module docstring. Treat as immutable."""

    __slots__ = ("columns", "ticks", "ts", "w")

    def __init__(
        self,
        columns: tuple[pa.Array, ...],
        ts: np.ndarray,
        w: np.ndarray,
        ticks: np.ndarray = EMPTY_TICKS,
    ):
        self.columns = columns
        self.ts = ts
        self.w = w
        self.ticks = ticks

    def __repr__(self) -> str:
        return f"Batch({len(self)} elements, {len(self.columns)} columns, {len(self.ticks)} ticks)"

    # -- construction -------------------------------------------------------------------------

    @staticmethod
    def empty(types: Sequence[DataType], ticks: np.ndarray = EMPTY_TICKS) -> Batch:
        cols = tuple(pa.array([], type=arrow_type(t)) for t in types)
        return Batch(cols, np.empty(0, np.int64), np.empty(0, np.int64), ticks)

    @staticmethod
    def from_rows(
        rows: Sequence[tuple],
        ts: Sequence[int] | np.ndarray,
        w: Sequence[int] | np.ndarray,
        types: Sequence[DataType],
        ticks: np.ndarray = EMPTY_TICKS,
    ) -> Batch:
        """Build a batch from Python tuples (one per element)."""
        if not rows:
            return Batch.empty(types, ticks)
        cols = tuple(
            pa.array([r[i] for r in rows], type=arrow_type(t)) for i, t in enumerate(types)
        )
        return Batch(cols, np.asarray(ts, dtype=np.int64), np.asarray(w, dtype=np.int64), ticks)

    @staticmethod
    def concat(batches: Sequence[Batch]) -> Batch:
        """Concatenate batches that share a schema (the caller keeps timestamps ordered)."""
        if len(batches) == 1:
            return batches[0]
        ncols = len(batches[0].columns)
        cols = tuple(
            pa.concat_arrays([b.columns[i] for b in batches]) for i in range(ncols)
        )
        return Batch(
            cols,
            np.concatenate([b.ts for b in batches]),
            np.concatenate([b.w for b in batches]),
            merge_ticks(*(b.ticks for b in batches)),
        )

    # -- access -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.ts)

    @property
    def num_columns(self) -> int:
        return len(self.columns)

    def rows(self) -> list[tuple]:
        """The tuples as Python values (None for NULL)."""
        if not self.columns:
            return [()] * len(self)
        return list(zip(*(c.to_pylist() for c in self.columns)))

    def nbytes(self) -> int:
        """Bytes held by this batch's buffers (for memory accounting)."""
        return (
            sum(c.nbytes for c in self.columns) + self.ts.nbytes + self.w.nbytes + self.ticks.nbytes
        )

    # -- derivation (each returns a new batch) ------------------------------------------------

    def with_columns(self, columns: Iterable[pa.Array]) -> Batch:
        return Batch(tuple(columns), self.ts, self.w, self.ticks)

    def with_ticks(self, ticks: np.ndarray) -> Batch:
        return Batch(self.columns, self.ts, self.w, ticks)

    def filter(self, mask: np.ndarray | pa.Array) -> Batch:
        """Keep the elements where `mask` is True (a NULL in an Arrow mask drops)."""
        if isinstance(mask, pa.Array | pa.ChunkedArray):
            mask = np.asarray(mask.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
        if mask.all():
            return self
        idx = np.flatnonzero(mask)
        return self.take(idx)

    def take(self, indices: np.ndarray) -> Batch:
        pidx = pa.array(indices, type=pa.int64())
        return Batch(
            tuple(c.take(pidx) for c in self.columns),
            self.ts[indices],
            self.w[indices],
            self.ticks,
        )

    def slice(self, start: int, stop: int) -> Batch:
        """Elements [start, stop); ticks are cut to the same time range."""
        n = stop - start
        ts = self.ts[start:stop]
        return Batch(
            tuple(c.slice(start, n) for c in self.columns),
            ts,
            self.w[start:stop],
            self.ticks,
        )

    def split_at_time(self, t: int) -> tuple[Batch, Batch]:
        """(elements and ticks with timestamp ≤ t, the rest)."""
        k = int(np.searchsorted(self.ts, t, side="right"))
        j = int(np.searchsorted(self.ticks, t, side="right"))
        head = self.slice(0, k).with_ticks(self.ticks[:j])
        tail = self.slice(k, len(self)).with_ticks(self.ticks[j:])
        return head, tail
