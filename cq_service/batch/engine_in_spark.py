"""The project's own engine, run over Arrow tables of archived elements (inside a Spark task).

`run_engine(task)` compiles one query (with the views it reads), feeds each stream its table in
replay order and each stored relation its broadcast table, ends every source with a heartbeat
at `task.end` (the backfill's T2, not the largest timestamp the task happens to hold), and
returns the query's result elements with ``_ts`` >= `task.emit_from` as one Arrow table
(``_ts``, ``_op`` +1/−1, then the result columns ``c0``, ``c1``, …).

`partition_runner(task)` wraps it for `DataFrame.mapInArrow`: the Spark partition's rows (every
stream's columns side by side, ``_src`` naming the stream) are split per stream, in the order
Spark sorted them, and given to `run_engine`.

`source_table(stream, time_unit)` reads a stream's or relation's own source as `cq run` does,
late elements left out: how backfill loads stored relations (and tests build archives).
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.adaptive.filter_order import pipeline_orderers
from cq_service.adaptive.k_constraints import monitor_adherence
from cq_service.batch.spark import SPARK_TYPES
from cq_service.compiler import CompiledPipeline, compile_pipeline, subset
from cq_service.cql.logical import Source
from cq_service.engine.batch import Batch
from cq_service.engine.build import SourceOptions, build_executor
from cq_service.engine.consolidate import canonical_order
from cq_service.engine.join_constraints import declared
from cq_service.engine.operators.base import NEVER
from cq_service.engine.reorder import Reorderer
from cq_service.engine.scheduler import policy as make_policy
from cq_service.io import open_source
from cq_service.io.base import RawChunk
from cq_service.spec.model import PipelineSpec, SinkSpec, StreamSpec
from cq_service.types import DataType, arrow_type

__all__ = [
    "Collect",
    "Discard",
    "EngineTask",
    "TableReader",
    "compiled_query",
    "empty_elements",
    "from_ipc",
    "ordered",
    "partition_runner",
    "result_ddl",
    "result_schema",
    "result_table",
    "run_engine",
    "source_columns",
    "source_table",
    "split_streams",
    "stream_column",
    "to_ipc",
]


@dataclass(frozen=True)
class EngineTask:
    """What one engine run needs. `spec` is the pipeline (only `query` and what it reads are
    run); `relations` maps each stored relation to Arrow IPC bytes of its updates (columns,
    ``_ts``, ``_op``, ``_offset``); `streams` lists the query's streams in ``_src`` order.
    `ordered` False: each instant's results come in no particular order (the caller orders them;
    saves the engine's canonical sort)."""

    spec: PipelineSpec
    query: str
    streams: tuple[str, ...]
    emit_from: int
    end: int
    relations: dict[str, bytes] = field(default_factory=dict)
    batch_rows: int = 65_536
    ordered: bool = True

    def pickled(self) -> bytes:
        return pickle.dumps(self)


def stream_column(src: int, col: int) -> str:
    """The name of stream `src`'s column `col` in the side-by-side rows Spark shuffles."""
    return f"s{src}_{col}"


def result_schema(spec: PipelineSpec, query: str) -> tuple[tuple[str, ...], tuple[DataType, ...]]:
    """The result column names and types of `query`."""
    compiled = compile_pipeline(_with_collecting_sinks(subset(spec, [query]), query))
    for s in compiled.plan.sinks:
        if s.query == query:
            return tuple(s.columns), tuple(s.types)
    raise KeyError(query)


class Collect:
    """A result writer that keeps the elements at or after `emit_from`."""

    def __init__(self, emit_from: int):
        self.emit_from = emit_from
        self.parts: list[tuple[np.ndarray, np.ndarray, list[pa.Array]]] = []

    def write(self, ts: np.ndarray, ops: np.ndarray, columns) -> None:
        keep = ts >= self.emit_from
        if not keep.any():
            return
        if not keep.all():
            mask = pa.array(keep)
            ts, ops, columns = ts[keep], ops[keep], [c.filter(mask) for c in columns]
        self.parts.append((np.asarray(ts), np.asarray(ops), list(columns)))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class Discard(Collect):
    """A result writer that keeps nothing (the sinks of queries other than the one run)."""

    def write(self, ts: np.ndarray, ops: np.ndarray, columns) -> None:
        pass


