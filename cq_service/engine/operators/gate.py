"""Where a query added to a running engine starts reading a shared source.

A query deployed while the engine runs sees its inputs from its start on: for a stream, the
elements after the source's heartbeat W at that moment (timestamp > W); for a relation, the
whole relation as it stands, appearing at instant W + 1, then its updates. A gate placed
between the shared source and the query's own operators does exactly that, both when the query
attaches live (the relation's content comes as a `snapshot`) and when a restarted worker
replays the source from an earlier offset (stream elements ≤ W are dropped, relation updates
≤ W are moved to W + 1). Either way the query computes the same results.
"""

from __future__ import annotations

import time

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import unique_sorted
from cq_service.engine.operators.base import NEVER, UnaryOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["Gate"]


class Gate(UnaryOperator):
    kind = "gate"

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        *,
        start_after: int = NEVER,
        is_relation: bool = False,
        snapshot: Batch | None = None,
    ):
        """`snapshot`: a relation's content when the gate attaches to a running source (its
        elements are stamped W + 1 here)."""
        super().__init__(name, inputs, output)
        self.start_after = start_after
        self.is_relation = is_relation
        self._snapshot = snapshot

    def describe(self) -> str:
        if self.start_after == NEVER:
            return "gate (from the start)"
        return f"gate (elements after {self.start_after})"

    def runnable(self) -> bool:
        return self._snapshot is not None or super().runnable()

    def run(self, budget: int) -> int:
        work = 0
        if self._snapshot is not None:
            snap, self._snapshot = self._snapshot, None
            self.stamp = time.perf_counter()
            if len(snap):
                self.on_batch(snap)
                work += len(snap)
        return work + super().run(budget)

    def on_batch(self, batch: Batch) -> None:
        w = self.start_after
        if w == NEVER or len(batch) == 0 or batch.ts[0] > w:
            self.emit(batch)
            return
        if self.is_relation:
            ts = np.maximum(batch.ts, w + 1)
            moved = Batch(batch.columns, ts, batch.w)
        else:
            moved = batch.filter(batch.ts > w)
        self.emit(moved.with_ticks(unique_sorted(moved.ts)))
