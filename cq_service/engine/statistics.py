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
from cq_service.spec.sys_stream import SYS_STREAM_FIELDS
from cq_service.types import DataType

__all__ = ["EntitySource", "EntityStatistics", "entity_row", "window_setting"]


@dataclass
class _Totals:
    rows_in: int = 0
    rows_out: int = 0
    busy: float = 0.0


# More entities from outside the engine (the worker's resource manager): called with the
# pipeline time, each returns rows built by `entity_row`.
EntitySource = Callable[[int], list[tuple]]


_COLUMNS = tuple(name for name, _, _ in SYS_STREAM_FIELDS)
# what an entity that does not say otherwise reports: counts 0; rates, lag, settings NULL
_DEFAULTS = {
    name: (0 if t == DataType.INT and name != "lag" else None) for name, t, _ in SYS_STREAM_FIELDS
}


def entity_row(pipeline: str, kind: str, entity: str, detail: str, **values: object) -> tuple:
    """A SysStream row in its column order (spec/sys_stream.py): the columns given, the
    others at their defaults (counts 0; rates, lag and settings NULL)."""
    given = {"pipeline": pipeline, "kind": kind, "entity": entity, "detail": detail, **values}
    unknown = set(given) - set(_COLUMNS)
    if unknown:
        raise ValueError(f"not SysStream columns: {sorted(unknown)}")
    return tuple(given.get(name, _DEFAULTS[name]) for name in _COLUMNS)


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

    def now(self) -> list[tuple]:
        """`snapshot` at the engine's time: the latest heartbeat of its sources."""
        return self.snapshot(max((s.watermark for s in self.executor.sources), default=0))

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
        return entity_row(
            op.owner or self.pipeline, kind, op.name, op.describe(),
            rows_in=op.rows_in,
            rows_out=rows_out,
            selectivity=selectivity,
            us_per_row=us,
            queued_rows=sum(r.pending_rows() for r in op.inputs),
            memory=op.state_size()[1],
            late=late,
            dead_lettered=dead,
            lag=_lag(clock, op.watermark),
            window=window_setting(op) or None,
            filter_order=op.filter_order() or None,
            **_constraint_columns(op),
        )

    def _queue(self, q: Queue, producer: Operator | None, clock: int) -> tuple:
        owner = producer.owner if producer is not None else ""
        heartbeat = NEVER if q.last_heartbeat == NO_HEARTBEAT else q.last_heartbeat
        return entity_row(
            owner or self.pipeline, "queue", q.name, f"queue read by {q.readers}",
            rows_in=q.total_rows,
            rows_out=q.total_rows - q.rows,  # released
            queued_rows=q.rows,
            memory=q.bytes,
            lag=_lag(clock, heartbeat),
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


def _constraint_columns(op: Operator) -> dict[str, object]:
    """SysStream's constraint columns of `op` (none when it exploits no constraint)."""
    st = op.constraint_status()
    if st is None:
        return {}
    return {
        "constraint": st.kind,
        "constraint_on": st.attribute,
        "k": st.k,
        "k_increases": st.increases,
        "k_violations": st.violations,
        "k_missed": st.missed,
        "k_dropped": st.dropped,
    }


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
