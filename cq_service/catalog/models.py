"""The catalog's tables (SQLAlchemy 2 declarative models).

The schema itself is created and changed only by the Alembic migrations in
``catalog/migrations/``; these models must describe what the newest migration leaves (a test
checks the two agree).
Times are timezone-aware UTC; JSON columns are JSONB on PostgreSQL and JSON text on SQLite.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "DEPLOYMENT_STATUSES",
    "QUERY_STATUSES",
    "Adjustment",
    "ArchiveProgress",
    "Base",
    "CheckpointRow",
    "Deployment",
    "PipelineControl",
    "Query",
    "QueryHandover",
    "RelationRow",
    "StatsSnapshot",
    "StoredPipeline",
    "Stream",
    "utcnow",
]

QUERY_STATUSES = ("running", "stopped", "failed")
DEPLOYMENT_STATUSES = ("applied", "rejected", "removed")

# An autoincrementing 64-bit key: SQLite only autoincrements INTEGER PRIMARY KEY.
Id = BigInteger().with_variant(Integer, "sqlite")
Json = JSON().with_variant(JSONB(), "postgresql")
Name = String(200)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class Stream(Base):
    """A stream or relation as declared by a deployed pipeline."""

    __tablename__ = "streams"
    __table_args__ = (UniqueConstraint("pipeline", "name", name="uq_streams_pipeline_name"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    pipeline: Mapped[str] = mapped_column(Name)
    name: Mapped[str] = mapped_column(Name)
    is_relation: Mapped[bool] = mapped_column(Boolean)
    schema: Mapped[Any] = mapped_column(Json, nullable=False)  # {column: type}, in order
    source: Mapped[Any] = mapped_column(Json, nullable=False)  # {type, ...}
    timestamp: Mapped[str | None] = mapped_column(Name, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RelationRow(Base):
    """One insertion (`+`) or deletion (`-`) of a stored relation at time `ts`."""

    __tablename__ = "relation_rows"
    __table_args__ = (
        CheckConstraint("op IN ('+', '-')", name="ck_relation_rows_op"),
        Index("ix_relation_rows_relation_ts_id", "relation", "ts", "id"),
        Index("ix_relation_rows_relation_id", "relation", "id"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    relation: Mapped[str] = mapped_column(Name)
    pipeline: Mapped[str | None] = mapped_column(Name, nullable=True)  # None: shared
    ts: Mapped[int] = mapped_column(BigInteger)
    op: Mapped[str] = mapped_column(String(1))
    row: Mapped[Any] = mapped_column(Json, nullable=False)


class Query(Base):
    """A deployed query with its run-time controls and status.

    `file_controls` remembers the controls (weight, qos, memory_budget) as the pipeline file last
    gave them, so a redeploy can tell a file change from a value set through the API."""

    __tablename__ = "queries"
    __table_args__ = (
        UniqueConstraint("pipeline", "name", name="uq_queries_pipeline_name"),
        CheckConstraint("status IN ('running', 'stopped', 'failed')", name="ck_queries_status"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    pipeline: Mapped[str] = mapped_column(Name)
    name: Mapped[str] = mapped_column(Name)
    cql: Mapped[str] = mapped_column(Text)
    sink: Mapped[Any] = mapped_column(Json, nullable=True)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    qos: Mapped[Any] = mapped_column(Json, nullable=False, default=dict)
    memory_budget: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    file_controls: Mapped[Any] = mapped_column(Json, nullable=False, default=dict)
    spec_hash: Mapped[str] = mapped_column(String(128))
    start_after: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Deployment(Base):
    """One attempt to deploy a pipeline file (a log, newest last)."""

    __tablename__ = "deployments"
    __table_args__ = (
        CheckConstraint(
            "status IN ('applied', 'rejected', 'removed')", name="ck_deployments_status"
        ),
        Index("ix_deployments_pipeline", "pipeline"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    pipeline: Mapped[str] = mapped_column(Name)
    spec_hash: Mapped[str] = mapped_column(String(128))
    revision: Mapped[str | None] = mapped_column(String(64), nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Adjustment(Base):
    """A run-time adjustment (window size, granularity, shedding, weight…), a log."""

    __tablename__ = "adjustments"
    __table_args__ = (Index("ix_adjustments_pipeline", "pipeline"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    pipeline: Mapped[str] = mapped_column(Name)
    query: Mapped[str | None] = mapped_column(Name, nullable=True)
    kind: Mapped[str] = mapped_column(String(64))
    detail: Mapped[Any] = mapped_column(Json, nullable=False, default=dict)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StatsSnapshot(Base):
    """A snapshot of run-time statistics (of one pipeline, or of the worker if None)."""

    __tablename__ = "stats_snapshots"
    __table_args__ = (Index("ix_stats_snapshots_at", "at"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    pipeline: Mapped[str | None] = mapped_column(Name, nullable=True)
    data: Mapped[Any] = mapped_column(Json, nullable=False)


class CheckpointRow(Base):
    """A worker's at-least-once checkpoint: its frontier and source offsets."""

    __tablename__ = "checkpoints"

    key: Mapped[str] = mapped_column(Name, primary_key=True)
    frontier: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    offsets: Mapped[Any] = mapped_column(Json, nullable=False, default=dict)
    queries: Mapped[Any] = mapped_column(Json, nullable=False, default=dict)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class PipelineControl(Base):
    """A deployment's run-time control: the scheduler (and chain_bounded's latency bound or
    chain_share's share of FIFO steps) chosen through the API. NULL scheduler: the worker's configuration or the file decides."""

    __tablename__ = "pipeline_controls"
    __table_args__ = (
        CheckConstraint(
            "latency_bound_ms IS NULL OR latency_bound_ms > 0",
            name="ck_pipeline_controls_latency_bound_ms",
        ),
        CheckConstraint(
            "share IS NULL OR (share >= 0 AND share <= 1)", name="ck_pipeline_controls_share"
        ),
    )

    pipeline: Mapped[str] = mapped_column(Name, primary_key=True)
    scheduler: Mapped[str | None] = mapped_column(String(32), nullable=True)
    latency_bound_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    share: Mapped[float | None] = mapped_column(Float, nullable=True)  # added by 0006


