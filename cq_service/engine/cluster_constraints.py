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
    the declared adherence, None for `k: auto`; `label` names it in explain and statistics."""

    key: int
    k: int | None
    label: str = ""

    def describe(self) -> str:
        k = "auto" if self.k is None else str(self.k)
        return f"CA(k={k})" + (f" {self.label}" if self.label else "")


def partition_constraint(
    op: L.WindowOp, constraints: Declared
) -> tuple[ClusterConstraint, ConstraintSpec] | None:
    """The CA constraint a partitioned rows window may use: one declared on the stream it reads,
    on a column that is one of its partition keys, unchanged; with its declaration. None when
    there is none."""
    w = op.window
    if not constraints or w.kind != "rows" or len(w.partition_by or ()) != 1:
        return None
    for pos, index in enumerate(w.partition_by):
        end = origin(op.input, index)
        if end is None:
            continue
        stream, column = end
        for c in constraints.get(stream.lower(), ()):
            if c.kind == "ca" and c.attribute.lower() == column.lower():
                return ClusterConstraint(pos, c.k, f"on {stream}.{column}"), c
    return None


class ClusterTracker:
    """Which values of the clustered attribute are closed, by arrival count.

    Per open value v, b_v = (position of v's first arrival) + (v's arrivals): after T arrivals
    in all, T − b_v other-valued tuples followed v's first, and v is closed once that exceeds k.
    A lazy min-heap on b_v finds the closed values; `arrive` returns them (they are forgotten:
    a later arrival of v starts a new cluster, and is the caller's violation to count)."""

    def __init__(self, adherence: Adherence | None = None) -> None:
        self.adherence: Adherence = adherence or FixedAdherence(math.inf)
        self._t = 0
        self._base: dict[Hashable, int] = {}
        self._heap: list[tuple[int, int, Hashable]] = []  # (b_v when filed, tie, v)
        self._tie = 0

    @property
    def k(self) -> float:
        return self.adherence.k

    @property
    def open(self) -> int:
        """Values whose cluster may still grow."""
        return len(self._base)

    def arrive(self, values: Sequence[Hashable]) -> list[Hashable]:
        """Arrivals, in order, by value; the values closed after them."""
        self.adherence.observe(0, values)
        base = self._base
        for v in values:
            b = base.get(v)
            if b is None:
                base[v] = self._t + 1
                self._tie += 1
                heapq.heappush(self._heap, (self._t + 1, self._tie, v))
            else:
                base[v] = b + 1
            self._t += 1
        return self._closed()

    def _closed(self) -> list[Hashable]:
        k, t, heap, base = self.k, self._t, self._heap, self._base
        out: list[Hashable] = []
        if math.isinf(k):
            return out
        while heap and t - heap[0][0] > k:
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
        return 16 * len(self._base)
