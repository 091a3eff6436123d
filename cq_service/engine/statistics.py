"""What the engine knows about itself, one row per entity: the elements of SysStream
(spec/sys_stream.py, docs/sys-stream.md).

Entities are the executor's sources, operators (the synopses are their state), queues and sinks,
each tagged with the deployment that owns it. Counts are totals since the entity started;
selectivity and time per row cover the interval since the previous `snapshot`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cq_service.engine.executor import Executor
from cq_service.engine.operators.base import NEVER, Operator
from cq_service.engine.operators.paned_aggregate import PanedAggregate
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.operators.rows_window import PartitionRowsWindow, RowsWindow
from cq_service.engine.operators.sink import SinkOperator
from cq_service.engine.operators.source import SourceOperator
from cq_service.engine.queues import NO_HEARTBEAT, Queue

__all__ = ["EntitySource", "EntityStatistics", "entity_row", "window_setting"]


@dataclass
class _Totals:
    rows_in: int = 0
    rows_out: int = 0
    busy: float = 0.0


# More entities from outside the engine (the worker's resource manager): called with the
# pipeline time, each returns rows built by `entity_row`.
EntitySource = Callable[[int], list[tuple]]


def entity_row(
    pipeline: str, kind: str, entity: str, detail: str, *, memory: int = 0,
    window: str | None = None,
) -> tuple:
    """A SysStream row for an entity that is not one of the engine's operators or queues:
    counts 0 and rates NULL, except those given."""
    return (pipeline, kind, entity, detail, 0, 0, None, None, 0, memory, 0, 0, None, window,
            None)


class EntityStatistics:
    """Snapshots of every entity of `executor`, remembering the last one's totals so the next
    can report per-interval rates. `pipeline` names entities that no deployment owns (in
    ``cq run``: every one); `extra` adds entities from outside the engine."""

    def __init__(
        self, executor: Executor, pipeline: str = "", extra: Sequence[EntitySource] = ()
    ):
        self.executor = executor
        self.pipeline = pipeline
        self.extra = extra
        self._last: dict[tuple[str, str], _Totals] = {}

    def snapshot(self, clock: int) -> list[tuple]:
        """One row per entity, in SysStream's column order, at the pipeline time `clock`."""
        ex = self.executor
        producers = {id(op.output): op for op in ex.operators}
        rows = [self._operator(op, clock) for op in ex.operators]
        rows.extend(self._queue(q, producers.get(id(q)), clock) for q in ex.queues)
        for more in self.extra:
            rows.extend(more(clock))
        return rows

    def _operator(self, op: Operator, clock: int) -> tuple:
        if isinstance(op, SourceOperator):
            kind, late, dead = "source", op.late_count, op.malformed_count
        elif isinstance(op, SinkOperator):
            kind, late, dead = "sink", 0, 0
        else:
            kind, late, dead = "operator", 0, 0
        rows_out = op.written if isinstance(op, SinkOperator) else op.rows_out
        selectivity, us = self._interval((kind, op.name), op.rows_in, rows_out, op.busy_seconds)
        queued = sum(r.pending_rows() for r in op.inputs)
        return (
            op.owner or self.pipeline,
            kind,
            op.name,
            op.describe(),
            op.rows_in,
            rows_out,
            selectivity,
            us,
            queued,
            op.state_size()[1],
            late,
            dead,
            _lag(clock, op.watermark),
            window_setting(op) or None,
            op.filter_order() or None,
        )

    def _queue(self, q: Queue, producer: Operator | None, clock: int) -> tuple:
        owner = producer.owner if producer is not None else ""
        heartbeat = NEVER if q.last_heartbeat == NO_HEARTBEAT else q.last_heartbeat
        released = q.total_rows - q.rows
        return (
            owner or self.pipeline,
            "queue",
            q.name,
            f"queue read by {q.readers}",
            q.total_rows,
            released,
            None,
            None,
            q.rows,
            q.bytes,
            0,
            0,
            _lag(clock, heartbeat),
            None,
            None,
        )

    def _interval(
        self, key: tuple[str, str], rows_in: int, rows_out: int, busy: float
    ) -> tuple[float | None, float | None]:
        """(selectivity, µs per row) since the previous snapshot; None with no input since."""
        last = self._last.get(key) or _Totals()
        self._last[key] = _Totals(rows_in, rows_out, busy)
        came = rows_in - last.rows_in
        if came <= 0:
            return None, None
        # busy time 0: never timed (SysStream's own source; the worker's sources, which it
        # polls outside the executor's steps)
        us = (busy - last.busy) * 1e6 / came if busy > 0 else None
        return (rows_out - last.rows_out) / came, us


def _lag(clock: int, heartbeat: int) -> int | None:
    if heartbeat == NEVER or clock == NEVER:
        return None
    return max(0, int(clock) - int(heartbeat))


def window_setting(op: Operator) -> str:
    """The current window (and granularity) of a window operator or paned aggregate, in CQL
    words; '' for others."""
    if isinstance(op, RangeWindow | PanedAggregate):
        s = f"Range {op.size}" + (f" Slide {op.slide}" if op.slide else "")
        return s + (f" granularity {op.granularity}" if op.granularity > 1 else "")
    if isinstance(op, PartitionRowsWindow):
        return f"Rows {op.n} per partition"
    if isinstance(op, RowsWindow):
        return f"Rows {op.n}"
    return ""
