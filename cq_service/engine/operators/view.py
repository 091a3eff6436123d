"""The boundary between a view and a query reading it.

A reading query sees the view's result only: its elements, consolidated per instant, and as
instants only those at which the view emitted something (not the view's own inputs' arrivals).
"""

from __future__ import annotations

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import consolidate, unique_sorted
from cq_service.engine.instants import InstantBuffer
from cq_service.engine.operators.base import UnaryOperator

__all__ = ["ViewBoundary"]


class ViewBoundary(UnaryOperator):
    kind = "view"

    def __init__(self, *args, is_stream: bool, **kwargs):
        super().__init__(*args, **kwargs)
        self.is_stream = is_stream
        self._buffer = None if is_stream else InstantBuffer()

    def describe(self) -> str:
        return f"view {self.name} ({'stream' if self.is_stream else 'relation'})"

    def state_size(self) -> tuple[int, int]:
        b = self._buffer
        return (0, 0) if b is None else (b.rows, b.nbytes)

    def on_batch(self, batch: Batch) -> None:
        if self._buffer is None:
            self._out(batch)
        else:
            self._out(self._buffer.add(batch))

    def on_heartbeat(self, ts: int) -> None:
        if self._buffer is not None:
            self._out(self._buffer.complete(ts))

    def _out(self, done: Batch | None) -> None:
        if done is None:
            return
        net = done if self._buffer is None else consolidate(done)
        if len(net):
            self.emit(net.with_ticks(unique_sorted(net.ts)))
