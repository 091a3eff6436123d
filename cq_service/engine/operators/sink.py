"""Sinks: the end of a query. Relation results are written as their delta stream.

Each complete instant is consolidated (net weight per row) and written as single elements,
retractions before insertions; stream results are written as they come.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import consolidate, expand
from cq_service.engine.instants import InstantBuffer
from cq_service.engine.operators.base import UnaryOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["ResultWriter", "SinkOperator"]


class ResultWriter(Protocol):
    def write(self, ts: np.ndarray, ops: np.ndarray, columns) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class SinkOperator(UnaryOperator):
    kind = "sink"

    def __init__(self, name: str, inputs: list[QueueReader], writer: ResultWriter, is_stream: bool):
        super().__init__(name, inputs, Queue(f"{name}.out"))
        self.writer = writer
        self.is_stream = is_stream
        self._buffer = None if is_stream else InstantBuffer()
        self.written = 0

    def describe(self) -> str:
        return f"sink {self.name} ({'stream' if self.is_stream else 'relation deltas'})"

    def state_size(self) -> tuple[int, int]:
        b = self._buffer
        return (0, 0) if b is None else (b.rows, b.nbytes)

    def on_batch(self, batch: Batch) -> None:
        if self._buffer is None:
            self._write(batch)
        else:
            self._write(self._buffer.add(batch))

    def on_heartbeat(self, ts: int) -> None:
        if self._buffer is not None:
            self._write(self._buffer.complete(ts))

    def finish(self) -> None:
        if self._buffer is not None:
            self._write(self._buffer.complete(np.iinfo(np.int64).max))
        self.writer.flush()
        self.writer.close()

    def _write(self, batch: Batch | None) -> None:
        if batch is None or len(batch) == 0:
            return
        if self._buffer is not None:
            batch = consolidate(batch)
        batch = expand(batch)
        if len(batch) == 0:
            return
        self.written += len(batch)
        self.rows_out += len(batch)
        self.writer.write(batch.ts, batch.w.astype(np.int8), batch.columns)
