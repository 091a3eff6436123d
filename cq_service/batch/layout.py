"""The archive's layout: the contract between `cq archive` (writer) and backfill (reader).

    <root>/<stream>/date=YYYY-MM-DD/hour=HH/<file>.parquet

`root` is the pipeline's ``archive.path`` (default ``archive`` beside the pipeline file), or the
``--to`` override. ``date``/``hour`` are the UTC date and hour of ``_ts`` read in the pipeline's
``time_unit``. Each file holds the stream's schema fields in schema order (int -> int64, float ->
float64, string -> string, bool -> bool, timestamp -> int64 in time_unit), then ``_ts`` int64
(the element's timestamp exactly as the engine assigns it), ``_partition`` int32 (the Kafka
partition; 0 for files) and ``_offset`` int64 (the Kafka offset; for files the record number the
engine's reader reports, `DeadRecord.record`'s numbering). The engine replays an archive in
(``_ts``, ``_partition``, ``_offset``) order. Names starting with ``.`` or ``_`` inside `root`
(staging, dead letters) are not part of any stream.

`archive_boundary` gives the largest ``_ts`` up to which a stream's archive is complete: every
element with ``_ts`` <= it is in the archive (None: nothing is known to be complete yet).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from cq_service.spec.model import DEFAULT_ARCHIVE_DIR, TIME_UNITS, PipelineSpec, StreamSpec
from cq_service.types import arrow_type

__all__ = [
    "ARCHIVE_COLUMNS",
    "PARTITION_SCHEMA",
    "REPLAY_ORDER",
    "archive_boundary",
    "archive_root",
    "archive_schema",
    "hour_of",
    "read_stream",
    "stream_dir",
]

# The columns every archived element carries after its schema fields, in this order.
ARCHIVE_COLUMNS = ("_ts", "_partition", "_offset")
_ARCHIVE_TYPES = (pa.int64(), pa.int32(), pa.int64())
# The engine's replay order of an archive.
REPLAY_ORDER = (("_ts", "ascending"), ("_partition", "ascending"), ("_offset", "ascending"))
# The folders under a stream's folder: date=YYYY-MM-DD/hour=HH (both text, HH zero-padded).
PARTITION_SCHEMA = pa.schema([("date", pa.string()), ("hour", pa.string())])


def archive_root(spec: PipelineSpec, override: str | Path | None = None) -> Path:
    """The archive's root folder: `override` (``cq archive --to``) if given, else the pipeline's
    ``archive.path`` (already absolute), else ``archive`` beside the pipeline file."""
    if override is not None:
        return Path(override).expanduser().resolve()
    if spec.archive is not None:
        return Path(spec.archive.path)
    base = spec.base_dir or (str(Path(spec.path).parent) if spec.path else ".")
    return (Path(base) / DEFAULT_ARCHIVE_DIR).resolve()


def stream_dir(root: str | Path, stream: str) -> Path:
    """The folder holding stream `stream`'s archive."""
    return Path(root) / stream


def archive_schema(stream: StreamSpec) -> pa.Schema:
    """The Arrow schema of an archived stream's files (without the date/hour folders)."""
    fields = [pa.field(f.name, arrow_type(f.type)) for f in stream.schema]
    fields += [pa.field(n, t) for n, t in zip(ARCHIVE_COLUMNS, _ARCHIVE_TYPES, strict=True)]
    return pa.schema(fields)


def hour_of(ts: int, time_unit: str) -> tuple[str, str]:
    """The (date, hour) folder values of timestamp `ts` in `time_unit`: ("2024-05-01", "07")."""
    seconds = (ts * TIME_UNITS[time_unit]) // 1_000_000_000
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%d"), moment.strftime("%H")


def read_stream(
    root: str | Path,
    stream_spec: StreamSpec,
    time_unit: str,
    start: int | None = None,
    end: int | None = None,
) -> pa.Table:
    """Stream `stream_spec`'s archived elements with `start` <= ``_ts`` <= `end` (None: no
    bound), in replay order, with the columns of `archive_schema` (empty if nothing is
    archived)."""
    schema = archive_schema(stream_spec)
    folder = stream_dir(root, stream_spec.name)
    if not folder.is_dir():
        return schema.empty_table()
    dataset = ds.dataset(
        folder,
        format="parquet",
        partitioning=ds.partitioning(PARTITION_SCHEMA, flavor="hive"),
        schema=pa.unify_schemas([schema, PARTITION_SCHEMA]),
    )
    table = dataset.to_table(columns=schema.names, filter=_ts_filter(start, end, time_unit))
    return table.cast(schema).sort_by(list(REPLAY_ORDER)).combine_chunks()


def _ts_filter(start: int | None, end: int | None, time_unit: str) -> ds.Expression | None:
    """`start` <= _ts <= `end`, with the date folders outside the range pruned."""
    parts: list[ds.Expression] = []
    if start is not None:
        parts += [pc.field("_ts") >= start, pc.field("date") >= hour_of(start, time_unit)[0]]
    if end is not None:
        parts += [pc.field("_ts") <= end, pc.field("date") <= hour_of(end, time_unit)[0]]
    if not parts:
        return None
    found = parts[0]
    for part in parts[1:]:
        found = found & part
    return found


def archive_boundary(catalog: Any, pipeline: str, stream: str) -> int | None:
    """The largest T such that every element of `stream` with ``_ts`` <= T is archived, as
    the last `cq archive` run of `pipeline` committed it to `catalog` (a `Catalog`); None when
    nothing is known to be complete (no run yet, or no element past the stream's max_delay).

    Kafka: the minimum over the topic's partitions of the largest archived ``_ts`` minus the
    stream's ``max_delay``; a file source read to its end: its largest ``_ts``."""
    return catalog.archive_boundary(pipeline, stream)
