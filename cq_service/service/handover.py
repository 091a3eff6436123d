"""The live worker taking over a query from a backfill (docs/backfill.md, "Handover").

After `cq backfill … --handover` wrote a query's results up to T2 and recorded T2 in the catalog
(`Catalog.set_handover`), the worker starts that query on sources of its own: each stream is
the archive replayed in replay order from the first instant the results after T2 depend on
(T2 − the query's window reach; the archive's start for unbounded windows), then the live
Kafka topic from the offsets the archive stops at. Nothing is read twice and nothing is
skipped: the archive holds exactly the offsets below the catalog's archive progress, and the
topic is read from there. The query's results at or before T2 are dropped (`ResumeFilter`),
so the backfill's output and the worker's meet at T2 with no gap and no overlap.

The archive's part ends with a heartbeat at its completeness boundary (no later element is at
or below it); from then on the Kafka reader gives the stream's time, per partition, as for any
live source.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.batch.layout import archive_root, read_stream, stream_dir
from cq_service.batch.partitioning import history_reach
from cq_service.errors import CQError
from cq_service.io import open_source
from cq_service.io.base import RawChunk, SourceReader
from cq_service.plan.rewrite import simplify
from cq_service.spec.model import PipelineSpec, StreamSpec
from cq_service.types import arrow_type

__all__ = ["HandoverError", "HandoverReader", "handover_key", "open_handover"]

PREFIX = "handover:"


class HandoverError(CQError):
    """A handover that cannot start (no archive progress, a source without offsets)."""


def handover_key(pipeline: str, query: str, stream: str) -> str:
    """The source key of `stream` as read by a handed-over query (its own source)."""
    return f"{PREFIX}{pipeline}/{query}:{stream}"


class HandoverReader:
    """The archive's elements, then the live reader's (see the module docstring)."""

    live = True

    def __init__(self, archive: pa.Table, stream: StreamSpec, boundary: int | None,
                 live: SourceReader, batch_rows: int):
        self.archive = archive
        self.names = [f.name for f in stream.schema]
        self.types = [arrow_type(f.type) for f in stream.schema]
        self.boundary = boundary
        self.reader = live
        self.batch_rows = batch_rows
        self.pos = 0
        self.replayed = False

    def read(self) -> RawChunk | None:
        if self.pos < self.archive.num_rows:
            part = self.archive.slice(self.pos, self.batch_rows)
            self.pos += part.num_rows
            cols = tuple(part.column(n).combine_chunks().cast(t)
                         for n, t in zip(self.names, self.types, strict=True))
            ts = part.column("_ts").to_numpy().astype(np.int64)
            return RawChunk(
                cols, ts, np.ones(len(ts), dtype=np.int8),
                part.column("_offset").to_numpy().astype(np.int64),
                partition=part.column("_partition").to_numpy().astype(np.int32),
            )
        if not self.replayed:
            self.replayed = True
            empty = tuple(pa.array([], type=t) for t in self.types)
            none = np.empty(0, dtype=np.int64)
            return RawChunk(empty, none, none.astype(np.int8), none,
                            partition=none.astype(np.int32), heartbeat=self.boundary)
        return self.reader.read()

    def close(self) -> None:
        self.reader.close()

    def __getattr__(self, name: str) -> Any:  # pause/resume go to the live reader
        return getattr(self.reader, name)


def open_handover(
    spec: PipelineSpec,
    stream: StreamSpec,
    plan: Any,
    until: int,
    catalog: Any,
    batch_rows: int,
    root: str | Path | None = None,
) -> HandoverReader:
    """The reader of `stream` for a query (logical `plan`) handed over at `until` (T2)."""
    state = catalog.archive_state(spec.name, stream.name)
    if state is None or not state.offsets:
        raise HandoverError(f"{stream.name}: no archive progress recorded: run `cq archive` "
                            "before handing a query over")
    reach = history_reach(simplify(plan))
    start = None if reach is None else until - reach
    folder = archive_root(spec, root)
    if state.rows and not stream_dir(folder, stream.name).is_dir():
        raise HandoverError(f"{stream.name}: the catalog records {state.rows} archived elements "
                            f"but {stream_dir(folder, stream.name)} does not exist")
    table = read_stream(folder, stream, spec.time_unit, start=start)
    offsets = {int(p): int(o) for p, o in state.offsets.items()}
    table = _below(table, offsets)
    options = {k: v for k, v in stream.source.options.items() if k != "group"}
    private = replace(stream, source=replace(stream.source, options=options))
    live = open_source(private, spec.time_unit, batch_rows, live=True)
    if not hasattr(live, "seek"):
        live.close()
        raise HandoverError(f"{stream.name}: a handover continues from the archive's offsets, "
                            "which needs a Kafka source")
    live.seek(offsets)
    return HandoverReader(table, stream, state.boundary, live, batch_rows)


def _below(table: pa.Table, offsets: dict[int, int]) -> pa.Table:
    """The archived elements below each partition's next offset to archive (an archive run
    that commits meanwhile adds files the catalog's progress does not cover yet)."""
    if not table.num_rows:
        return table
    part = table.column("_partition").to_numpy()
    off = table.column("_offset").to_numpy()
    keep = np.zeros(len(part), dtype=bool)
    for p, o in offsets.items():
        keep |= (part == p) & (off < o)
    return table.filter(pa.array(keep)) if not keep.all() else table

