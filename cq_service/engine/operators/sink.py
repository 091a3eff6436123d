"""Sinks: the end of a query. Relation results are written as their delta stream.

Each complete instant is consolidated (net weight per row) and written as single elements,
retractions before insertions. Sinks that keep what they write get each instant's elements in a
canonical order (by row values), so a run's files do not depend on batch sizes or scheduling.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import canonical_order, consolidate, expand
from cq_service.engine.instants import InstantBuffer
from cq_service.engine.latency import LatencyHistogram
from cq_service.engine.operators.base import UnaryOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["ResultWriter", "SinkOperator"]


class ResultWriter(Protocol):
    def write(self, ts: np.ndarray, ops: np.ndarray, columns) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class SinkOperator(UnaryOperator):
    kind = "sink"
    STRUCTURE = frozenset({"writer", "written", "latency"})

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        writer: ResultWriter,
        is_stream: bool,
        canonical: bool = True,
    ):
        super().__init__(name, inputs, Queue(f"{name}.out"))
        self.writer = writer
        self.is_stream = is_stream
        self.canonical = canonical
        # Streams need no instant buffer unless their instants are written in canonical order.
        self._buffer = InstantBuffer() if canonical or not is_stream else None
        self.written = 0
        self.latency = LatencyHistogram()

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
        if not self.is_stream:
            batch = consolidate(batch)
        if self.canonical:
            batch = canonical_order(batch)
        batch = expand(batch)
        if len(batch) == 0:
            return
        self.written += len(batch)
        self.rows_out += len(batch)
        self.writer.write(batch.ts, batch.w.astype(np.int8), batch.columns)
        self.latency.add(time.perf_counter() - self.stamp, len(batch))
