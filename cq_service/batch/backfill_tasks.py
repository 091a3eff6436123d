"""The Spark tasks of a backfill: archive row groups read in the task with pyarrow, spread over
the tasks, sorted in replay order inside each task and run through the engine, with no row
conversion on the way in or out.

The driver lists the archive's Parquet row groups in the feed range (`list_splits`: ``date=``
folders and row groups whose ``_ts`` statistics lie outside it are pruned) and gives each task
its share (`assign`: row groups balanced by rows, a row group sliced when there are fewer of
them than tasks). How the elements reach the task that runs them depends on the query's
`Partitioning`:

- ``direct``: every stream may be spread by position (a per-element query on the key path), or
  one task runs everything (the single path). Each task reads its own row groups: no shuffle.
- ``filter``: a stream is hashed on a key (`key_buckets`). Every task reads that stream's whole
  archive and keeps the elements of its bucket: no shuffle, the archive read once per task.
  Chosen when that extra reading is small (`FILTER_LIMIT`).
- ``shuffle``: map tasks read each row group once and send each bucket's elements, as Arrow IPC,
  to its task through Spark's shuffle (one record per bucket and map task, not per row).

A task then sorts each stream in replay order (``_ts``, ``_partition``, ``_offset``) when it is
not already, runs `engine_in_spark.run_engine` and returns how many elements it read per stream
and its result as Arrow IPC bytes; the driver merges the results in canonical order.
"""

from __future__ import annotations

import io
import pickle
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.batch import engine_in_spark as eis
from cq_service.batch.layout import hour_of, stream_dir

__all__ = [
    "FILTER_LIMIT",
    "WIRE",
    "Job",
    "Split",
    "TaskResult",
    "assign",
    "direct_task",
    "filter_task",
    "key_buckets",
    "list_splits",
    "map_task",
    "reduce_task",
    "replay_sorted",
]

# The ``filter`` spread is used while (tasks − 1) × the keyed streams' uncompressed bytes stay
# under this: re-reading that much costs less than a shuffle's extra stage.
FILTER_LIMIT = 256 << 20

# How the tasks' Arrow IPC (results, shuffled elements) is compressed: Spark moves and copies
# these bytes several times; lz4 makes them about 4 times smaller for the least CPU (zstd: 7
# times, at twice the CPU on both ends).
WIRE = "lz4"

# A task's result: elements read per stream index, and its result table as Arrow IPC bytes.
TaskResult = tuple[dict[int, int], bytes]


@dataclass(frozen=True)
class Split:
    """Rows of one Parquet row group of stream number `stream` (its ``_src`` index): slice
    `part` of `parts` equal slices of the row group's `rows`."""

    stream: int
    path: str
    row_group: int
    rows: int
    nbytes: int
    part: int = 0
    parts: int = 1

    @property
    def bounds(self) -> tuple[int, int]:
        return self.part * self.rows // self.parts, (self.part + 1) * self.rows // self.parts

    @property
    def size(self) -> int:
        lo, hi = self.bounds
        return hi - lo


def list_splits(root: Path, stream: str, index: int, time_unit: str,
                start: int | None, end: int) -> list[Split]:
    """The row groups of `stream`'s archive under `root` that may hold ``_ts`` in
    [start, end] (`start` None: from the beginning)."""
    folder = stream_dir(root, stream)
    if not folder.is_dir():
        return []
    first = None if start is None else hour_of(start, time_unit)[0]
    last = hour_of(end, time_unit)[0]
    splits = []
    for path in sorted(folder.rglob("*.parquet")):
        parts = path.relative_to(folder).parts
        if any(p.startswith((".", "_")) for p in parts):
            continue  # staging and dead letters are not part of the stream
        date = next((p[5:] for p in parts[:-1] if p.startswith("date=")), None)
        if date is not None and ((first is not None and date < first) or date > last):
            continue
        meta = pq.ParquetFile(path).metadata
        ts_col = _column_index(meta, "_ts")
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows == 0:
                continue
            stats = group.column(ts_col).statistics if ts_col is not None else None
            if stats is not None and stats.has_min_max and (
                    (start is not None and stats.max < start) or stats.min > end):
                continue
            splits.append(Split(index, str(path), g, group.num_rows, group.total_byte_size))
    return splits


def _column_index(meta: pq.FileMetaData, name: str) -> int | None:
    for j in range(meta.num_columns):
        if meta.schema.column(j).path == name:
            return j
    return None


