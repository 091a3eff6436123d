"""The Spark runner's first step: Kafka messages to elements, on Spark, with lateness decided.

`decoder(spec, streams, clocks)` is the function `mapInArrow` runs over whole Kafka partitions
(topic, partition, offset, key, value, timestamp): each partition's new messages, in offset
order, are decoded by the project's `MessageDecoder` and each element is judged late or on
time by the embedded `Reorderer`'s rules for a partitioned source, from the clocks the driver
kept (`clocks[stream]`: latest timestamp and promised heartbeat per partition, the heartbeat
already passed). The output rows (`element_ddl`) are elements (``_kind`` ELEMENT), late
elements (LATE, with ``_reason``), malformed messages (MALFORMED, with the raw message and the
reason) and one SUMMARY row per partition (its largest timestamp and promise) from which the
driver moves the clocks. Every stream's columns sit side by side (`stream_column`).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.batch import engine_in_spark as eis
from cq_service.batch.spark import SPARK_TYPES
from cq_service.engine.operators.base import NEVER
from cq_service.io.kafka import MessageDecoder, Messages
from cq_service.spec.model import PipelineSpec
from cq_service.types import arrow_type

__all__ = ["ELEMENT", "LATE", "MALFORMED", "NONE", "SUMMARY", "decoder", "element_ddl"]

NONE = int(NEVER)  # no timestamp yet (the engine's sentinel)
ELEMENT, MALFORMED, LATE, SUMMARY = 0, 1, 2, 3


def element_ddl(spec: PipelineSpec, streams: tuple[str, ...]) -> str:
    cols = ["_kind tinyint", "_src int", "_partition int", "_offset bigint", "_ts bigint",
            "_promise bigint", "_reason string", "_raw binary", "_mkey binary"]
    for i, name in enumerate(streams):
        cols += [f"{eis.stream_column(i, j)} {SPARK_TYPES[f.type]}"
                 for j, f in enumerate(spec.streams[name].schema)]
    return ", ".join(cols)


def element_schema(spec: PipelineSpec, streams: tuple[str, ...]) -> pa.Schema:
    fields = [pa.field("_kind", pa.int8()), pa.field("_src", pa.int32()),
              pa.field("_partition", pa.int32()), pa.field("_offset", pa.int64()),
              pa.field("_ts", pa.int64()), pa.field("_promise", pa.int64()),
              pa.field("_reason", pa.string()), pa.field("_raw", pa.binary()),
              pa.field("_mkey", pa.binary())]
    for i, name in enumerate(streams):
        fields += [pa.field(eis.stream_column(i, j), arrow_type(f.type))
                   for j, f in enumerate(spec.streams[name].schema)]
    return pa.schema(fields)


def decoder(spec: PipelineSpec, streams: tuple[str, ...], clocks: dict) -> Callable:
    """The `mapInArrow` function: Kafka rows (topic, partition, offset, key, value, timestamp)
    of whole partitions -> element, malformed, late and summary rows (see `_element_schema`)."""
    payload = pickle.dumps((spec, streams, clocks))

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        spec_, names, clocks_ = pickle.loads(payload)
        schema = element_schema(spec_, names)
        batches = list(batches)
        if not batches:
            return
        rows = pa.Table.from_batches(batches)
        if rows.num_rows == 0:
            return
        topics = rows.column("topic").to_pylist()
        parts = rows.column("partition").to_numpy()
        for i, name in enumerate(names):
            stream = spec_.streams[name]
            mine = np.flatnonzero(np.asarray([t == stream.source.options["topic"]
                                              for t in topics]))
            for p in np.unique(parts[mine]).tolist():
                idx = mine[parts[mine] == p]
                sub = rows.take(pa.array(idx))
                order = pc.sort_indices(sub, sort_keys=[("offset", "ascending")])
                sub = sub.take(order)
                out = _decode_partition(spec_, i, stream, int(p), sub, clocks_[name], schema)
                yield from out.to_batches()

    return run


def _decode_partition(spec: PipelineSpec, i: int, stream: Any, p: int, sub: pa.Table,
                      clock: dict, schema: pa.Schema) -> pa.Table:
    """One Kafka partition's new messages of stream `i` (offset order) as output rows."""
    decoder = MessageDecoder(stream, spec.time_unit)
    offsets = sub.column("offset").to_numpy().astype(np.int64)
    messages = Messages.of(
        [p] * sub.num_rows, offsets.tolist(), sub.column("key").to_pylist(),
        sub.column("value").to_pylist(),
        _kafka_ms(sub.column("timestamp")),
    )
    chunk, dead = decoder.decode(messages, offsets)
    n = len(chunk.ts)
    ts = np.asarray(chunk.ts, dtype=np.int64)
    # The Reorderer's rules, per partition in offset order (engine/reorder.py).
    prev_max = int(clock["latest"].get(str(p), NONE))
    prev_promise = int(clock["promised"].get(str(p), NONE))
    passed = int(clock["passed"])
    promises = np.full(n, NONE, dtype=np.int64)
    if stream.heartbeat is not None and n:
        names = [f.name for f in stream.schema]
        col = chunk.columns[names.index(stream.heartbeat[0])]
        values = np.asarray(pc.fill_null(col.cast(pa.int64()), NONE).to_numpy(), dtype=np.int64)
        promises = np.where(values == NONE, NONE, values + stream.heartbeat[1])
    before = np.empty(n, dtype=np.int64)
    promised = np.empty(n, dtype=np.int64)
    if n:
        before[0], promised[0] = prev_max, prev_promise
        before[1:] = np.maximum(np.maximum.accumulate(ts)[:-1], prev_max)
        promised[1:] = np.maximum(np.maximum.accumulate(promises)[:-1], prev_promise)
    late = ts < promised
    known = before != NONE
    late[known] |= ts[known] < before[known] - stream.max_delay
    if passed != NONE:
        late |= ts <= passed
    reasons = [None] * n
    for k in np.flatnonzero(late).tolist():
        t, m, q = int(ts[k]), int(before[k]), int(promised[k])
        if t < q:
            reasons[k] = (f"late: timestamp {t} is below {q}, the heartbeat an earlier record "
                          "promised (heartbeat field + offset)")
        elif m != NONE and t < m - stream.max_delay:
            reasons[k] = (f"late: timestamp {t} is more than max_delay {stream.max_delay} "
                          f"before the latest timestamp seen in partition {p} ({m})")
        else:
            reasons[k] = (f"late: timestamp {t} is at or below {passed}, the stream's heartbeat "
                          "already passed")
    kinds = np.where(late, LATE, ELEMENT).astype(np.int8)
    raw_by_offset = dict(zip(offsets.tolist(), sub.column("value").to_pylist(), strict=True))
    key_by_offset = dict(zip(offsets.tolist(), sub.column("key").to_pylist(), strict=True))
    part_elems = {
        "_kind": pa.array(kinds), "_src": pa.array(np.full(n, i, np.int32)),
        "_partition": pa.array(np.full(n, p, np.int32)),
        "_offset": pa.array(np.asarray(chunk.record, dtype=np.int64)),
        "_ts": pa.array(ts), "_promise": pa.array(promises),
        "_reason": pa.array(reasons, pa.string()),
    }
    for j in range(len(stream.schema)):
        part_elems[eis.stream_column(i, j)] = chunk.columns[j]
    tables = [_fill(part_elems, n, schema)]
    if dead:
        # `dead[k].record` is the message's index among these messages.
        m = len(dead)
        dead_offsets = [int(offsets[d.record]) for d in dead]
        tables.append(_fill({
            "_kind": pa.array(np.full(m, MALFORMED, np.int8)),
            "_src": pa.array(np.full(m, i, np.int32)),
            "_partition": pa.array(np.full(m, p, np.int32)),
            "_offset": pa.array(dead_offsets, pa.int64()),
            "_reason": pa.array([d.reason for d in dead], pa.string()),
            "_raw": pa.array([raw_by_offset[o] for o in dead_offsets], pa.binary()),
            "_mkey": pa.array([key_by_offset[o] for o in dead_offsets], pa.binary()),
        }, m, schema))
    top = int(ts.max()) if n else NONE
    top_promise = int(promises.max()) if n else NONE
    tables.append(_fill({
        "_kind": pa.array([SUMMARY], pa.int8()), "_src": pa.array([i], pa.int32()),
        "_partition": pa.array([p], pa.int32()),
        "_offset": pa.array([int(offsets.max())], pa.int64()),
        "_ts": pa.array([top], pa.int64()), "_promise": pa.array([top_promise], pa.int64()),
    }, 1, schema))
    return pa.concat_tables(tables)


def _kafka_ms(column: pa.ChunkedArray) -> list[int]:
    """Kafka message timestamps (Spark timestamps) as ms since the epoch, -1 when none."""
    us = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    return [-1 if v is None else v // 1000 for v in us.to_pylist()]


def _fill(columns: dict[str, pa.Array], n: int, schema: pa.Schema) -> pa.Table:
    arrays = [
        columns[f.name].cast(f.type) if f.name in columns else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