class TableReader:
    """Replays a table of elements (schema columns, ``_ts``, optional ``_op``, ``_offset``) in
    its order, then promises nothing at or below `end` follows, then ends. A schema column the
    table lacks reads as NULLs (a pruned column, `plan.columns`)."""

    def __init__(self, table: pa.Table, stream: StreamSpec, end: int, batch_rows: int):
        self.names = [f.name for f in stream.schema]
        self.types = [arrow_type(f.type) for f in stream.schema]
        self.table = table
        self.end = end
        self.batch_rows = batch_rows
        self.pos = 0
        self.done = False
        # Cast and combined once: every chunk read is then a zero-copy slice.
        present = set(table.column_names)
        width = min(batch_rows, table.num_rows)
        self._columns = [
            _combined(table.column(n), t) if n in present else _Nulls(pa.nulls(width, t))
            for n, t in zip(self.names, self.types)
        ]
        self._ts = _numpy(table.column("_ts"), np.int64)
        self._ops = (_numpy(table.column("_op"), np.int8) if "_op" in table.column_names
                     else np.ones(table.num_rows, dtype=np.int8))
        self._record = _numpy(table.column("_offset"), np.int64)

    def read(self) -> RawChunk | None:
        if self.pos < self.table.num_rows:
            lo = self.pos
            hi = self.pos = min(lo + self.batch_rows, self.table.num_rows)
            cols = tuple(c.slice(lo, hi - lo) for c in self._columns)
            return RawChunk(cols, self._ts[lo:hi], self._ops[lo:hi], self._record[lo:hi])
        if not self.done:
            self.done = True
            empty = tuple(pa.array([], type=t) for t in self.types)
            none = np.empty(0, dtype=np.int64)
            return RawChunk(empty, none, none.astype(np.int8), none, heartbeat=self.end)
        return None


class _Nulls:
    """A column of NULLs: slices of one shared array (arrays are never written to)."""

    def __init__(self, nulls: pa.Array):
        self.nulls = nulls

    def slice(self, offset: int, length: int) -> pa.Array:
        return self.nulls.slice(0, length)


def _combined(column: pa.ChunkedArray, to: pa.DataType) -> pa.Array:
    array = column.combine_chunks()
    return array if array.type == to else array.cast(to)


def _numpy(column: pa.ChunkedArray, dtype: type) -> np.ndarray:
    return np.asarray(column.to_numpy(), dtype=dtype)


def _with_collecting_sinks(spec: PipelineSpec, target: str, ordered: bool = True) -> PipelineSpec:
    """Every sink, and `target`'s even when it is a view, made a sink spec the engine writes
    through our collector instead: a file spec when `ordered` (canonical order is only kept for
    sinks that are not blackholes), else a blackhole spec."""
    sink = SinkSpec("file", "unused.jsonl", "jsonl") if ordered else SinkSpec("blackhole")
    queries = {
        n: replace(q, sink=sink) if q.sink or n == target else q
        for n, q in spec.queries.items()
    }
    return replace(spec, queries=queries)


# The compiled query per Python worker, by (spec, query): a streaming job runs the same query
# at every micro-batch in every partition. `build_executor` only reads a plan, so one serves all.
_COMPILED: dict[bytes, CompiledPipeline] = {}


def compiled_query(spec: PipelineSpec, query: str, ordered: bool = True) -> CompiledPipeline:
    """`query` (with what it reads) compiled with collecting sinks, once per Python worker."""
    key = pickle.dumps((spec, query, ordered))
    compiled = _COMPILED.get(key)
    if compiled is None:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        compiled = _COMPILED[key] = compile_pipeline(
            _with_collecting_sinks(subset(spec, [query]), query, ordered))
    return compiled


