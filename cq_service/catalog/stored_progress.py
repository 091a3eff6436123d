"""How far the worker and `cq archive` have got, kept in the catalog (mixed into `Catalog`):
the worker's checkpoints, each archived stream's progress (a run is committed by its write),
and the point up to which a backfill handed a query's results over."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from cq_service.catalog import models as m
from cq_service.catalog.exceptions import CatalogInputError
from cq_service.catalog.records import ArchiveState, Checkpoint
from cq_service.catalog.statements import Transactions, aware, upsert
from cq_service.catalog.validation import int64_or_none, json_value

__all__ = ["StoredProgress"]


class StoredProgress:
    """The catalog's methods for checkpoints, archive progress and backfill handovers."""

    # -- checkpoints -------------------------------------------------------------------------

    def save_checkpoint(
        self: Transactions,
        key: str,
        frontier: int | None,
        offsets: Mapping[str, Mapping[str | int, int]],
        queries: Mapping[str, Any],
    ) -> None:
        """Replace the checkpoint stored under `key` (atomically)."""
        values = {
            "key": key,
            "frontier": int64_or_none("frontier", frontier),
            "offsets": json_value("offsets", {str(k): dict(v) for k, v in offsets.items()}),
            "queries": json_value("queries", dict(queries)),
            "updated_at": m.utcnow(),
        }
        with self._tx() as s:
            s.execute(upsert(s, m.CheckpointRow, values, "key"))

    def load_checkpoint(self: Transactions, key: str) -> Checkpoint | None:
        with self._tx() as s:
            row = s.get(m.CheckpointRow, key)
            if row is None:
                return None
            return Checkpoint(
                row.key, row.frontier, row.offsets, row.queries, aware(row.updated_at)
            )

    # -- archive progress (cq archive) --------------------------------------------------------

    def archive_state(self: Transactions, pipeline: str, stream: str) -> ArchiveState | None:
        """How far `stream` of `pipeline` is archived (None: never)."""
        with self._tx() as s:
            row = s.get(m.ArchiveProgress, (pipeline, stream))
            return None if row is None else _archive_state(row)

    def archive_states(self: Transactions, pipeline: str) -> list[ArchiveState]:
        with self._tx() as s:
            rows = s.scalars(
                select(m.ArchiveProgress)
                .where(m.ArchiveProgress.pipeline == pipeline)
                .order_by(m.ArchiveProgress.stream)
            )
            return [_archive_state(r) for r in rows]

    def save_archive_state(self: Transactions, state: ArchiveState) -> None:
        """Replace the progress of `state.stream` (atomically: a run is committed by this)."""
        if state.run < 1:
            raise CatalogInputError(f"archive run must be >= 1, got {state.run}")
        values = {
            "pipeline": state.pipeline,
            "stream": state.stream,
            "source": state.source,
            "run": state.run,
            "offsets": {str(p): int(o) for p, o in state.offsets.items()},
            "max_ts": {str(p): int(t) for p, t in state.max_ts.items()},
            "next_position": state.next_position,
            "boundary": int64_or_none("boundary", state.boundary),
            "file_size": state.file_size,
            "file_mtime_ns": state.file_mtime_ns,
            "rows": state.rows,
            "dead_letters": state.dead_letters,
            "updated_at": m.utcnow(),
        }
        with self._tx() as s:
            s.execute(upsert(s, m.ArchiveProgress, values, ("pipeline", "stream")))

    def archive_boundary(self, pipeline: str, stream: str) -> int | None:
        """The largest _ts up to which `stream`'s archive is complete (None: none yet)."""
        state = self.archive_state(pipeline, stream)
        return None if state is None else state.boundary

    # -- backfill handovers ------------------------------------------------------------------

    def set_handover(self: Transactions, pipeline: str, query: str, until: int) -> None:
        """Record that `query`'s results up to `until` (T2) came from a backfill."""
        values = {
            "pipeline": pipeline,
            "query": query,
            "until_ts": int64_or_none("until", until),
            "updated_at": m.utcnow(),
        }
        with self._tx() as s:
            s.execute(upsert(s, m.QueryHandover, values, ("pipeline", "query")))

    def handover(self: Transactions, pipeline: str, query: str) -> int | None:
        """The T2 a backfill of `query` handed over at (None: no handover)."""
        with self._tx() as s:
            row = s.get(m.QueryHandover, (pipeline, query))
            return None if row is None else int(row.until_ts)

    def clear_handover(self: Transactions, pipeline: str, query: str) -> bool:
        with self._tx() as s:
            row = s.get(m.QueryHandover, (pipeline, query))
            if row is None:
                return False
            s.delete(row)
            return True


def _archive_state(r: m.ArchiveProgress) -> ArchiveState:
    return ArchiveState(
        pipeline=r.pipeline,
        stream=r.stream,
        source=r.source,
        run=r.run,
        offsets={int(p): int(o) for p, o in (r.offsets or {}).items()},
        max_ts={int(p): int(t) for p, t in (r.max_ts or {}).items()},
        next_position=r.next_position,
        boundary=r.boundary,
        file_size=r.file_size,
        file_mtime_ns=r.file_mtime_ns,
        rows=r.rows,
        dead_letters=r.dead_letters,
        updated_at=aware(r.updated_at),
    )
