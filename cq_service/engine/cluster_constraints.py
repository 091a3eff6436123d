"""The seam between a partitioned window and clustered arrival CA(k) (issue 26; thesis 003 §6.2,
§6.7; docs/linear-road.md, "Constraints").

CA(k) on attribute A of a stream: at most k tuples with another value of A arrive between any
two tuples with the same value — so once more than k other-valued tuples have arrived since a
value's first tuple (counting none of its own), no tuple with that value arrives again: its
cluster is *closed*. A `[Partition By A Rows N]` window whose partitions are keyed by A (as
the stream's column, through selections and projections) then forgets a closed partition's rows:
only a later arrival in the partition would retract them, and none comes. Its output (the
relation) is unchanged.

`ClusterTracker` decides which values are closed, by the arrivals the window itself admits (a
selection of a stream keeps CA(k) with the same k). Where k comes from is an `Adherence`
(engine/join_constraints.py): a declared k is fixed; `k: auto` keeps k = ∞ here (nothing is
dropped) — a monitor whose retention is bounded would underestimate clusters longer than it
retains, and a window's partitions live for good.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from cq_service.cql import logical as L
from cq_service.engine.join_constraints import Adherence, Declared, FixedAdherence, origin
from cq_service.spec.model import ConstraintSpec

__all__ = ["ClusterConstraint", "ClusterTracker", "partition_constraint"]


@dataclass(frozen=True)
class ClusterConstraint:
    """CA(k) on the window's partition key (`key`: its position among the partition columns,
    which are one column for now); `k` is
    the declared adherence, None for `k: auto`; `label` names it in explain, `attribute` (the
    stream's column, ``Pos.car``) in statistics."""

    key: int
    k: int | None
    label: str = ""
    attribute: str = ""

    def describe(self) -> str:
        k = "auto" if self.k is None else str(self.k)
        return f"CA(k={k})" + (f" {self.label}" if self.label else "")


def _origins(op: L.LogicalOp, index: int) -> list[tuple[str, str]]:
    """The streams and stream views, with their column, that column `index` of `op` is,
    unchanged: through windows, selections, projections and into stream views (a selection of
    a stream keeps its CA(k); the tracker does not rely on the order within an instant)."""
    out: list[tuple[str, str]] = []
    while True:
        end = origin(op, index)
        if end is None:
            return out
        out.append(end)
        while isinstance(op, L.WindowOp | L.Filter | L.Project):
            if isinstance(op, L.Project):
                e = op.exprs[index]
                assert isinstance(e, L.ColRef)
                index = e.index
            op = op.input
        if not isinstance(op, L.View):
            return out
        op = op.input


def partition_constraint(
    op: L.WindowOp, constraints: Declared
) -> tuple[ClusterConstraint, ConstraintSpec] | None:
    """The CA constraint a partitioned rows window may use: one declared on the stream it reads
    (or on a stream view between), on the column it is partitioned by, unchanged; with its
    declaration. None when there is none."""
    w = op.window
    if not constraints or w.kind != "rows" or len(w.partition_by or ()) != 1:
        return None
    for pos, index in enumerate(w.partition_by):
        for stream, column in _origins(op.input, index):
            for c in constraints.get(stream.lower(), ()):
                if c.kind == "ca" and c.attribute.lower() == column.lower():
                    at = f"{stream}.{column}"
                    return ClusterConstraint(pos, c.k, f"on {at}", at), c
    return None


class ClusterTracker:
    """Which values of the clustered attribute are closed, by arrival count and instant.

    Arrivals within an instant may come in another order than the stream's (a view
    consolidates per instant), so only arrivals at instants after a value's first count, and
    only once their instant is complete (a later timestamp arrived): per value v first seen at
    instant f, b_v = (arrivals up to and including f) + (v's arrivals after f); after `done`
    arrivals at complete instants, at least done − b_v other-valued tuples followed v's first in
    any order within instants, and v is closed once that exceeds k. A lazy min-heap on b_v finds
    them; `arrive` returns them (forgotten: a later arrival of v starts a new cluster, and is
    the caller's violation to count)."""

    def __init__(self, adherence: Adherence | None = None) -> None:
        self.adherence: Adherence = adherence or FixedAdherence(math.inf)
        self._done = 0  # arrivals at complete instants
        self._now: int | None = None  # the current (incomplete) instant
        self._now_count = 0  # arrivals at it
        self._fresh: list[Hashable] = []  # values first seen at it
        self._base: dict[Hashable, int] = {}  # open value -> b_v
        self._heap: list[tuple[int, int, Hashable]] = []  # (b_v when filed, tie, v)
        self._tie = 0
        self._fresh_set: set[Hashable] = set()

    @property
    def k(self) -> float:
        return self.adherence.k

    @property
    def open(self) -> int:
        """Values whose cluster may still grow."""
        return len(self._base) + len(self._fresh)

    def arrive(self, values: Sequence[Hashable], ts: Sequence[int]) -> list[Hashable]:
        """Arrivals, in order, by value and timestamp (non-decreasing); the values closed
        after them."""
        self.adherence.observe(0, values)
        base, fresh = self._base, self._fresh
        for v, t in zip(values, ts):
            if self._now is None or t > self._now:
                self._complete()
                self._now = t
            self._now_count += 1
            b = base.get(v)
            if b is not None:
                base[v] = b + 1
            elif v not in self._fresh_set:
                fresh.append(v)
                self._fresh_set.add(v)
        return self._closed()

    def _complete(self) -> None:
        """The current instant is complete: its new values get b_v."""
        self._done += self._now_count
        self._now_count = 0
        for v in self._fresh:
            self._base[v] = self._done
            self._tie += 1
            heapq.heappush(self._heap, (self._done, self._tie, v))
        self._fresh.clear()
        self._fresh_set.clear()

    def _closed(self) -> list[Hashable]:
        k, done, heap, base = self.k, self._done, self._heap, self._base
        out: list[Hashable] = []
        if math.isinf(k):
            return out
        while heap and done - heap[0][0] > k:
            filed, _, v = heapq.heappop(heap)
            b = base.get(v)
            if b is None or b < filed:
                continue  # stale
            if b > filed:
                self._tie += 1
                heapq.heappush(heap, (b, self._tie, v))  # v arrived since: file it again
                continue
            del base[v]
            out.append(v)
        return out

    def nbytes(self) -> int:
        """The tracker's own state: 16 bytes per open value (b_v and the heap entry)."""
        return 16 * self.open
