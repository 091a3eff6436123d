"""A join input's synopsis: its current multiset (rows with net weights) kept as runs of rows,
with the indexes that find a delta's matches and retractions without a pass over it. The
symmetric hash join (join.py) keeps one `JoinSide` per input.

A synopsis may be far larger than the deltas (a few auctions closing against ten minutes of
bids), so no lookup costs a pass over it: the rows are kept as a few runs (appended as deltas
arrive, merged as they pile up, dropped from the front as a window expires its oldest rows;
join_runs.py), and each run keeps its rows sorted by key when the key is one integer column.
A delta's keys
are looked up in the runs (binary search, or a hash filter for other key types) and only the
matching rows are read.

A side holds its input's current relation after every step. A window's retractions are of its
oldest rows: they are dropped from the front (engine/fifo.py). Any other input's retractions
(a join's, an aggregate's, a partitioned window's) are found by the hash of the whole row (each
run then keeps its rows' hashes sorted) and cancel the stored rows they retract, or the
insertions of their own delta, such as the pairs of ΔL ⋈ ΔR that cancel within a step: a
cancelled row's weight becomes 0, and its run is compacted at once when that copies few rows,
else once the dead rows are a small part of it.

`JoinSide` and `Run` are pickled in state snapshots (join.py keeps their old names).
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.engine.fifo import oldest_retracted
from cq_service.engine.operators.join_runs import (
    NO_PAIRS,
    Run,
    bisect_within,
    expand_ranges,
    int_key,
    match_keys,
)
from cq_service.engine.retract import allocate, row_hash, same_rows

__all__ = ["JoinSide", "Run", "match_keys"]  # Run and match_keys: join_runs.py

class JoinSide:
    """One input's current multiset: data columns, key columns, net weights, as runs of rows.

    The logical row order (what positions refer to) is the order rows were appended, less the
    rows expired from the front; consolidation reorders it."""

    # A new run is merged into the one before it while that one is at most this many times
    # larger, so the run sizes shrink geometrically from the oldest to the newest: few runs,
    # and each row is copied a logarithmic number of times.
    MERGE_RATIO = 4
    # A run with cancelled (dead) rows is compacted when that copies at most this many rows,
    # plus COMPACT_RATIO per dead row: small runs at once, so the side holds exactly its
    # input's current rows; a large run once its dead rows are about 1/COMPACT_RATIO of it.
    COMPACT_ROWS = 4_096
    COMPACT_RATIO = 32

    def __init__(self) -> None:
        self._runs: list[Run] = []
        self._head = 0  # id of the first live row; rows of the first run before it are expired
        self._end = 0  # id after the last row
        self._nonunit = 0  # live rows whose weight is not 1 (dead rows included)
        self._retractions = 0  # retractions kept as rows since the last consolidation
        # Failed tries of the FIFO path in a row, and deltas with retractions to skip it for.
        self._fifo_misses = self._fifo_skip = 0
        self._hashed = False  # retractions are looked up by row hash (runs keep `hashes`)

    def __len__(self) -> int:
        return self._end - self._head

    def nbytes(self) -> int:
        return sum(r.nbytes() for r in self._runs)

    @property
    def dead(self) -> int:
        """Rows of weight 0 not yet compacted away."""
        return sum(r.dead for r in self._runs)

    def net_rows(self) -> int:
        """The input's current rows, each counted by its net weight."""
        return int(sum(r.w[start:].sum() for r, start, _ in self._live_runs()))

    # -- reading --------------------------------------------------------------------------------

    def _live_runs(self) -> list[tuple[Run, int, int]]:
        """(run, first live offset in it, logical position of its first live row)."""
        out = []
        for r in self._runs:
            start = max(0, self._head - r.lo)
            if start < len(r):
                out.append((r, start, r.lo + start - self._head))
        return out

    def lookup(
        self, probe: list[pa.Array], lo: int = 0, hi: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (q, j): probe row q's key equals the key of the synopsis row at position j
        (NULLs never match; dead rows are skipped), in no particular order. With `lo`/`hi`,
        only rows at positions in [lo, hi), searching only the runs that hold some."""
        if not probe or len(probe[0]) == 0 or len(self) == 0:
            return NO_PAIRS
        runs = self._live_runs()
        if lo > 0 or hi is not None:
            end = len(self) if hi is None else hi
            runs = [rb for rb in runs if rb[2] < end and rb[2] + len(rb[0]) - rb[1] > lo]
            if not runs:
                return NO_PAIRS
            q, j = self.lookup_runs(probe, runs)
            keep = (j >= lo) & (j < end)
            return q[keep], j[keep]
        return self.lookup_runs(probe, runs)

    def lookup_within(
        self, probe: list[pa.Array], lo: np.ndarray, hi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """`lookup` with a position range per probe row: the pairs (q, j) with lo[q] ≤ j <
        hi[q]. In a run sorted by key the rows of one key are in position order, so only the
        matches inside the range are read (the partial scan of a bucket, paper 002)."""
        if not probe or len(probe[0]) == 0 or len(self) == 0 or not len(lo):
            return NO_PAIRS
        first, end = int(lo.min()), int(hi.max())
        if first >= end:
            return NO_PAIRS
        runs = [
            rb for rb in self._live_runs() if rb[2] < end and rb[2] + len(rb[0]) - rb[1] > first
        ]
        pk = int_key(probe) if runs and all(r.index is not None for r, _, _ in runs) else None
        # Ranges that span most of the runs they touch: reading those runs' buckets whole and
        # filtering costs a few array operations, a binary search per bucket about 2·log₂
        # (bucket) passes over the probe per run, each with its own fixed cost.
        if pk is None or 2 * (end - first) >= sum(len(r) - s for r, s, _ in runs):
            q, j = self.lookup(probe, first, end)
            keep = (j >= lo[q]) & (j < hi[q])
            return q[keep], j[keep]
        pvals, pvalid = pk
        v, plo, phi = pvals[pvalid], lo[pvalid], hi[pvalid]
        qs, js = [], []
        for r, start, base in runs:
            assert r.index is not None
            values, pos = r.index
            b0 = np.searchsorted(values, v, side="left")
            b1 = np.searchsorted(values, v, side="right")
            offset = start - base  # a position's offset in the run
            k0 = bisect_within(pos, b0, b1, np.maximum(plo + offset, start))
            k1 = bisect_within(pos, k0, b1, phi + offset)
            q, k = expand_ranges(k0, k1)
            j = pos[k]
            if r.dead:
                keep = r.w[j] != 0
                q, j = q[keep], j[keep]
            qs.append(pvalid[q])
            js.append(j - offset)
        if not qs:
            return NO_PAIRS
        return np.concatenate(qs), np.concatenate(js)

    def lookup_runs(
        self, probe: list[pa.Array], runs: list[tuple[Run, int, int]]
    ) -> tuple[np.ndarray, np.ndarray]:
        """`lookup` in some of the live runs."""
        pk = int_key(probe) if all(r.index is not None for r, _, _ in runs) else None
        qs, js = [], []
        for r, start, base in runs:
            if pk is not None:
                q, j = self._search(r, pk)
            else:
                q, j = self._filter_join(r, start, probe)
            keep = j >= start
            if r.dead:
                keep &= r.w[j] != 0
            qs.append(q[keep])
            js.append(j[keep] - start + base)
        if not qs:
            return NO_PAIRS
        return np.concatenate(qs), np.concatenate(js)

    @staticmethod
    def _search(r: Run, pk: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        assert r.index is not None
        values, pos = r.index
        pvals, pvalid = pk
        v = pvals[pvalid]
        lo = np.searchsorted(values, v, side="left")
        hi = np.searchsorted(values, v, side="right")
        q, k = expand_ranges(lo, hi)
        return pvalid[q], pos[k]

    @staticmethod
    def _filter_join(r: Run, start: int, probe: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
        """Keys that are not one integer column: keep the run's rows whose every key part is
        among the probe's (a hash filter), then hash-join the few that remain."""
        keys = [k.slice(start) for k in r.keys]
        mask = None
        for k, p in zip(keys, probe):
            m = pc.is_in(k, value_set=pc.unique(p))
            mask = m if mask is None else pc.and_(mask, m)
        cand = np.flatnonzero(np.asarray(mask.fill_null(False)))  # type: ignore[union-attr]
        if len(cand) == 0:
            return NO_PAIRS
        ci = pa.array(cand)
        q, j = match_keys(probe, [k.take(ci) for k in keys])
        return q, cand[j] + start

    def take(self, positions: np.ndarray) -> tuple[list[pa.Array], np.ndarray]:
        """The data columns and weights of the rows at `positions`."""
        runs = self._live_runs()
        if len(runs) == 1 or len(positions) == 0:
            r, start, _ = runs[0]
            idx = positions + start
            pidx = pa.array(idx)
            return [c.take(pidx) for c in r.columns], r.w[idx]
        # Positions count the live rows across the runs in order, so they index the runs'
        # columns as one chunked array: one take per column, whatever the number of runs.
        pidx = pa.array(positions)
        cols = []
        for k in range(len(runs[0][0].columns)):
            chunks = [r.columns[k].slice(start) if start else r.columns[k] for r, start, _ in runs]
            taken = pa.chunked_array(chunks, type=chunks[0].type).take(pidx)
            cols.append(taken.chunk(0) if taken.num_chunks == 1 else taken.combine_chunks())
        w = np.empty(len(positions), np.int64)
        which = np.searchsorted(np.array([b for _, _, b in runs]), positions, side="right") - 1
        for i, (r, start, base) in enumerate(runs):
            here = which == i
            if here.any():
                w[here] = r.w[positions[here] - base + start]
        return cols, w

    def live_arrays(self) -> tuple[list[pa.Array], list[pa.Array], np.ndarray]:
        """The rows at positions 0..len−1 as single arrays: (data columns, key columns, net
        weights), a cancelled row not yet compacted away with weight 0. The side must hold
        rows. Merges the runs: a pass over the synopsis."""
        runs = [r.tail(start) if start else r for r, start, _ in self._live_runs()]
        if len(runs) == 1:
            r = runs[0]
            return r.columns, r.keys, r.w
        merged = runs[0]
        for r in runs[1:]:
            merged = Run.merge(merged, r)
        return merged.columns, merged.keys, merged.w

    # -- writing --------------------------------------------------------------------------------

    def add(self, cols: list[pa.Array], keys: list[pa.Array], w: np.ndarray) -> None:
        minus = w < 0
        if not minus.any():
            self._append(list(cols), list(keys), w)
            return
        if self._expire_oldest(cols, keys, w):
            return
        # Other retractions cancel the rows they retract, stored before or in this delta.
        self._hashed = True
        n0 = len(self)
        hashes = row_hash(cols)
        self._append(list(cols), list(keys), w, hashes)
        mi = np.flatnonzero(minus)
        pending = self._cancel(cols, mi, w[mi], hashes[mi], n0)
        if not pending:
            return
        # Retractions of no stored row (a NaN is not equal to itself; a type Arrow cannot
        # compare) stay rows of negative weight (joins stay exact) until a consolidation, which
        # costs a pass over the synopsis and so waits until they are a good part of it.
        self._retractions += pending
        if self._retractions * 4 >= len(self):
            self._consolidate()
            self._retractions = 0

    def append_rows(self, cols: list[pa.Array], keys: list[pa.Array]) -> None:
        """Append rows of weight 1 (a buffer in arrival order: the shared window join's)."""
        self._append(list(cols), list(keys), np.ones(len(keys[0]), np.int64))

    def remove(self, positions: np.ndarray, counts: np.ndarray) -> None:
        """Take `counts` of weight from the rows at `positions` (distinct, each holding at least
        that much): rows a join's constraint proved will never join (join_reduction.py)."""
        if not len(positions):
            return
        _, w = self.take(positions)
        self._reweight(positions, w - counts)

    def drop_oldest(self, k: int) -> None:
        """Drop the first k rows (the oldest of a buffer in arrival order)."""
        self._expire(k)

    def _cancel(
        self, cols: list[pa.Array], mi: np.ndarray, mw: np.ndarray, mh: np.ndarray, n0: int
    ) -> int:
        """The retractions of a delta just appended at position `n0` (its rows `mi`, weights
        `mw`, row hashes `mh`) subtract their weight from the stored rows equal to them (the
        delta's own insertions included): both become dead rows when they cancel in full. Rows
        are found by the hash of all their values (each run's `hashes`), then compared. Returns
        how many retractions are left with some weight.

        Equal rows form classes (every retraction of a class matches every stored row of it):
        a class's stored weight is taken in position order until its retractions' total is
        met, and that total is shared among its retractions in order."""
        qs, js, ws = [], [], []
        for r, start, base in self._live_runs():
            values, pos = r.hash_index()
            lo = np.searchsorted(values, mh, side="left")
            hi = np.searchsorted(values, mh, side="right")
            q, k = expand_ranges(lo, hi)
            off = pos[k]
            sw = r.w[off]
            live = (off >= start) & (sw > 0)  # not expired, dead, or another retraction
            q, off, sw = q[live], off[live], sw[live]
            if not len(q):
                continue
            same = same_rows(cols, mi[q], r.columns, off)
            if same is None:
                return len(mi)
            qs.append(q[same])
            js.append(off[same] - start + base)
            ws.append(sw[same])
        if not qs:
            return len(mi)
        q, j, sw = np.concatenate(qs), np.concatenate(js), np.concatenate(ws)
        rest = mw.copy()
        ju, jinv = np.unique(j, return_inverse=True)
        qu = np.unique(q)
        if len(ju) == len(j) and len(qu) == len(q):  # each retraction meets one stored row
            taken_j = np.minimum(sw, -mw[q])
            rest[q] += taken_j
            ju, avail = j, sw
        else:
            n = len(mw)
            cls_j = np.full(len(ju), n)
            np.minimum.at(cls_j, jinv, q)  # a class is named by its first retraction
            avail = np.zeros(len(ju), np.int64)
            avail[jinv] = sw
            qinv = np.searchsorted(qu, q)
            cls_q = np.full(len(qu), n)
            np.minimum.at(cls_q, qinv, cls_j[jinv])
            need = -mw[qu]
            wanted = np.zeros(n, np.int64)
            np.add.at(wanted, cls_q, need)
            taken_j = allocate(cls_j, avail, wanted)
            taken = np.zeros(n, np.int64)
            np.add.at(taken, cls_j, taken_j)
            rest[qu] += allocate(cls_q, need, taken)
        hit = taken_j > 0
        changed = rest != mw
        self._reweight(
            np.concatenate([ju[hit], n0 + mi[changed]]),
            np.concatenate([(avail - taken_j)[hit], rest[changed]]),
        )
        return int(np.count_nonzero(rest))

    def _by_run(
        self, positions: np.ndarray
    ) -> tuple[np.ndarray | None, list[tuple[Run, np.ndarray, slice]]]:
        """The order that sorts `positions` (None: they are sorted), and for each run holding
        some of them: the run, their offsets in it, and where they are among the sorted
        positions."""
        runs = self._live_runs()
        ascending = bool((positions[1:] >= positions[:-1]).all())
        order = None if ascending else np.argsort(positions, kind="stable")
        sp = positions if order is None else positions[order]
        bases = np.array([b for _, _, b in runs])
        cuts = np.searchsorted(sp, bases[1:], side="left")
        bounds = [0, *cuts.tolist(), len(sp)]
        parts = [
            (r, sp[a:b] - base + start, slice(a, b))
            for (r, start, base), a, b in zip(runs, bounds[:-1], bounds[1:])
            if a < b
        ]
        return order, parts

    def _reweight(self, positions: np.ndarray, new: np.ndarray) -> None:
        """Set the weights of the rows at `positions`, then compact the runs that hold dead
        rows where that is cheap (COMPACT_ROWS, COMPACT_RATIO)."""
        order, parts = self._by_run(positions)
        if order is not None:
            new = new[order]
        for r, idx, at in parts:
            self._nonunit += r.reweight(idx, new[at])
        compact = [
            r.dead > 0 and len(r) <= self.COMPACT_RATIO * r.dead + self.COMPACT_ROWS
            for r in self._runs
        ]
        if not any(compact):
            return
        runs_out = []
        for i, (r, c) in enumerate(zip(self._runs, compact)):
            if c:
                self._nonunit -= r.dead
                r = r.compacted(max(0, self._head - r.lo) if i == 0 else 0)
            if len(r):
                runs_out.append(r)
        # Renumber: ids stay contiguous (the first run may still begin with expired rows).
        if not runs_out:
            self._runs, self._head, self._end = [], 0, 0
            return
        if runs_out[0] is not self._runs[0]:  # the first run was compacted, or is gone
            self._head = runs_out[0].lo
        for prev, r in itertools.pairwise(runs_out):
            r.lo = prev.lo + len(prev)
        self._runs = runs_out
        self._end = runs_out[-1].lo + len(runs_out[-1])

    def _append(
        self,
        cols: list[pa.Array],
        keys: list[pa.Array],
        w: np.ndarray,
        hashes: np.ndarray | None = None,
    ) -> None:
        if len(w) == 0:
            return
        self._nonunit += int((w != 1).sum())
        if self._hashed and hashes is None:
            hashes = row_hash(cols)
        run = Run(self._end, cols, keys, w, hashes)
        self._end += len(w)
        while self._runs:
            prev = self._runs[-1]
            start = max(0, self._head - prev.lo)
            if len(prev) - start > self.MERGE_RATIO * len(run):
                break
            self._runs.pop()
            run = Run.merge(prev.tail(start) if start else prev, run)
        self._runs.append(run)

    def _expire(self, k: int) -> None:
        """Drop the first k live rows."""
        self._head += k
        while self._runs and self._runs[0].lo + len(self._runs[0]) <= self._head:
            self._runs.pop(0)
        if self._runs:
            first = self._runs[0]
            start = self._head - first.lo
            if start * 2 > len(first):  # mostly expired: stop searching the expired rows' keys
                self._runs[0] = first.tail(start)

    def _head_columns(self, k: int) -> list[pa.Array]:
        """The data columns of the first k live rows (k ≤ len(self))."""
        parts: list[list[pa.Array]] = []
        for r, start, _ in self._live_runs():
            if k <= 0:
                break
            n = min(k, len(r) - start)
            parts.append([c.slice(start, n) for c in r.columns])
            k -= n
        return [pa.concat_arrays(list(p)) for p in zip(*parts)]

    def _expire_oldest(self, cols: list[pa.Array], keys: list[pa.Array], w: np.ndarray) -> bool:
        """The common case of a window's input: insertions, and retractions of the oldest rows
        in insertion order. Then the synopsis is a FIFO: drop the retracted rows from its
        front, no pass over it needed. Returns False (nothing done) in any other case."""
        if self._retractions or self._nonunit:
            return False
        if self._fifo_skip:  # the last tries failed: another input's retractions, most likely
            self._fifo_skip -= 1
            return False
        found = oldest_retracted(cols, w, len(self), self._head_columns)
        if found is None:
            self._fifo_misses = min(self._fifo_misses + 1, 6)
            self._fifo_skip = (1 << self._fifo_misses) - 1
            return False
        self._fifo_misses = 0
        new, pi, k = found
        self._append(new, [x.take(pi) for x in keys], np.ones(len(pi), np.int64))
        self._expire(k)
        return True

    def _consolidate(self) -> None:
        """Net weight per distinct row; rows whose weight is zero leave the synopsis."""
        columns, keys, weights = self.live_arrays()
        names = [f"c{i}" for i in range(len(columns))]
        knames = [f"k{i}" for i in range(len(keys))]
        t = pa.table(
            {
                **dict(zip(names, columns)),
                **dict(zip(knames, keys)),
                "__w": weights,
                "__p": np.arange(len(weights)),
            }
        )
        g = t.group_by(names + knames, use_threads=False).aggregate(
            [("__w", "sum"), ("__p", "min")]
        )
        w = g.column("__w_sum").to_numpy()
        keep = w != 0
        # In order of first arrival, so that later retractions of the oldest rows find them
        # at the front again (the FIFO path of `_expire_oldest`).
        idx = np.flatnonzero(keep)
        idx = idx[np.argsort(g.column("__p_min").to_numpy()[idx], kind="stable")]
        pidx = pa.array(idx)
        self._runs, self._head, self._end = [], 0, 0
        self._append(
            [g.column(n).take(pidx).combine_chunks() for n in names],
            [g.column(n).take(pidx).combine_chunks() for n in knames],
            w[idx].astype(np.int64),
        )
        self._nonunit = int((w[idx] != 1).sum())
