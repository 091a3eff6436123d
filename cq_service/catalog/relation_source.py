"""Stored relations as a source: ``source: {type: catalog}`` on a relation of a pipeline file.

Options (the spec loader fills them in): `name` — the catalog relation (default: the relation's
own name); `url` — the catalog (None: `database.default_url()`); `pipeline` — the pipeline
reading it, which sees the shared rows and its own.

The reader gives the relation's rows ordered by (ts, id) as `RawChunk`s: columns typed per the
relation's schema (converted as a file source converts JSON values), ops +1/-1, record = the
row id. A row that does not fit the schema is a `DeadRecord` (file: the catalog relation's name,
record: the row id, raw: the row as JSON).

Finite (``cq run``, `live` False): a snapshot of the rows there when the reader first reads,
then None. Live (``cq serve``): the snapshot, then every row added since (id greater than the
last seen), polling the catalog at most every `POLL_SECONDS`; an empty chunk when nothing is
new. `follows_clock` tells the engine to move this source's time with the other sources'.
While the catalog cannot be reached, a live read returns an empty chunk and `outage` says why;
it looks again every `POLL_SECONDS` and goes on from the last row it read (rows added
meanwhile arrive late, at the time they are read, as any row does).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Collection

import numpy as np
import pyarrow as pa

from cq_service.catalog.exceptions import CatalogError, CatalogUnavailable
from cq_service.catalog.records import RelationRowRecord
from cq_service.catalog.repository import Catalog
from cq_service.errors import Outage
from cq_service.io.base import RawChunk, SourceError, SourceReader, register_source
from cq_service.io.records import OP_FIELD, RecordLayout
from cq_service.spec.model import StreamSpec
from cq_service.types import arrow_type

__all__ = ["POLL_SECONDS", "CatalogRelationReader"]

POLL_SECONDS = 0.2
_TS_KEY = "\0ts"  # the stored ts column, under a name no record field can have


@register_source("catalog")
class CatalogRelationReader(SourceReader):
    """Reads a stored relation from the catalog (see the module docstring)."""

    follows_clock = True

    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        super().__init__(stream, time_unit, batch_rows, columns)
        span = stream.source.span
        if not stream.is_relation:
            raise SourceError(
                f"{stream.name}: a catalog source is for relations only (this is a stream)", span
            )
        opts = stream.source.options
        self.relation = str(opts.get("name") or stream.name)
        self.pipeline = opts.get("pipeline")
        # The stored ts is the element's time; a schema column named like the relation's
        # `timestamp` field takes its value from it too.
        ts_field = stream.timestamp if stream.timestamp is not None else _TS_KEY
        self.layout = RecordLayout(
            dataclasses.replace(stream, timestamp=ts_field), time_unit, self.relation
        )
        self._names = [f.name for f in stream.schema]
        try:
            self.catalog = Catalog(opts.get("url"), create=False)
        except CatalogError as e:
            raise SourceError(f"{stream.name}: {e.message}", span) from None
        self._snapshot_end: int | None = None  # the largest id of the snapshot, once taken
        self._after: tuple[int, int] | None = None  # (ts, id) of the last snapshot row read
        self._snapshot_done = False
        self._last_id = 0
        self._next_poll = 0.0
        # What a live read gives while nothing is new (every few ms): built once, never changed.
        self._empty = RawChunk(
            tuple(pa.array([], type=arrow_type(f.type)) for f in stream.schema),
            np.empty(0, dtype=np.int64),
            np.empty(0, dtype=np.int8),
            np.empty(0, dtype=np.int64),
        )

    def read(self) -> RawChunk | None:
        if self.live and self.catalog.outage is not None and time.monotonic() < self._next_poll:
            return self._empty
        try:
            if not self._snapshot_done:
                chunk = self._read_snapshot()
                if chunk is not None:
                    return chunk
                self._snapshot_done = True
            if not self.live:
                return None
            return self._poll()
        except CatalogError as e:
            if self.live and isinstance(e, CatalogUnavailable):  # look again later
                self._next_poll = time.monotonic() + POLL_SECONDS
                return self._empty
            raise SourceError(f"{self.stream.name}: {e.message}", self.stream.source.span) from None

    @property
    def outage(self) -> Outage | None:
        """Why the catalog could not be read the last time (None: it could)."""
        return self.catalog.outage

    @property
    def dependency(self) -> str:
        return self.catalog.dependency

    def _read_snapshot(self) -> RawChunk | None:
        if self._snapshot_end is None:
            self._snapshot_end = self.catalog.last_relation_row_id(
                self.relation, pipeline=self.pipeline
            )
            self._last_id = self._snapshot_end
        rows = self.catalog.relation_rows_by_time(
            self.relation,
            up_to_id=self._snapshot_end,
            after=self._after,
            limit=self.batch_rows,
            pipeline=self.pipeline,
        )
        if not rows:
            return None
        self._after = (rows[-1].ts, rows[-1].id)
        return self._chunk(rows)

    def _poll(self) -> RawChunk:
        """Rows added since the last look, at most every POLL_SECONDS (else an empty chunk)."""
        now = time.monotonic()
        if now < self._next_poll:
            return self._empty
        rows = self.catalog.relation_rows(
            self.relation, self._last_id, self.batch_rows, pipeline=self.pipeline
        )
        if len(rows) < self.batch_rows:  # caught up: wait before looking again
            self._next_poll = now + POLL_SECONDS
        if rows:
            self._last_id = rows[-1].id
            rows.sort(key=lambda r: (r.ts, r.id))
        return self._chunk(rows)

    def _chunk(self, rows: list[RelationRowRecord]) -> RawChunk:
        n = len(rows)
        if n == 0:
            return self._empty
        values: dict[str, list] = {c: [r.row.get(c) for r in rows] for c in self._names}
        values[self.layout.ts_field] = [r.ts for r in rows]
        values[OP_FIELD] = [r.op for r in rows]
        ids = np.array([r.id for r in rows], dtype=np.int64)
        return self.layout.assemble(
            values,
            n,
            ids,
            np.arange(n, dtype=np.int64),
            lambda i: json.dumps(rows[i].row, ensure_ascii=False, sort_keys=True),
        )

    def close(self) -> None:
        self.catalog.close()