def source_columns(spec: PipelineSpec, query: str) -> dict[str, tuple[str, ...]]:
    """The schema columns of each stream `query` reads that its plan uses (a stream not named
    uses every column): the others may be NULL (`plan.columns`)."""
    return dict(compiled_query(spec, query, ordered=False).plan.source_columns)


def run_engine(task: EngineTask, streams: dict[str, pa.Table]) -> pa.Table:
    """The query's result over these streams (and the task's relations); see the module doc."""
    compiled = compiled_query(task.spec, task.query, task.ordered)
    spec = compiled.spec
    inputs = {**spec.streams, **spec.relations}
    readers, options = {}, {}
    for node in compiled.plan.nodes:
        if not isinstance(node.op, Source):
            continue
        s = inputs[node.op.name]
        if s.is_relation:
            table = from_ipc(task.relations.get(s.name))
        else:
            table = streams.get(s.name)
        if table is None:
            table = empty_elements(s)
        readers[s.name] = TableReader(table, s, task.end, task.batch_rows)
        # Elements come in replay order: no reordering, no lateness.
        options[s.name] = SourceOptions(s.is_relation, 0, "drop", None)
    collect = Collect(task.emit_from)
    writers = {
        s.query: collect if s.query == task.query else Discard(task.emit_from)
        for s in compiled.plan.sinks
    }
    executor = build_executor(
        compiled.plan,
        readers=readers,
        writers=writers,
        options=options,
        policy=make_policy("fifo", None),
        budget=task.batch_rows,
        filter_order=pipeline_orderers(compiled.spec),
        constraints=declared(compiled.spec.streams, compiled.spec.queries),
        adherence=monitor_adherence,
    )
    executor.run()
    sink = next(s for s in compiled.plan.sinks if s.query == task.query)
    return result_table(collect, [arrow_type(t) for t in sink.types])


def result_ddl(types: Sequence[DataType]) -> str:
    """The Spark DDL of the tables `partition_runner` yields: ``_ts``, ``_op``, ``c0`` …"""
    return ", ".join(["_ts bigint", "_op tinyint"]
                     + [f"c{k} {SPARK_TYPES[t]}" for k, t in enumerate(types)])


def ordered(table: pa.Table, width: int) -> Batch:
    """The tasks' result rows in one batch in `cq run`'s canonical order (by ``_ts``, − before
    +, then by value)."""
    return canonical_order(Batch(
        tuple(table.column(f"c{k}").combine_chunks() for k in range(width)),
        table.column("_ts").to_numpy().astype(np.int64),
        table.column("_op").to_numpy().astype(np.int64),
    ))