class ArchiveProgress(Base):
    """How far `cq archive` has copied a stream of a pipeline (docs/archive.md): the committed
    run number, per partition the next offset to archive and the largest archived _ts, the
    completeness boundary, and a file source's size and mtime when it was archived."""

    __tablename__ = "archive_progress"
    __table_args__ = (CheckConstraint("run >= 1", name="ck_archive_progress_run"),)

    pipeline: Mapped[str] = mapped_column(Name, primary_key=True)
    stream: Mapped[str] = mapped_column(Name, primary_key=True)
    source: Mapped[str] = mapped_column(String(16))
    run: Mapped[int] = mapped_column(BigInteger)
    offsets: Mapped[Any] = mapped_column(Json, nullable=False)
    max_ts: Mapped[Any] = mapped_column(Json, nullable=False)
    next_position: Mapped[int] = mapped_column(BigInteger)
    boundary: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    file_size: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    file_mtime_ns: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    rows: Mapped[int] = mapped_column(BigInteger)
    dead_letters: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class QueryHandover(Base):
    """A backfill of a query up to `until_ts` (T2): the worker starts it warm from the archive
    and emits only results after T2 (docs/backfill.md)."""

    __tablename__ = "query_handovers"

    pipeline: Mapped[str] = mapped_column(Name, primary_key=True)
    query: Mapped[str] = mapped_column(Name, primary_key=True)
    until_ts: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class StoredPipeline(Base):
    """A pipeline deployed through the API: its text, hash and revision (counted up with each
    new text); the worker deploys it like a file of the pipelines folder."""

    __tablename__ = "stored_pipelines"
    __table_args__ = (CheckConstraint("revision >= 1", name="ck_stored_pipelines_revision"),)

    pipeline: Mapped[str] = mapped_column(Name, primary_key=True)
    filename: Mapped[str] = mapped_column(Name)
    text: Mapped[str] = mapped_column(Text)
    spec_hash: Mapped[str] = mapped_column(String(128))
    revision: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
