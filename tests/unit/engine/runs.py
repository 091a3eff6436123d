"""Test doubles of the engine's edges shared by engine and worker tests: sources fed from
chunk lists, a result writer in memory, and a pipeline run on a LiveEngine poll by poll."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.cql import logical as L
from cq_service.engine.build import SourceOptions
from cq_service.engine.live import LiveEngine
from cq_service.io.base import RawChunk, open_source
from cq_service.plan.planner import plan_queries


class ChunkList:
    """A source's chunks, read one at a time from `start` on (then the end of input)."""

    def __init__(self, chunks: list[Any], start: int = 0):
        self.chunks = chunks
        self.at = start

    def read(self) -> Any:
        if self.at >= len(self.chunks):
            return None
        self.at += 1
        return self.chunks[self.at - 1]


class ListReader:
    """Chunks handed over one `read` at a time, like a live source (empty when none)."""

    def __init__(self) -> None:
        self.pending: list[RawChunk] = []

    def add(self, rows: list[tuple[int, int]], op: int = 1) -> None:
        ts = np.array([t for t, _ in rows], np.int64)
        self.pending.append(
            RawChunk(
                (pa.array([a for _, a in rows], pa.int64()), pa.array(ts)),
                ts,
                np.full(len(rows), op, np.int8),
                np.arange(len(rows), dtype=np.int64),
            )
        )

    def read(self) -> RawChunk:
        if self.pending:
            return self.pending.pop(0)
        return RawChunk(
            (pa.array([], pa.int64()), pa.array([], pa.int64())),
            np.zeros(0, np.int64),
            np.zeros(0, np.int8),
            np.zeros(0, np.int64),
        )


class Collect:
    """A result writer keeping (timestamp, op, row) in memory."""

    def __init__(self) -> None:
        self.out: list[tuple[int, int, tuple]] = []

    def write(self, ts, ops, columns) -> None:
        rows = list(zip(*(c.to_pylist() for c in columns))) if columns else [()] * len(ts)
        self.out.extend(zip(ts.tolist(), ops.tolist(), rows))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class Run:
    """A pipeline on a LiveEngine, its sources fed from chunk lists."""

    def __init__(self, compiled: Any, chunks: dict[str, list[Any]], starts: dict[str, int]):
        spec = compiled.spec
        self.engine = LiveEngine(budget=7)  # small steps: operators interleave a lot
        self.readers = {}
        for name, stream in {**spec.streams, **spec.relations}.items():
            self.readers[name] = ChunkList(chunks[name], starts.get(name, 0))
            source = L.Source(
                name,
                tuple(L.Field(f.name, f.type, name) for f in stream.schema),
                stream.is_relation,
            )
            options = SourceOptions(
                stream.is_relation, stream.max_delay, stream.late, stream.heartbeat
            )
            self.engine.add_source(name, source, self.readers[name], options)
        self.pairs = [
            (bq, spec.queries[bq.name].sink)
            for bq in compiled.queries
            if spec.queries[bq.name].sink is not None
        ]
        self.writers = {bq.name: Collect() for bq, _ in self.pairs}
        self.keys = {name: name for name in self.readers}

    def start(self) -> None:
        self.engine.add_queries(plan_queries(self.pairs), self.keys, self.writers)

    def poll(self) -> bool:
        """One read of every source, then run everything; False once every source ended."""
        live = False
        for op in self.engine.executor.sources:
            if not op.exhausted:
                op.run(1)
                live = True
        self.engine.executor.drain()
        self.engine.executor.follow_clocks()
        self.engine.executor.drain()
        return live

    def finish(self) -> None:
        while self.poll():
            pass
        self.engine.executor.follow_clocks()
        self.engine.executor.drain()


def chunks_of(compiled: Any) -> dict[str, list[Any]]:
    spec = compiled.spec
    out = {}
    for name, stream in {**spec.streams, **spec.relations}.items():
        reader = open_source(stream, spec.time_unit, batch_rows=3)
        out[name] = []
        while (chunk := reader.read()) is not None:
            out[name].append(chunk)
        reader.close()
    return out