def result_table(collect: Collect, types: list[pa.DataType]) -> pa.Table:
    """What `collect` kept as a table: ``_ts``, ``_op``, ``c0`` … typed `types`."""
    schema = pa.schema(
        [("_ts", pa.int64()), ("_op", pa.int8())]
        + [(f"c{i}", t if t != pa.null() else pa.string()) for i, t in enumerate(types)]
    )
    if not collect.parts:
        return schema.empty_table()
    # One record batch per part written: no concatenation (the table is chunked).
    batches = []
    for ts, ops, columns in collect.parts:
        arrays = [pa.array(np.asarray(ts, dtype=np.int64)), pa.array(ops.astype(np.int8))]
        for c, f in zip(columns, schema.names[2:], strict=True):
            c = c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
            want = schema.field(f).type
            arrays.append(c if c.type == want else c.cast(want))
        batches.append(pa.RecordBatch.from_arrays(arrays, schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


def empty_elements(s: StreamSpec) -> pa.Table:
    """No elements of `s`: its columns, ``_ts``, ``_offset``."""
    fields = [pa.field(f.name, arrow_type(f.type)) for f in s.schema]
    fields += [pa.field("_ts", pa.int64()), pa.field("_offset", pa.int64())]
    return pa.schema(fields).empty_table()


def from_ipc(data: bytes | None) -> pa.Table | None:
    """The table of `to_ipc` bytes (None stays None)."""
    if data is None:
        return None
    return pa.ipc.open_stream(io.BytesIO(data)).read_all()


def to_ipc(table: pa.Table, compression: str | None = None) -> bytes:
    """`table` as Arrow IPC stream bytes (how relations travel to the tasks), its buffers
    compressed with `compression` (``zstd``, ``lz4``) if given."""
    sink = io.BytesIO()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as w:
        w.write_table(table)
    return sink.getvalue()


def partition_runner(task_bytes: bytes) -> Callable[[Iterable[pa.RecordBatch]],
                                                    Iterator[pa.RecordBatch]]:
    """The function `mapInArrow` runs on every partition (see the module docstring)."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task: EngineTask = pickle.loads(task_bytes)
        batches = list(batches)
        rows = pa.Table.from_batches(batches) if batches else None
        result = run_engine(task, split_streams(rows, task.spec, task.streams))
        yield from result.to_batches(max_chunksize=65_536)

    return run


def split_streams(rows: pa.Table | None, spec: PipelineSpec, streams: Sequence[str],
                  extra: Sequence[str] = ("_ts", "_offset")) -> dict[str, pa.Table]:
    """Side-by-side rows (``_src`` naming the stream, `stream_column` names) as one table per
    stream: its schema columns, then the `extra` columns."""
    out: dict[str, pa.Table] = {}
    if rows is None or not rows.num_rows:
        return out
    src = rows.column("_src").to_numpy()
    for i, name in enumerate(streams):
        s = spec.streams[name]
        mine = rows.filter(pa.array(src == i))
        if not mine.num_rows:
            continue
        arrays = [mine.column(stream_column(i, j)) for j in range(len(s.schema))]
        arrays += [mine.column(c) for c in extra]
        out[name] = pa.Table.from_arrays(arrays, names=[f.name for f in s.schema] + list(extra))
    return out


def source_table(stream: StreamSpec, time_unit: str, batch_rows: int = 65_536) -> pa.Table:
    """`stream`'s own source read as `cq run` reads it, without its late elements, sorted in
    replay order: schema columns, ``_ts``, ``_op`` (+1/−1), ``_partition`` (0), ``_offset``."""
    reorder = Reorderer(stream.max_delay)
    names = [f.name for f in stream.schema]
    hb = None if stream.heartbeat is None else names.index(stream.heartbeat[0])
    parts: list[pa.Table] = []
    with open_source(stream, time_unit, batch_rows) as reader:
        for chunk in reader:
            ts = np.asarray(chunk.ts, dtype=np.int64)
            promises = None
            if hb is not None and len(ts):
                col = chunk.columns[hb]
                values = np.asarray(
                    pc.fill_null(col.cast(pa.int64()), NEVER).to_numpy(), dtype=np.int64
                )
                promises = np.where(values == NEVER, NEVER, values + stream.heartbeat[1])
            late, _, _ = reorder.late_mask(ts, promises)
            keep = pa.array(~late)
            arrays = [c.filter(keep) for c in chunk.columns]
            n = int((~late).sum())
            arrays += [
                pa.array(ts[~late]),
                pa.array(np.asarray(chunk.ops, dtype=np.int8)[~late]),
                pa.array(np.zeros(n, dtype=np.int32)),
                pa.array(np.asarray(chunk.record, dtype=np.int64)[~late]),
            ]
            parts.append(pa.Table.from_arrays(arrays, names=[*names, "_ts", "_op",
                                                             "_partition", "_offset"]))
    fields = [pa.field(f.name, arrow_type(f.type)) for f in stream.schema]
    fields += [pa.field("_ts", pa.int64()), pa.field("_op", pa.int8()),
               pa.field("_partition", pa.int32()), pa.field("_offset", pa.int64())]
    schema = pa.schema(fields)
    if not parts:
        return schema.empty_table()
    table = pa.concat_tables([p.cast(schema) for p in parts])
    order = pc.sort_indices(table, sort_keys=[("_ts", "ascending"), ("_offset", "ascending")])
    return table.take(order)
