"""Pipelines deployed through the API, kept in the catalog (table ``stored_pipelines``).

A pipeline sent as text (`cq deploy`, `POST /pipelines`) has no file in the pipelines folder:
the catalog holds its text, the text's SHA-256 and a revision that counts the texts stored
under its name. The worker deploys them at start-up and whenever they change, as it does the
folder's files (docs/service.md, "Deploying").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from cq_service.catalog import models as m
from cq_service.catalog.statements import Transactions, aware

__all__ = ["StoredPipelineRecord", "StoredPipelines"]


@dataclass(frozen=True)
class StoredPipelineRecord:
    pipeline: str
    filename: str  # the name it was sent as; relative paths are the pipelines folder's
    text: str
    spec_hash: str  # SHA-256 of `text`
    revision: int  # 1 for its first text, one more for each new one
    updated_at: datetime


class StoredPipelines:
    """The catalog's methods for pipelines deployed through the API (mixed into `Catalog`)."""

    def store_pipeline(
        self: Transactions, pipeline: str, filename: str, text: str, spec_hash: str
    ) -> int:
        """Keep `text` as pipeline `pipeline`'s deployed text; its revision (the same as
        before when the text is unchanged)."""
        with self._tx() as s:
            row = s.get(m.StoredPipeline, pipeline, with_for_update=True)
            if row is None:
                row = m.StoredPipeline(pipeline=pipeline, revision=0)
                s.add(row)
            if row.spec_hash != spec_hash or row.revision == 0:
                row.revision += 1
            row.filename, row.text, row.spec_hash = filename, text, spec_hash
            row.updated_at = m.utcnow()
            s.flush()
            return int(row.revision)

    def stored_pipeline(self: Transactions, pipeline: str) -> StoredPipelineRecord | None:
        with self._tx() as s:
            row = s.get(m.StoredPipeline, pipeline)
            return None if row is None else _record(row)

    def stored_pipelines(self: Transactions) -> list[StoredPipelineRecord]:
        """Every pipeline deployed through the API, by name."""
        with self._tx() as s:
            rows = s.scalars(select(m.StoredPipeline).order_by(m.StoredPipeline.pipeline))
            return [_record(r) for r in rows]

    def drop_stored_pipeline(self: Transactions, pipeline: str) -> bool:
        """Forget pipeline `pipeline`'s stored text; whether there was one."""
        with self._tx() as s:
            row = s.get(m.StoredPipeline, pipeline)
            if row is None:
                return False
            s.delete(row)
            return True


def _record(row: m.StoredPipeline) -> StoredPipelineRecord:
    return StoredPipelineRecord(
        row.pipeline, row.filename, row.text, row.spec_hash, int(row.revision),
        aware(row.updated_at),
    )
