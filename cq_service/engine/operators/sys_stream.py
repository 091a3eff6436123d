"""The source of SysStream: the engine's statistics as a stream (docs/sys-stream.md).

Nothing is read. The source follows the pipeline's clock like an exhausted source
(`Executor.follow_clock`, `Executor.follow_clocks`); whenever the clock has passed a new
multiple of the interval, it emits one element per entity (engine/statistics.py) stamped with
that multiple, then a heartbeat at the clock. When the clock jumps several intervals at once
(no input in between), only the last boundary gets a snapshot: nothing happened in between.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.engine.operators.base import NEVER
from cq_service.engine.operators.source import SourceOperator
from cq_service.engine.queues import Queue

__all__ = ["SysStreamSource"]

Snapshot = Callable[[int], list[tuple]]


class SysStreamSource(SourceOperator):
    STRUCTURE = SourceOperator.STRUCTURE | frozenset({"_snapshot"})

    def __init__(self, name: str, output: Queue, interval: int, column_names: list[str]):
        if interval < 1:
            raise ValueError("the statistics interval must be at least one time unit")
        super().__init__(name, output, None, column_names=column_names)  # type: ignore[arg-type]
        self.interval = interval
        self.exhausted = True  # nothing to read: it moves with the clock
        self.published = NEVER  # the last boundary a snapshot was taken at
        self._snapshot: Snapshot | None = None

    def describe(self) -> str:
        return f"statistics source {self.name} every {self.interval}"

    def publish_with(self, snapshot: Snapshot) -> None:
        """Take the rows of each snapshot from `snapshot(clock)` (set once the executor that
        holds this source exists)."""
        self._snapshot = snapshot

    @property
    def publishes(self) -> Snapshot | None:
        return self._snapshot

    @property
    def max_seen(self) -> int:
        return NEVER  # its boundaries never extend the end of the pipeline's input

    def follow_clock(self, clock: int) -> None:
        if clock == NEVER:
            return
        boundary = clock // self.interval * self.interval
        if boundary > self.published and self._snapshot is not None:
            self.published = boundary
            self._publish(boundary, clock)
        self.emit_heartbeat(clock)

    def follow_live(self, clock: int) -> None:
        self.follow_clock(clock)

    def _publish(self, boundary: int, clock: int) -> None:
        assert self._snapshot is not None
        rows = self._snapshot(clock)
        if not rows:
            return
        n = len(rows)
        batch = Batch.from_rows(
            rows, np.full(n, boundary, np.int64), np.ones(n, np.int64), self.out_types
        )
        self.rows_in += n
        self.stamp = time.perf_counter()
        self.emit(batch.with_ticks(np.array([boundary], np.int64)))
