"""The runs a join synopsis (join_synopsis.py) keeps its rows in, and the pair-finding
primitives it and the other joins share.

A `Run` is a block of consecutive rows of a synopsis with its net weights; when the key is one
integer column it keeps its non-NULL keys sorted with their row offsets (a delta's keys are
found by binary search), and once rows must be found by value it keeps their hashes sorted too.
Runs are pickled in state snapshots (join_synopsis.py re-exports `Run` under its old name).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.engine.retract import row_hash

__all__ = ["NO_PAIRS", "Index", "Run", "bisect_within", "expand_ranges", "int_key", "match_keys"]

NO_PAIRS = (np.empty(0, np.int64), np.empty(0, np.int64))


def int_key(keys: list[pa.Array]) -> tuple[np.ndarray, np.ndarray] | None:
    """(values as int64, positions of the non-NULL ones) when the key is one integer column
    whose values fit an int64; None otherwise."""
    if len(keys) != 1:
        return None
    k = keys[0]
    t = k.type
    if not pa.types.is_integer(t) or t == pa.uint64():
        return None
    if not k.null_count:
        return k.to_numpy().astype(np.int64, copy=False), np.arange(len(k))
    valid = np.flatnonzero(np.asarray(k.is_valid()))
    values = np.asarray(pc.cast(k.fill_null(0), pa.int64()))
    return values, valid


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ranges [lo[q], hi[q]): (q repeated once per member, the members)."""
    counts = hi - lo
    total = int(counts.sum())
    if total == 0:
        return NO_PAIRS
    q = np.repeat(np.arange(len(lo)), counts)
    starts = np.cumsum(counts) - counts
    return q, lo[q] + (np.arange(total) - starts[q])


def bisect_within(a: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each i, the first k in [lo[i], hi[i]) with a[k] ≥ x[i] (hi[i] if none), where
    a[lo[i]:hi[i]] is ascending: a binary search per segment, all segments at once."""
    lo, hi = lo.astype(np.int64, copy=True), hi.astype(np.int64, copy=True)
    if not len(a):
        return lo
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        below = active & (a[np.minimum(mid, len(a) - 1)] < x)
        lo = np.where(below, mid + 1, lo)
        hi = np.where(active & ~below, mid, hi)


def _sorted_index(keys: list[pa.Array]) -> tuple[np.ndarray, np.ndarray] | None:
    """The non-NULL keys sorted, with their row positions, when the key is one integer column."""
    ik = int_key(keys)
    if ik is None:
        return None
    values, valid = ik
    order = np.argsort(values[valid], kind="stable")
    return values[valid][order], valid[order].astype(np.int64)


class Run:
    """Rows [lo, lo + n) of a synopsis (ids count every row ever appended to it), and when the
    key is one integer column its non-NULL keys sorted, with their row offsets in the run.
    `dead` rows have weight 0 (cancelled, not yet compacted away); `owned` says whether `w` is
    the run's own array (else it may be a delta's, and is copied before it is written);
    `hashes`, kept for a side whose retractions are looked up, is each row's hash (of all its
    values) sorted, with the row offsets."""

    __slots__ = ("columns", "dead", "hashes", "index", "keys", "lo", "owned", "w")

    def __init__(
        self,
        lo: int,
        columns: list[pa.Array],
        keys: list[pa.Array],
        w: np.ndarray,
        hashes: np.ndarray | None = None,
    ):
        self.lo = lo
        self.columns = columns
        self.keys = keys
        self.w = w
        self.index = _sorted_index(keys)
        self.hashes = None if hashes is None else _hash_index(hashes)
        self.dead = int((w == 0).sum())
        self.owned = False

    def __len__(self) -> int:
        return len(self.w)

    def nbytes(self) -> int:
        n = sum(c.nbytes for c in self.columns) + sum(k.nbytes for k in self.keys) + self.w.nbytes
        for index in (self.index, self.hashes):
            n += 0 if index is None else index[0].nbytes + index[1].nbytes
        return n

    def hash_index(self) -> Index:
        if self.hashes is None:
            self.hashes = _hash_index(row_hash(self.columns))
        return self.hashes

    def tail(self, start: int) -> Run:
        """The run without its first `start` rows (a copy of the indexes, none of the data)."""
        cut = Run.__new__(Run)
        cut.lo = self.lo + start
        cut.columns = [c.slice(start) for c in self.columns]
        cut.keys = [k.slice(start) for k in self.keys]
        cut.w = self.w[start:]
        cut.dead = int((cut.w == 0).sum()) if self.dead else 0
        cut.owned = False
        cut.index = _index_from(self.index, start)
        cut.hashes = _index_from(self.hashes, start)
        return cut

    @staticmethod
    def merge(a: Run, b: Run) -> Run:
        """Two adjacent runs (a just before b) as one."""
        m = Run.__new__(Run)
        m.lo = a.lo
        m.columns = [pa.concat_arrays([x, y]) for x, y in zip(a.columns, b.columns)]
        m.keys = [pa.concat_arrays([x, y]) for x, y in zip(a.keys, b.keys)]
        m.w = np.concatenate([a.w, b.w])
        m.dead = a.dead + b.dead
        m.owned = True
        m.hashes = _index_merge(a.hashes, b.hashes, len(a))
        m.index = _index_merge(a.index, b.index, len(a))
        if m.index is None:
            m.index = _sorted_index(m.keys)
        return m

    def reweight(self, idx: np.ndarray, new: np.ndarray) -> int:
        """Set the weights of the rows at offsets `idx`; returns the change in the number of
        rows whose weight is not 1."""
        if not self.owned:
            self.w = self.w.copy()
            self.owned = True
        old = self.w[idx]
        self.w[idx] = new
        self.dead += int((new == 0).sum()) - int((old == 0).sum())
        return int((new != 1).sum()) - int((old != 1).sum())

    def compacted(self, start: int) -> Run:
        """The run from offset `start` on without its dead rows."""
        r = self.tail(start) if start else self
        keep = r.w != 0
        cols = r.columns + r.keys
        kept = pa.RecordBatch.from_arrays(cols, names=[str(i) for i in range(len(cols))])
        kept = kept.filter(pa.array(keep)).columns
        m = Run.__new__(Run)
        m.lo = r.lo
        m.columns, m.keys = kept[: len(r.columns)], kept[len(r.columns) :]
        m.w = r.w[keep]
        m.dead = 0
        m.owned = True
        m.index = _index_kept(r.index, keep)
        m.hashes = _index_kept(r.hashes, keep)
        return m


Index = tuple[np.ndarray, np.ndarray]  # values sorted, and the offsets of their rows


def _index_from(index: Index | None, start: int) -> Index | None:
    """The index of a run's rows from offset `start` on."""
    if index is None:
        return None
    values, pos = index
    keep = pos >= start
    return values[keep], pos[keep] - start


