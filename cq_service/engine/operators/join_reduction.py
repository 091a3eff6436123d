"""RIDS(k) state reduction for the binary join (thesis 003 §6.6; engine/join_constraints.py).

On a many-one join S' → S under RIDS(k), an S' row whose S partner is not present once k
insertions on S have followed it is in *No*: it never joins. `RidsReduction` keeps the S' rows
that had no partner at the end of their step (the *Unknown* part) in arrival order, tagged with
the count of S insertions up to their instant (those at the same instant counted as before
them, so a row is never dropped early), and at
each step drops from the S' synopsis those whose k has run out and whose partner is still
absent (garbage collection).

A dropped row's retraction (its window's expiry) must not reach the join: it would retract
pairs never produced. So a dropped row leaves a tombstone (its row hash and key), and its
retraction is removed from the delta before the join sees it. When an S insertion arrives
whose key has tombstones, RIDS(k) was broken: the pairs with the dropped rows are missed
(false negatives); they are counted in `missed` and `violations`, never half-emitted (the
dropped row's retraction is still removed, so the output stays a consistent relation). With
k at least the true k nothing is missed and the output equals the plain join's.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Hashable

import numpy as np
import pyarrow as pa

from cq_service.engine.batch import Batch
from cq_service.engine.constraint_status import ConstraintStatus
from cq_service.engine.join_constraints import Adherence, JoinConstraint
from cq_service.engine.operators.join_synopsis import JoinSide
from cq_service.engine.retract import row_hash

__all__ = ["RidsReduction"]

# Bytes counted per kept Unknown entry and per tombstone (hash, tag, key reference).
ENTRY_BYTES = 24
TOMBSTONE_BYTES = 16


class RidsReduction:
    """The Unknown rows of the many side, their collection, and the tombstones of those
    dropped; see the module docstring."""

    def __init__(self, constraint: JoinConstraint, adherence: Adherence) -> None:
        self.constraint = constraint
        self.adherence = adherence
        self.many = constraint.many
        self.one = 1 - constraint.many
        self.one_arrivals = 0  # insertions (rows of positive weight) on the one side
        # (tag, row hash, key) of many-side rows with no partner when they came, oldest first
        self._pending: deque[tuple[int, int, Hashable]] = deque()
        self._pending_hashes: Counter[int] = Counter()
        self._tombs: Counter[int] = Counter()  # row hash -> dropped weight
        self._tomb_keys: Counter[Hashable] = Counter()  # key -> dropped weight
        self._tomb_key_of: dict[int, Hashable] = {}
        self.dropped = 0  # rows dropped so far
        self.missed = 0  # pairs missed because RIDS(k) was broken (false negatives)
        self.violations = 0  # one-side insertions that met tombstones

    @property
    def k(self) -> float:
        return self.adherence.k

    def nbytes(self) -> int:
        return ENTRY_BYTES * len(self._pending) + TOMBSTONE_BYTES * len(self._tombs)

    def describe(self) -> str:
        return (
            f"{self.constraint.describe()}: k in use {self.k}, dropped {self.dropped}, "
            f"missed {self.missed}"
        )

    def status(self) -> ConstraintStatus:
        """The constraint, the k in use and its counts (SysStream's constraint columns)."""
        return ConstraintStatus(
            "rids",
            self.constraint.label,
            float(self.k),
            self.adherence.increases,
            self.violations,
            self.missed,
            self.dropped,
        )

    # -- before the step ------------------------------------------------------------------------

    def admit(self, deltas: list[Batch | None]) -> list[Batch | None]:
        """The step's deltas with the retractions of dropped rows removed."""
        many = deltas[self.many]
        if many is None or not self._tombs:
            return deltas
        out = list(deltas)
        out[self.many] = self._remove_tombstoned(many)
        return out

    def arrive(self, deltas: list[Batch | None], keys: list[list[tuple | None] | None]) -> None:
        """Counts the one side's insertions that meet tombstones (missed pairs), and feeds
        both sides' insertions to the adherence."""
        one, ok = deltas[self.one], keys[self.one]
        if one is not None and ok is not None and self._tomb_keys:
            for key, wi in zip(ok, one.w.tolist()):
                if wi > 0 and key is not None and self._tomb_keys.get(key):
                    self.missed += wi * self._tomb_keys[key]
                    self.violations += 1
        self._feed(deltas, keys)

    def _remove_tombstoned(self, b: Batch) -> Batch | None:
        neg = np.flatnonzero(b.w < 0)
        if not len(neg):
            return b
        hashes = row_hash([c.take(pa.array(neg)) for c in b.columns]).tolist()
        w = b.w.copy()
        for i, h in zip(neg.tolist(), hashes):
            have = self._tombs.get(h, 0)
            if not have:
                continue
            take = min(have, -int(w[i]))
            w[i] += take
            self._untomb(h, take)
        if (w == b.w).all():
            return b
        keep = np.flatnonzero(w != 0)
        out = Batch(b.columns, b.ts, w, b.ticks).take(keep)
        return out if len(out) else None

    def _untomb(self, h: int, n: int) -> None:
        self._tombs[h] -= n
        key = self._tomb_key_of[h]
        self._tomb_keys[key] -= n
        if self._tomb_keys[key] <= 0:
            del self._tomb_keys[key]
        if self._tombs[h] <= 0:
            del self._tombs[h]
            del self._tomb_key_of[h]

    def _feed(self, deltas: list[Batch | None], keys: list[list[tuple | None] | None]) -> None:
        """Both sides' insertions to the adherence in timestamp order (the many side first at
        equal timestamps), as runs of one side."""
        parts = []
        for port in (self.many, self.one):
            b, k = deltas[port], keys[port]
            if b is None or k is None or len(b) != len(k):
                continue
            ins = np.flatnonzero(b.w > 0)
            parts.append((b.ts[ins], np.full(len(ins), port), ins, k))
        if not parts:
            return
        ts = np.concatenate([p[0] for p in parts])
        ports = np.concatenate([p[1] for p in parts])
        rows = np.concatenate([p[2] for p in parts])
        order = np.argsort(ts, kind="stable")
        ports, rows = ports[order], rows[order]
        if not len(ports):
            return
        cuts = np.flatnonzero(ports[1:] != ports[:-1]) + 1
        for a, z in zip([0, *cuts.tolist()], [*cuts.tolist(), len(ports)]):
            port = int(ports[a])
            ks = keys[port]
            assert ks is not None
            self.adherence.observe(port, [ks[r] for r in rows[a:z].tolist()])

    # -- after the step -------------------------------------------------------------------------

    def settle(
        self,
        sides: tuple[JoinSide, JoinSide],
        deltas: list[Batch | None],
        keys: list[list[tuple | None] | None],
        key_arrays: list[list[pa.Array] | None],
    ) -> None:
        """After the step added the deltas: counts the one side's insertions, files the many
        side's new rows that have no partner, and collects."""
        one = deltas[self.one]
        before = self.one_arrivals
        one_ts = np.empty(0, np.int64)
        if one is not None:
            one_ts = one.ts[one.w > 0]
            self.one_arrivals += len(one_ts)
        many, mk, mka = deltas[self.many], keys[self.many], key_arrays[self.many]
        if many is not None and mk is not None and mka is not None:
            ins = np.flatnonzero(many.w == 1)
            if len(ins):
                present = _present(sides[self.one], [a.take(pa.array(ins)) for a in mka])
                alone = ins[~present]
                if len(alone):
                    hashes = row_hash([c.take(pa.array(alone)) for c in many.columns]).tolist()
                    # the one side's insertions up to the row's instant count as before it
                    tags = (before + np.searchsorted(one_ts, many.ts[alone], side="right")).tolist()
                    for i, h, tag in zip(alone.tolist(), hashes, tags):
                        key = mk[i]
                        if key is None:
                            continue  # a NULL key never joins: the plain join keeps it too
                        self._pending.append((tag, h, key))
                        self._pending_hashes[h] += 1
        self.collect(sides)

    def collect(self, sides: tuple[JoinSide, JoinSide]) -> None:
        """Drop the pending many-side rows whose k has run out and whose partner is absent."""
        k = self.k
        if k == float("inf"):
            return
        due = []
        while self._pending and self.one_arrivals - self._pending[0][0] >= k:
            entry = self._pending.popleft()
            self._pending_hashes[entry[1]] -= 1
            if not self._pending_hashes[entry[1]]:
                del self._pending_hashes[entry[1]]
            due.append(entry)
        if not due:
            return
        many, one = sides[self.many], sides[self.one]
        key_cols = _key_arrays([e[2] for e in due])
        partner = _present(one, key_cols)
        due = [e for e, p in zip(due, partner.tolist()) if not p]
        if not due:
            return
        key_cols = _key_arrays([e[2] for e in due])
        q, pos = many.lookup(key_cols)
        if not len(q):
            return
        cols, w = many.take(pos)
        hashes = row_hash(cols).tolist()
        # per (entry, position): drop one unit from a row with the entry's hash, keeping the
        # copies that newer pending entries still account for
        avail: dict[int, int] = {}
        where: dict[int, list[int]] = {}
        for qi, p, h, wi in zip(q.tolist(), pos.tolist(), hashes, w.tolist()):
            if h != due[qi][1] or wi <= 0:
                continue
            if p not in avail:
                avail[p] = wi
                where.setdefault(h, []).append(p)
        taken: Counter[int] = Counter()
        for _, h, key in due:
            live = sum(avail[p] - taken[p] for p in where.get(h, ()))
            if live - self._pending_hashes.get(h, 0) < 1:
                continue  # expired already, or the copy is a newer row's
            p = next(p for p in where[h] if avail[p] - taken[p] > 0)
            taken[p] += 1
            self._tombs[h] += 1
            self._tomb_key_of[h] = key
            self._tomb_keys[key] += 1
            self.dropped += 1
        if taken:
            positions = np.array(sorted(taken), np.int64)
            many.remove(positions, np.array([taken[p] for p in positions.tolist()], np.int64))


def _present(side: JoinSide, probe: list[pa.Array]) -> np.ndarray:
    """For each probe key, whether the side holds a row of positive weight with that key."""
    n = len(probe[0]) if probe else 0
    out = np.zeros(n, bool)
    if not n or not len(side):
        return out
    q, pos = side.lookup(probe)
    if len(q):
        _, w = side.take(pos)
        out[q[w > 0]] = True
    return out


def _key_arrays(keys: list[Hashable]) -> list[pa.Array]:
    """Key tuples as key columns."""
    return [pa.array(list(part)) for part in zip(*keys)]  # type: ignore[call-overload]
