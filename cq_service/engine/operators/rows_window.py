"""`[Rows N]` and `[Partition By a, … Rows N]`: the last N tuples (per partition).

A tuple leaves when the N-th tuple after it (in its partition) arrives, at that tuple's
timestamp. Ties keep arrival order. A partitioned window keyed by a clustered attribute may
forget closed partitions (CA(k); engine/cluster_constraints.py).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.cluster_constraints import ClusterConstraint, ClusterTracker
from cq_service.engine.constraint_status import ConstraintStatus
from cq_service.engine.join_constraints import Adherence, FixedAdherence
from cq_service.engine.operators.window_base import WindowOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["PartitionRowsWindow", "RowsWindow"]


class RowsWindow(WindowOperator):
    kind = "rows window"

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue, n: int, where: BExpr | None):
        super().__init__(name, inputs, output, where)
        self.n = n
        self._window: Batch | None = None

    def describe(self) -> str:
        return f"rows window [Rows {self.n}]"

    def state_size(self) -> tuple[int, int]:
        w = self._window
        return (0, 0) if w is None else (len(w), w.nbytes())

    def on_batch(self, batch: Batch) -> None:
        adm = self.admit(batch)
        if len(adm) == 0:
            if len(batch.ticks):
                self.emit(self.empty(batch.ticks))
            return
        plus = Batch(adm.columns, adm.ts, np.ones(len(adm), np.int64))
        comb = plus if self._window is None else Batch.concat([self._window, plus])
        m, n = len(comb), self.n
        if m <= n:
            self._window = comb
            self.emit(plus.with_ticks(batch.ticks))
            return
        d = m - n
        gone = comb.slice(0, d)
        minus = Batch(gone.columns, comb.ts[n : n + d], -np.ones(d, np.int64))
        self._window = comb.slice(d, m)
        out = Batch.concat([minus, plus])
        out = out.take(np.argsort(out.ts, kind="stable"))
        self.emit(out.with_ticks(batch.ticks))


class PartitionRowsWindow(WindowOperator):
    """The last N tuples per partition, vectorised: each partition's live tuples are the cells
    of one row of a ring (partition × N) of ids into a store of the admitted tuples, the
    tuple of a partition's k-th arrival in cell k mod N. A batch's arrivals get their ordinal
    in their partition; arrival k displaces the partition's arrival k − N, read from the ring
    (or from the batch itself), and the last N of each partition are written to the ring.

    Partition keys compare as Python values (NULLs form one partition). Float keys (NaN is a
    partition of its own each time, as in Python) and very large N keep the plain per-tuple
    loop.

    With `cluster` (CA(k) on the partition key) a partition whose value's cluster closed at the
    end of a batch is forgotten: its ring row is reused, its rows leave the store at the next
    compaction, and a 16-byte tombstone (its rows' count) stays. An arrival in a forgotten
    partition breaks the constraint: it is counted (`violations`) and the partition starts
    afresh, so the forgotten rows are never retracted — the retractions the plain window would
    emit at that partition's next N arrivals (`missed`, counted exactly) are the only
    difference in the output."""

    kind = "partitioned rows window"
    STRUCTURE = frozenset({"cluster"})

    RING_LIMIT = 1024  # above this N a partition × N ring wastes memory: per-tuple loop

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        n: int,
        keys: tuple[int, ...],
        where: BExpr | None,
        cluster: ClusterConstraint | None = None,
        adherence: Adherence | None = None,
    ):
        super().__init__(name, inputs, output, where)
        self.n = n
        self.keys = keys
        self.cluster = cluster
        self._tracker: ClusterTracker | None = None
        if cluster is not None:
            k = math.inf if cluster.k is None else cluster.k
            self._tracker = ClusterTracker(adherence or FixedAdherence(k))
        self._tombs: dict[tuple, int] = {}  # forgotten partition -> the plain window's rows there
        self._reopened: dict[tuple, int] = {}  # broken partition -> its forgotten rows
        self._free: list[int] = []  # ring rows of forgotten partitions
        self.dropped = 0  # partitions forgotten
        self.violations = 0  # arrivals in a forgotten partition
        self.missed = 0  # retractions the plain window emits and this one does not
        self._rows = 0
        self._vector: bool | None = None  # decided by the key types of the first batch
        self._parts: dict[tuple, deque[tuple]] = {}  # the per-tuple loop's state
        self._slots: dict[tuple, int] = {}  # partition key -> row of the ring
        self._total = np.zeros(0, np.int64)  # arrivals so far per partition
        self._ring = np.zeros((0, max(n, 1)), np.int64)
        self._store: list[list[pa.Array]] = []  # chunks of admitted tuples' columns
        self._stored = 0

    def describe(self) -> str:
        base = f"partitioned rows window [Partition By {list(self.keys)} Rows {self.n}]"
        return base if self.cluster is None else f"{base} using {self.cluster.describe()}"

    def describe_reduction(self) -> str:
        """k in use, partitions forgotten, violations and missed retractions."""
        assert self._tracker is not None
        return (
            f"CA k={self._tracker.k}: {self.dropped} partitions forgotten, "
            f"{self.violations} violations, {self.missed} missed retractions"
        )

    def constraint_status(self) -> ConstraintStatus | None:
        if self._tracker is None or self.cluster is None:
            return None
        tracker = self._tracker
        return ConstraintStatus(
            "ca", self.cluster.attribute, float(tracker.k), tracker.adherence.increases,
            self.violations, self.missed, self.dropped,
        )

    def state_size(self) -> tuple[int, int]:
        extra = 16 * len(self._tombs)
        if self._tracker is not None:
            extra += self._tracker.nbytes()
        return self._rows, self._rows * 8 * (len(self.out_types) + 2) + extra

    def on_batch(self, batch: Batch) -> None:
        adm = self.admit(batch)
        if len(adm) == 0:
            if len(batch.ticks):
                self.emit(self.empty(batch.ticks))
            return
        if self._vector is None:
            self._vector = 1 <= self.n <= self.RING_LIMIT and all(
                _groupable(adm.columns[k].type) for k in self.keys
            )
        if self._vector:
            self.emit(self._vectorised(adm).with_ticks(batch.ticks))
        else:
            self.emit(self._per_tuple(adm).with_ticks(batch.ticks))

    def _per_tuple(self, adm: Batch) -> Batch:
        out_rows: list[tuple] = []
        out_ts: list[int] = []
        out_w: list[int] = []
        arrived: list[tuple] = []
        constrained = self.cluster is not None  # CA bookkeeping only with a constraint
        for row, t in zip(adm.rows(), adm.ts.tolist()):
            key = tuple(row[k] for k in self.keys)
            part = self._parts.get(key)
            if part is None:
                part = self._parts[key] = deque()
                if constrained:
                    self._reopen(key)
            if constrained:
                arrived.append(key)
                r = self._reopened.get(key)
                if r is not None:
                    self.missed += int(self.n - r <= len(part) < self.n)
                    if len(part) + 1 >= self.n:
                        del self._reopened[key]
            part.append(row)
            out_rows.append(row)
            out_ts.append(t)
            out_w.append(1)
            if len(part) > self.n:
                out_rows.append(part.popleft())
                out_ts.append(t)
                out_w.append(-1)
            else:
                self._rows += 1
        if constrained:
            for key in self._closed(arrived, adm.ts):
                part = self._parts.pop(key)
                self._forget(key, len(part))
        return Batch.from_rows(out_rows, out_ts, out_w, self.out_types)

    def _reopen(self, key: tuple) -> None:
        """A new partition: if it was forgotten, the constraint is broken."""
        r = self._tombs.pop(key, None)
        if r is not None:
            self.violations += 1
            if r:
                self._reopened[key] = r

    def _closed(self, keys: list[tuple], ts: np.ndarray) -> list[tuple]:
        """The partitions whose clusters closed after these arrivals (their timestamps)."""
        if self._tracker is None:
            return []
        pos = self.cluster.key  # type: ignore[union-attr]
        closed = self._tracker.arrive([key[pos] for key in keys], ts.tolist())
        return [(v,) for v in closed]

    def _forget(self, key: tuple, rows: int) -> None:
        """Drop a closed partition of `rows` live rows, leaving its tombstone: the rows the
        plain window holds there (more than ours if it was reopened)."""
        r = self._reopened.pop(key, 0)
        self._tombs[key] = min(r + rows, self.n) if r else rows
        self._rows -= rows
        self.dropped += 1

    def _slot_of(self, adm: Batch) -> tuple[np.ndarray, list[tuple]]:
        """Each tuple's partition (its row of the ring; new partitions get new rows), and each
        tuple's partition key when the window uses a CA constraint (else [])."""
        local = _group_codes([adm.columns[k] for k in self.keys])
        _, first, inverse = np.unique(local, return_index=True, return_inverse=True)
        reps = [adm.columns[k].take(pa.array(first)).to_pylist() for k in self.keys]
        slots = np.empty(len(first), np.int64)
        for u, key in enumerate(zip(*reps)):  # one dict look-up per distinct key of the batch
            s = self._slots.get(key)
            if s is None:
                s = self._free.pop() if self._free else len(self._slots)
                self._slots[key] = s
                self._reopen(key)
            slots[u] = s
        keys: list[tuple] = []
        if self.cluster is not None:
            distinct = list(zip(*reps))
            keys = [distinct[i] for i in inverse.reshape(-1).tolist()]
        if len(self._slots) + len(self._free) > len(self._total):
            grow = max(len(self._slots) + len(self._free), 2 * len(self._total), 64)
            self._total = np.concatenate([self._total, np.zeros(grow - len(self._total), np.int64)])
            extra = np.zeros((grow - len(self._ring), self._ring.shape[1]), np.int64)
            self._ring = np.concatenate([self._ring, extra])
        return slots[inverse.reshape(-1)], keys

    def _vectorised(self, adm: Batch) -> Batch:
        n, m = self.n, len(adm)
        slot, keys = self._slot_of(adm)
        ids = self._stored + np.arange(m)
        self._store.append(list(adm.columns))
        self._stored += m
        # Ordinals: the arrival's rank within its partition in the batch, plus the partition's
        # earlier arrivals.
        perm = np.argsort(slot, kind="stable")
        ss = slot[perm]
        starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
        counts = np.diff(np.r_[starts, m])
        first_sorted = np.repeat(starts, counts)
        first = np.empty(m, np.int64)
        first[perm] = first_sorted
        rank = np.empty(m, np.int64)
        rank[perm] = np.arange(m) - first_sorted
        count = np.empty(m, np.int64)
        count[perm] = np.repeat(counts, counts)
        before = self._total[slot]
        g = before + rank
        if self._reopened:
            self._count_missed(slot, g)
        # Arrival g displaces arrival g − N of its partition: in the ring if it came before
        # this batch, else the batch's arrival of rank g − N − before.
        disp = np.flatnonzero(g >= n)
        o = g[disp] - n
        old = o < before[disp]
        gone = np.empty(len(disp), np.int64)
        gone[old] = self._ring[slot[disp][old], o[old] % n]
        new = ~old
        gone[new] = ids[perm[first[disp][new] + (o - before[disp])[new]]]
        # The last N arrivals of each partition take their cells.
        last = g >= before + count - n
        self._ring[slot[last], g[last] % n] = ids[last]
        self._total[ss[starts]] += counts
        self._rows += m - len(disp)
        plus = Batch(adm.columns, adm.ts, np.ones(m, np.int64))
        if len(disp) == 0:
            out = plus
        else:
            minus = Batch(self._take(gone), adm.ts[disp], -np.ones(len(disp), np.int64))
            # Each displaced tuple's retraction right after the arrival that displaced it.
            order = np.argsort(np.concatenate([2 * np.arange(m), 2 * disp + 1]))
            out = Batch.concat([plus, minus]).take(order)
        if self.cluster is not None:
            for key in self._closed(keys, adm.ts):
                s = self._slots.pop(key)
                self._forget(key, int(min(self._total[s], n)))
                self._total[s] = 0
                self._free.append(s)
        if self._stored > 2 * self._rows + self.COMPACT_SLACK or len(self._store) > 64:
            self._compact()
        return out

    def _count_missed(self, slot: np.ndarray, g: np.ndarray) -> None:
        """Arrivals in reopened partitions: those at which the plain window retracts a
        forgotten row (its partition's ordinals N − r … N − 1)."""
        for key, r in list(self._reopened.items()):
            s = self._slots.get(key)
            if s is None:
                continue
            mine = g[slot == s]
            self.missed += int(np.count_nonzero((mine >= self.n - r) & (mine < self.n)))
            if len(mine) and int(mine.max()) >= self.n - 1:
                del self._reopened[key]

    COMPACT_SLACK = 65_536  # stored tuples no longer live, beyond the live ones, before compacting

    def _take(self, ids: np.ndarray) -> tuple[pa.Array, ...]:
        pidx = pa.array(ids, type=pa.int64())
        ncols = len(self._store[0])
        return tuple(
            pa.chunked_array([chunk[c] for chunk in self._store]).take(pidx).combine_chunks()
            for c in range(ncols)
        )

    def _compact(self) -> None:
        """Keep only the live tuples in the store (one chunk), renumbering the ring."""
        live = np.arange(self._ring.shape[1])[None, :] < np.minimum(self._total, self.n)[:, None]
        ids = self._ring[live]
        self._store = [list(self._take(ids))] if len(ids) else []
        self._stored = len(ids)
        self._ring[live] = np.arange(len(ids))


def _groupable(t: pa.DataType) -> bool:
    """Key types whose Arrow equality is Python's (floats are not: NaN, −0.0)."""
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_boolean(t)


def _group_codes(cols: list[pa.Array]) -> np.ndarray:
    """One integer per tuple, equal for tuples whose key columns are equal (NULL equal to
    NULL)."""
    code = np.zeros(len(cols[0]), np.int64)
    for c in cols:
        enc = pc.dictionary_encode(c, null_encoding="encode")
        idx = np.asarray(enc.indices, dtype=np.int64)
        code = np.unique(code * (len(enc.dictionary) + 1) + idx, return_inverse=True)[1].reshape(-1)
    return code