def assign(splits: Sequence[Split], tasks: int) -> list[list[Split]]:
    """`splits` shared by `tasks` tasks, balanced by rows: a row group larger than a task's
    share is cut into slices first (each slice's task reads the row group, keeps its rows)."""
    out: list[list[Split]] = [[] for _ in range(tasks)]
    if tasks == 1:
        out[0] = list(splits)
        return out
    share = max(1, -(-sum(s.rows for s in splits) // tasks))
    pieces = [
        Split(s.stream, s.path, s.row_group, s.rows, s.nbytes, k, parts)
        for s in splits
        for parts in [max(1, min(tasks, round(s.rows / share)))]
        for k in range(parts)
    ]
    load = [0] * tasks
    for p in sorted(pieces, key=lambda p: -p.size):
        i = load.index(min(load))
        out[i].append(p)
        load[i] += p.size
    return out


# ---- in the task ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """What every task of one backfill shares: the pickled `EngineTask`, the streams' archive
    schemas (by ``_src`` index), the columns read of each (the schema columns the query uses,
    as `plan.columns.source_columns` says, and ``_ts``, ``_partition``, ``_offset``; the others
    are NULL, as when `cq run` reads a source), their key column (None: spread by position),
    the feed range and the number of tasks."""

    task: bytes
    schemas: tuple[pa.Schema, ...]
    columns: tuple[tuple[str, ...], ...]
    keys: tuple[str | None, ...]
    feed_from: int | None
    end: int
    tasks: int


def direct_task(job: Job, splits: Sequence[Split]) -> TaskResult:
    """Run the engine over `splits` (the ``direct`` spread)."""
    return _run(job, _read(job, splits))


def filter_task(job: Job, bucket: int, own: Sequence[Split],
                keyed: Sequence[Split]) -> TaskResult:
    """Run the engine over `own` (position-spread streams' splits) and the elements of
    `keyed` (every split of the keyed streams) whose key falls in `bucket`."""
    tables = _read(job, own)
    for i, table in _read(job, keyed).items():
        key = job.keys[i]
        assert key is not None
        mine = key_buckets(table.column(key), job.tasks) == bucket
        tables[i] = table.filter(pa.array(mine))
    return _run(job, tables)


def map_task(job: Job, index: int, splits: Sequence[Split]) -> Iterator[tuple[int, tuple]]:
    """The map side of the ``shuffle`` spread: (bucket, (stream, IPC bytes)) per bucket that
    gets elements of `splits`; a position-spread stream's elements all go to bucket `index`."""
    for i, table in _read(job, splits).items():
        key = job.keys[i]
        if key is None:
            yield index % job.tasks, (i, eis.to_ipc(table, WIRE))
            continue
        buckets = key_buckets(table.column(key), job.tasks)
        order = np.argsort(buckets, kind="stable")
        ends = np.searchsorted(buckets[order], np.arange(job.tasks + 1))
        for b in range(job.tasks):
            if ends[b + 1] > ends[b]:
                part = table.take(pa.array(order[ends[b]:ends[b + 1]]))
                yield b, (i, eis.to_ipc(part, WIRE))


def reduce_task(job: Job, received: Iterable[tuple[int, tuple]]) -> TaskResult:
    """The reduce side of the ``shuffle`` spread: run the engine over what one bucket got."""
    parts: dict[int, list[pa.Table]] = defaultdict(list)
    for _, (i, data) in received:
        parts[i].append(pa.ipc.open_stream(io.BytesIO(data)).read_all())
    return _run(job, {i: pa.concat_tables(t) for i, t in parts.items()})


def _read(job: Job, splits: Sequence[Split]) -> dict[int, pa.Table]:
    """Each stream's elements of `splits` in the feed range, one table per stream index."""
    groups: dict[tuple[str, int], list[Split]] = defaultdict(list)
    for s in splits:
        groups[(s.path, s.row_group)].append(s)
    tables: dict[int, list[pa.Table]] = defaultdict(list)
    for (path, g), pieces in groups.items():
        i = pieces[0].stream
        file = pq.ParquetFile(path)
        present = set(file.schema_arrow.names)
        read = [c for c in job.columns[i] if c in present]
        whole = _conform(file.read_row_group(g, columns=read), job.schemas[i], job.columns[i])
        for p in pieces:
            lo, hi = p.bounds
            part = whole if (lo, hi) == (0, whole.num_rows) else whole.slice(lo, hi - lo)
            tables[p.stream].append(_in_range(part, job.feed_from, job.end))
    return {i: pa.concat_tables(t) for i, t in tables.items()}


def _conform(table: pa.Table, schema: pa.Schema, columns: Sequence[str]) -> pa.Table:
    """`table`'s `columns` with `schema`'s types; one the file lacks is NULL (a column left
    out of `columns` stays out: the engine's reader takes it as NULL)."""
    fields = [schema.field(c) for c in columns]
    if table.schema.equals(pa.schema(fields)):
        return table
    cols = [
        table.column(f.name).cast(f.type) if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in fields
    ]
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def _in_range(table: pa.Table, start: int | None, end: int) -> pa.Table:
    ts = table.column("_ts").to_numpy()
    keep = ts <= end
    if start is not None:
        keep &= ts >= start
    return table if keep.all() else table.filter(pa.array(keep))


def replay_sorted(table: pa.Table) -> pa.Table:
    """`table` in replay order (``_ts``, ``_partition``, ``_offset``), one chunk per column;
    not re-sorted when it already is."""
    table = table.combine_chunks()
    if table.num_rows <= 1:
        return table
    ts = table.column("_ts").to_numpy()
    part = table.column("_partition").to_numpy()
    off = table.column("_offset").to_numpy()
    dts, dpart, doff = np.diff(ts), np.diff(part), np.diff(off)
    ordered = (dts > 0) | ((dts == 0) & ((dpart > 0) | ((dpart == 0) & (doff >= 0))))
    if ordered.all():
        return table
    return table.take(pa.array(np.lexsort((off, part, ts)))).combine_chunks()


def _run(job: Job, tables: dict[int, pa.Table]) -> TaskResult:
    task: eis.EngineTask = pickle.loads(job.task)
    streams = {task.streams[i]: replay_sorted(t) for i, t in tables.items()}
    result = eis.run_engine(task, streams)
    counts = {i: t.num_rows for i, t in tables.items()}
    return counts, eis.to_ipc(result, WIRE)


# ---- key hashing ----------------------------------------------------------------------------

_M = 0x100000001B3  # odd: invertible modulo 2**64
_M_INV = pow(_M, -1, 1 << 64)


def key_buckets(values: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """The bucket in [0, `buckets`) of each key value, the same in every process: values the
    engine's joins and groups take as equal (1 and 1.0, -0.0 and 0.0, NaNs) share a bucket;
    NULLs go to bucket 0."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n = len(values)
    if n == 0 or buckets == 1 or pa.types.is_null(values.type):
        return np.zeros(n, dtype=np.int64)
    t = values.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        h = _bytes_hash(values.cast(pa.large_binary()))
    else:
        x = np.asarray(values.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False),
                       dtype=np.float64) + 0.0  # -0.0 + 0.0 is 0.0
        x[np.isnan(x)] = np.nan
        h = x.view(np.uint64)
    bucket = (_mix(h) % np.uint64(buckets)).astype(np.int64)
    if values.null_count:
        bucket[np.asarray(values.is_null().to_numpy(zero_copy_only=False))] = 0
    return bucket


def _bytes_hash(values: pa.LargeBinaryArray) -> np.ndarray:
    """A polynomial hash of each value's bytes (mod 2**64), vectorised over the array."""
    _, offset_buffer, data = values.buffers()
    offsets = np.frombuffer(offset_buffer, dtype=np.int64)[
        values.offset:values.offset + len(values) + 1]
    lo, hi = int(offsets[0]), int(offsets[-1])
    raw = (np.frombuffer(data, dtype=np.uint8)[lo:hi] if data is not None
           else np.empty(0, np.uint8)).astype(np.uint64)
    powers = np.full(len(raw), _M, dtype=np.uint64)
    powers[0:1] = 1
    powers = np.cumprod(powers, dtype=np.uint64)  # _M**j, wrapping
    inverse = np.full(len(raw), _M_INV, dtype=np.uint64)
    inverse[0:1] = 1
    inverse = np.cumprod(inverse, dtype=np.uint64)
    prefix = np.concatenate([[np.uint64(0)], np.cumsum(raw * powers, dtype=np.uint64)])
    start, stop = offsets[:-1] - lo, offsets[1:] - lo
    safe = np.minimum(start, max(len(raw) - 1, 0))
    scale = inverse[safe] if len(raw) else np.ones(len(start), np.uint64)
    h = (prefix[stop] - prefix[start]) * scale
    return h ^ (stop - start).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit spread over the output."""
    h = h ^ (h >> np.uint64(30))
    h = h * np.uint64(0xBF58476D1CE4E5B9)
    h = h ^ (h >> np.uint64(27))
    h = h * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))
