"""Decoding functions `cq archive` ships to Spark (``mapInArrow``): a Kafka partition's rows or
a file's records become the stream's elements, with their date and hour folders, and its
malformed records become dead-letter rows, all by the engine's own decoding (`MessageDecoder`,
the file readers), so the archive holds exactly the elements the engine sees."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.batch.layout import archive_schema
from cq_service.spec.model import TIME_UNITS, StreamSpec

__all__ = ["DECODED_EXTRA", "file_decoder", "kafka_decoder"]

# The decoding's extra output columns: the folders, and a dead record's details (NULL if fine).
DECODED_EXTRA = pa.schema(
    [
        ("date", pa.string()),
        ("hour", pa.string()),
        ("_dead_reason", pa.string()),
        ("_dead_raw", pa.string()),
        ("_dead_file", pa.string()),
    ]
)


def kafka_decoder(stream: StreamSpec, time_unit: str) -> Callable[[Iterator], Iterator]:
    """A mapInArrow function: Kafka rows (partition, offset, key, value, ms, position) -> the
    stream's elements and dead records (see `DECODED_EXTRA`), decoded by `MessageDecoder`."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from cq_service.io.kafka import MessageDecoder, Messages

        decoder = MessageDecoder(stream, time_unit)
        schema = pa.unify_schemas([archive_schema(stream), DECODED_EXTRA])
        for batch in batches:
            if batch.num_rows == 0:
                continue
            cols = batch.to_pydict()
            messages = Messages.of(
                cols["partition"], cols["offset"], cols["key"], cols["value"], cols["ms"]
            )
            chunk, _ = decoder.decode(messages, np.asarray(cols["position"], dtype=np.int64))
            assert chunk.partition is not None
            yield _elements(
                stream, time_unit, chunk.columns, chunk.ts, chunk.partition, chunk.record, schema
            )
            if chunk.dead:
                # located as kafka:<topic>/<partition>, `record` the offset
                partitions = [int(d.file.rsplit("/", 1)[1]) for d in chunk.dead]
                yield _dead(schema, chunk.dead, partitions, [d.record for d in chunk.dead])

    return decode


def file_decoder(stream: StreamSpec, time_unit: str) -> Callable[[Iterator], Iterator]:
    """A mapInArrow function: one row (task, after) -> the file's elements and dead records
    with a record number above `after`, read by the engine's own file reader."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import cq_service.io  # noqa: F401 - registers the file readers
        from cq_service.io.base import open_source

        schema = pa.unify_schemas([archive_schema(stream), DECODED_EXTRA])
        for batch in batches:
            for after in batch.column("after").to_pylist():
                with open_source(stream, time_unit) as reader:
                    for chunk in reader:
                        keep = chunk.record > after
                        if not keep.all():
                            index = pa.array(np.flatnonzero(keep))
                            columns = tuple(c.take(index) for c in chunk.columns)
                            ts, record = chunk.ts[keep], chunk.record[keep]
                        else:
                            columns, ts, record = chunk.columns, chunk.ts, chunk.record
                        if len(ts):
                            zeros = np.zeros(len(ts), dtype=np.int32)
                            yield _elements(stream, time_unit, columns, ts, zeros, record, schema)
                        dead = [d for d in chunk.dead if d.record > after]
                        if dead:
                            yield _dead(schema, dead, [0] * len(dead), [d.record for d in dead])

    return decode


def _elements(
    stream: StreamSpec,
    time_unit: str,
    columns: Sequence[pa.Array],
    ts: np.ndarray,
    partition: np.ndarray,
    offset: np.ndarray,
    schema: pa.Schema,
) -> pa.RecordBatch:
    dates, hours = _folders(ts, time_unit)
    n = len(ts)
    nulls = pa.nulls(n, pa.string())
    arrays = [
        *(_plain(c) for c in columns),
        pa.array(ts, pa.int64()),
        pa.array(partition, pa.int32()),
        pa.array(offset, pa.int64()),
        dates,
        hours,
        nulls,
        nulls,
        nulls,
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _dead(
    schema: pa.Schema, dead: Sequence[Any], partitions: Sequence[int], offsets: Sequence[int]
) -> pa.RecordBatch:
    n = len(dead)
    arrays = []
    for f in schema:
        if f.name == "_partition":
            arrays.append(pa.array(partitions, pa.int32()))
        elif f.name == "_offset":
            arrays.append(pa.array(offsets, pa.int64()))
        elif f.name == "_dead_reason":
            arrays.append(pa.array([d.reason for d in dead], pa.string()))
        elif f.name == "_dead_raw":
            arrays.append(pa.array([d.raw for d in dead], pa.string()))
        elif f.name == "_dead_file":
            arrays.append(pa.array([d.file for d in dead], pa.string()))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _plain(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _folders(ts: np.ndarray, time_unit: str) -> tuple[pa.Array, pa.Array]:
    """The date and hour folder values (UTC) of timestamps `ts` in `time_unit`."""
    unit_ns = TIME_UNITS[time_unit]
    if unit_ns >= 1_000_000_000:
        seconds = ts.astype(np.int64) * (unit_ns // 1_000_000_000)
    else:
        seconds = ts.astype(np.int64) // (1_000_000_000 // unit_ns)
    moments = pa.array(seconds, pa.timestamp("s", tz="UTC"))
    return pc.strftime(moments, "%Y-%m-%d"), pc.strftime(moments, "%H")