def _index_merge(a: Index | None, b: Index | None, len_a: int) -> Index | None:
    """The index of two adjacent runs' rows (b's offsets follow a's `len_a` rows)."""
    if a is None or b is None:
        return None
    values = np.concatenate([a[0], b[0]])
    pos = np.concatenate([a[1], b[1] + len_a])
    order = np.argsort(values, kind="stable")  # two sorted runs: a linear merge
    return values[order], pos[order]


def _index_kept(index: Index | None, keep: np.ndarray) -> Index | None:
    """The index of a run's rows where `keep`, renumbered."""
    if index is None:
        return None
    values, pos = index
    live = keep[pos]
    moved = np.cumsum(keep) - 1  # each kept row's offset among the kept
    return values[live], moved[pos[live]]


def _hash_index(h: np.ndarray) -> Index:
    order = np.argsort(h, kind="stable")
    return h[order], order


def match_keys(a_keys: list[pa.Array], b_keys: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i, j) with a_keys[i] = b_keys[j] (NULLs never match), sorted."""
    na, nb = len(a_keys[0]) if a_keys else 0, len(b_keys[0]) if b_keys else 0
    if na == 0 or nb == 0:
        return NO_PAIRS
    knames = [f"k{i}" for i in range(len(a_keys))]
    a = pa.table({**dict(zip(knames, a_keys)), "__i": pa.array(np.arange(na))})
    b = pa.table({**dict(zip(knames, b_keys)), "__j": pa.array(np.arange(nb))})
    j = a.join(b, keys=knames, join_type="inner", use_threads=False)
    i_idx = j.column("__i").to_numpy().astype(np.int64)
    j_idx = j.column("__j").to_numpy().astype(np.int64)
    order = np.lexsort((j_idx, i_idx))  # hash-join order is arbitrary; make it reproducible
    return i_idx[order], j_idx[order]
