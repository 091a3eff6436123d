"""The catalog repository: every read and write the worker, the reconciler and `cq` make.

``Catalog(url)`` opens the catalog at a SQLAlchemy URL (see `database`); each method runs in a
transaction of its own and returns plain values (`records`), never ORM objects. Database errors
become `CatalogError`; a request that cannot be right (an unknown query, a bad status, a row
that is not JSON) is a `CatalogInputError`; a database that cannot be reached now (refused,
timed out, connection lost, shutting down or starting up) is `CatalogUnavailable`, and
`outage` says so until a call succeeds again (`ping` is the cheapest such call).

Control fields and redeploys (`upsert_query`): a query's weight, qos and memory_budget may come
from the pipeline file and may be changed at run time through `set_control`. The catalog keeps
what the file said last time; on a redeploy a field takes the file's value only if the file
changed it since then (a value set through the API survives redeploys of an unchanged file,
and an edit to the file wins over it). `active` is never set by the file: only `set_control`
changes it, and a new query starts active.

Pipeline controls (`set_pipeline_control`) choose a deployment's scheduler at run time. They
are never set by a file, so they outlive redeploys (and the file going away) until changed or
cleared.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import delete, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from cq_service.catalog import database
from cq_service.catalog import models as m
from cq_service.catalog.exceptions import CatalogError, CatalogInputError, CatalogUnavailable
from cq_service.catalog.records import (
    AdjustmentRecord,
    DeploymentRecord,
    PipelineControlRecord,
    QueryRecord,
    SourceRecord,
    StatsRecord,
)
from cq_service.catalog.spec_json import stream_json
from cq_service.catalog.statements import aware, upsert
from cq_service.catalog.stored_pipelines import StoredPipelines
from cq_service.catalog.stored_progress import StoredProgress
from cq_service.catalog.stored_relations import StoredRelations
from cq_service.catalog.validation import (
    check_choice,
    int64_or_none,
    json_value,
    scheduler_control,
    valid_budget,
    valid_qos,
    valid_weight,
)
from cq_service.errors import Outage
from cq_service.spec.model import StreamSpec

__all__ = ["Catalog"]

_CONTROLS = ("weight", "qos", "memory_budget")


class Catalog(StoredPipelines, StoredRelations, StoredProgress):
    """The catalog at `url` (default: `database.default_url()`).

    `create=False` refuses to make a new SQLite file (readers should not create catalogs);
    `timeout` bounds how long connecting to a PostgreSQL server may take (seconds)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        create: bool = True,
        timeout: float = database.CONNECT_TIMEOUT_S,
    ):
        self.url = url or database.default_url()
        self.engine = database.make_engine(self.url, create=create, timeout=timeout)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.dependency = f"catalog {database.shown_url(self.engine.url)}"
        self.outage: Outage | None = None  # why the last call could not reach the database

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Catalog({database.shown_url(self.engine.url)!r})"

    # -- schema ------------------------------------------------------------------------------

    def upgrade(self, revision: str = "head") -> None:
        """Migrate to `revision` (default: the newest)."""
        database.upgrade(self.engine, revision)

    def downgrade(self, revision: str = "base") -> None:
        """Migrate down to `revision` (``base`` drops every catalog table)."""
        database.downgrade(self.engine, revision)

    def revision(self) -> str | None:
        """The revision the catalog is at (None: not migrated)."""
        try:
            return database.current_revision(self.engine)
        except SQLAlchemyError as e:
            raise self._error(e) from e

    def is_current(self) -> bool:
        """Whether the catalog is migrated to the newest revision."""
        return self.revision() == database.head_revision()

    def ping(self) -> None:
        """Reach the database (SELECT 1); `CatalogUnavailable` if it cannot be reached."""
        with self._tx() as s:
            s.execute(text("SELECT 1"))

    # -- deployments ---------------------------------------------------------------------------

    def record_deployment(
        self,
        pipeline: str,
        spec_hash: str,
        revision: str | None,
        status: str,
        error: str | None = None,
    ) -> int:
        """Log a deployment attempt (`status` applied, rejected or removed); its id."""
        check_choice("deployment status", status, m.DEPLOYMENT_STATUSES)
        with self._tx() as s:
            row = m.Deployment(
                pipeline=pipeline,
                spec_hash=spec_hash,
                revision=revision,
                status=status,
                error=error,
                created_at=m.utcnow(),
            )
            s.add(row)
            s.flush()
            return int(row.id)

    def deployments(self, pipeline: str | None = None) -> list[DeploymentRecord]:
        """The deployment log (of one pipeline, or all), oldest first."""
        stmt = select(m.Deployment).order_by(m.Deployment.id)
        if pipeline is not None:
            stmt = stmt.where(m.Deployment.pipeline == pipeline)
        with self._tx() as s:
            return [_deployment(d) for d in s.scalars(stmt)]

    # -- queries -------------------------------------------------------------------------------

    def upsert_query(
        self,
        pipeline: str,
        name: str,
        cql: str,
        sink: Mapping[str, Any] | None,
        weight: float,
        spec_hash: str,
        status: str,
        start_after: int | None = None,
        error: str | None = None,
        *,
        qos: Mapping[str, Sequence[float]] | None = None,
        memory_budget: int | None = None,
    ) -> QueryRecord:
        """Add or update a query as deployed from its pipeline file.

        cql, sink, spec_hash, status and error are replaced. `start_after` is replaced, except
        that None keeps the stored value while `spec_hash` is unchanged. weight, qos and
        memory_budget are the file's values: each is applied only on insert or if it differs
        from what the file said at the previous upsert (see the module docstring)."""
        check_choice("query status", status, m.QUERY_STATUSES)
        file_now = {
            "weight": valid_weight(weight),
            "qos": None if qos is None else valid_qos(qos),
            "memory_budget": valid_budget(memory_budget),
        }
        with self._tx() as s:
            row = s.scalars(
                select(m.Query)
                .where(m.Query.pipeline == pipeline, m.Query.name == name)
                .with_for_update()
            ).one_or_none()
            if row is None:
                row = m.Query(pipeline=pipeline, name=name, active=True, qos={})
                s.add(row)
                previous: Mapping[str, Any] = {}
                fresh = True
            else:
                previous = row.file_controls or {}
                fresh = False
                if start_after is None and row.spec_hash == spec_hash:
                    start_after = row.start_after
            for key in _CONTROLS:
                if fresh or previous.get(key) != file_now[key]:
                    _apply_control(row, key, file_now[key])
            row.file_controls = file_now
            row.cql = cql
            row.sink = json_value("sink", dict(sink) if sink is not None else None)
            row.spec_hash = spec_hash
            row.status = status
            row.error = error
            row.start_after = int64_or_none("start_after", start_after)
            row.updated_at = m.utcnow()
            s.flush()
            return _query(row)

    def set_query_status(
        self, pipeline: str, name: str, status: str, error: str | None = None
    ) -> QueryRecord:
        """Set a query's status (running, stopped, failed) and error (None clears it)."""
        check_choice("query status", status, m.QUERY_STATUSES)
        with self._tx() as s:
            row = _one_query(s, pipeline, name)
            row.status = status
            row.error = error
            row.updated_at = m.utcnow()
            return _query(row)

    def remove_query(self, pipeline: str, name: str) -> bool:
        """Delete a query (its controls go with it); False if there was none."""
        with self._tx() as s:
            result = s.execute(
                delete(m.Query).where(m.Query.pipeline == pipeline, m.Query.name == name)
            )
            return bool(result.rowcount)

    def queries(self, pipeline: str | None = None) -> list[QueryRecord]:
        """The queries (of one pipeline, or all), by pipeline then in the order first added."""
        stmt = select(m.Query).order_by(m.Query.pipeline, m.Query.id)
        if pipeline is not None:
            stmt = stmt.where(m.Query.pipeline == pipeline)
        with self._tx() as s:
            return [_query(q) for q in s.scalars(stmt)]

    def query(self, pipeline: str, name: str) -> QueryRecord | None:
        with self._tx() as s:
            row = s.scalars(
                select(m.Query).where(m.Query.pipeline == pipeline, m.Query.name == name)
            ).one_or_none()
            return None if row is None else _query(row)

    def set_control(
        self,
        pipeline: str,
        name: str,
        *,
        weight: float | None = None,
        active: bool | None = None,
        memory_budget: int | None = None,
        qos: Mapping[str, Sequence[float]] | None = None,
        clear_memory_budget: bool = False,
    ) -> QueryRecord:
        """Change a query's run-time controls; None leaves a control as it is
        (`clear_memory_budget` removes the budget). Survives redeploys of an unchanged file."""
        values: dict[str, Any] = {}
        if weight is not None:
            values["weight"] = valid_weight(weight)
        if qos is not None:
            values["qos"] = valid_qos(qos)
        if memory_budget is not None:
            values["memory_budget"] = valid_budget(memory_budget)
        if clear_memory_budget:
            if memory_budget is not None:
                raise CatalogInputError("give memory_budget or clear_memory_budget, not both")
            values["memory_budget"] = None
        with self._tx() as s:
            row = _one_query(s, pipeline, name)
            for key, value in values.items():
                _apply_control(row, key, value)
            if active is not None:
                row.active = bool(active)
            row.updated_at = m.utcnow()
            return _query(row)

    # -- pipeline controls -------------------------------------------------------------------

    def pipeline_control(self, pipeline: str) -> PipelineControlRecord | None:
        """`pipeline`'s control (None: never set, or cleared)."""
        with self._tx() as s:
            row = s.get(m.PipelineControl, pipeline)
            return None if row is None else _pipeline_control(row)

    def pipeline_controls(self) -> list[PipelineControlRecord]:
        """Every pipeline's control, by pipeline name."""
        stmt = select(m.PipelineControl).order_by(m.PipelineControl.pipeline)
        with self._tx() as s:
            return [_pipeline_control(r) for r in s.scalars(stmt)]

    def set_pipeline_control(
        self,
        pipeline: str,
        *,
        scheduler: str | None,
        latency_bound_ms: float | None = None,
        share: float | None = None,
    ) -> PipelineControlRecord:
        """Replace `pipeline`'s control: its scheduler (None: the worker's configuration or the
        pipeline file decides), the latency bound in milliseconds, which chain_bounded needs
        and no other scheduler takes, and the share of FIFO steps (0 to 1), chain_share's."""
        values = {
            "pipeline": pipeline,
            **scheduler_control(scheduler, latency_bound_ms, share),
            "updated_at": m.utcnow(),
        }
        with self._tx() as s:
            s.execute(upsert(s, m.PipelineControl, values, "pipeline"))
            return _pipeline_control(s.get(m.PipelineControl, pipeline, populate_existing=True))

    def clear_pipeline_control(self, pipeline: str) -> bool:
        """Forget `pipeline`'s control; False if it had none."""
        with self._tx() as s:
            result = s.execute(
                delete(m.PipelineControl).where(m.PipelineControl.pipeline == pipeline)
            )
            return bool(result.rowcount)

    # -- streams and relations as declared ------------------------------------------------

    def upsert_source(self, pipeline: str, stream: Mapping[str, Any] | StreamSpec) -> SourceRecord:
        """Record a stream or relation as `pipeline` declares it: a `StreamSpec`, or its JSON
        (`spec_json.stream_json`: name, is_relation, schema, source, timestamp)."""
        data = stream_json(stream) if isinstance(stream, StreamSpec) else dict(stream)
        try:
            name = str(data["name"])
            schema = [[str(c), str(t)] for c, t in _pairs(data["schema"])]
            source = json_value("source", dict(data["source"]))
        except (KeyError, TypeError, ValueError) as e:
            raise CatalogInputError(f"not a stream spec as JSON: {e}") from None
        with self._tx() as s:
            row = s.scalars(
                select(m.Stream).where(m.Stream.pipeline == pipeline, m.Stream.name == name)
            ).one_or_none()
            if row is None:
                row = m.Stream(pipeline=pipeline, name=name)
                s.add(row)
            row.is_relation = bool(data.get("is_relation", False))
            row.schema = schema
            row.source = source
            row.timestamp = data.get("timestamp")
            row.updated_at = m.utcnow()
            s.flush()
            return _source(row)

    def remove_source(self, pipeline: str, name: str) -> bool:
        with self._tx() as s:
            result = s.execute(
                delete(m.Stream).where(m.Stream.pipeline == pipeline, m.Stream.name == name)
            )
            return bool(result.rowcount)

    def sources(self, pipeline: str | None = None) -> list[SourceRecord]:
        """Declared streams and relations (of one pipeline, or all), in the order recorded."""
        stmt = select(m.Stream).order_by(m.Stream.pipeline, m.Stream.id)
        if pipeline is not None:
            stmt = stmt.where(m.Stream.pipeline == pipeline)
        with self._tx() as s:
            return [_source(r) for r in s.scalars(stmt)]

    def relation_declarations(
        self, relation: str, pipeline: str | None = None
    ) -> list[SourceRecord]:
        """The relations (of `pipeline`, or of any) whose source is catalog relation `relation`."""
        return [
            r
            for r in self.sources(pipeline)
            if r.catalog_relation is not None and r.catalog_relation == relation
        ]

    # -- adjustments and statistics ---------------------------------------------------------

    def log_adjustment(
        self,
        pipeline: str,
        kind: str,
        detail: Mapping[str, Any] | None = None,
        query: str | None = None,
    ) -> int:
        """Log a run-time adjustment (e.g. kind ``window``, detail ``{"from": 600, "to": 300}``)."""
        with self._tx() as s:
            row = m.Adjustment(
                pipeline=pipeline,
                query=query,
                kind=kind,
                detail=json_value("detail", dict(detail or {})),
                at=m.utcnow(),
            )
            s.add(row)
            s.flush()
            return int(row.id)

    def adjustments(
        self, pipeline: str | None = None, query: str | None = None, limit: int | None = None
    ) -> list[AdjustmentRecord]:
        """The adjustment log, oldest first (`limit`: only the newest so many)."""
        stmt = select(m.Adjustment).order_by(m.Adjustment.id.desc())
        if pipeline is not None:
            stmt = stmt.where(m.Adjustment.pipeline == pipeline)
        if query is not None:
            stmt = stmt.where(m.Adjustment.query == query)
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._tx() as s:
            found = [_adjustment(a) for a in s.scalars(stmt)]
        return found[::-1]

    def save_stats(self, data: Any, pipeline: str | None = None) -> int:
        """Store a statistics snapshot (of one pipeline, or of the worker); its id."""
        with self._tx() as s:
            row = m.StatsSnapshot(at=m.utcnow(), pipeline=pipeline, data=json_value("data", data))
            s.add(row)
            s.flush()
            return int(row.id)

    def stats(self, pipeline: str | None = None, limit: int | None = None) -> list[StatsRecord]:
        """Statistics snapshots, oldest first (`limit`: only the newest so many)."""
        stmt = select(m.StatsSnapshot).order_by(m.StatsSnapshot.id.desc())
        if pipeline is not None:
            stmt = stmt.where(m.StatsSnapshot.pipeline == pipeline)
        if limit is not None:
            stmt = stmt.limit(limit)
        with self._tx() as s:
            found = [
                StatsRecord(int(r.id), aware(r.at), r.pipeline, r.data) for r in s.scalars(stmt)
            ]
        return found[::-1]

    # -- plumbing ----------------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        try:
            with self._sessions.begin() as session:
                yield session
        except SQLAlchemyError as e:
            raise self._error(e) from e
        self.outage = None

    def _error(self, e: SQLAlchemyError) -> CatalogError:
        shown = database.shown_url(self.engine.url)
        message = database.describe(e)
        if (
            "no such table" in message
            or getattr(getattr(e, "orig", None), "sqlstate", None) == "42P01"
        ):
            return CatalogError(
                f"the catalog at {shown} is not migrated ({message}); "
                f"run: cq catalog upgrade --catalog {shown}"
            )
        if _unreachable(e):
            reason = database.unreachable_reason(message)
            if self.outage is None:
                self.outage = Outage(self.dependency, "", reason, time.time())
            else:
                self.outage = self.outage.again(reason)
            return CatalogUnavailable(self.outage)
        return CatalogError(f"catalog {shown}: {message}")


def _unreachable(e: SQLAlchemyError) -> bool:
    """Whether a database error says the server cannot be reached now (rather than refusing
    the request): a connection that failed, was lost or timed out; a server shutting down or
    starting up; a pool with no connection to give."""
    if getattr(e, "connection_invalidated", False):
        return True
    return isinstance(
        e,
        sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.DisconnectionError
        | sa_exc.TimeoutError,
    )


def _pairs(schema: Any) -> list[tuple[Any, Any]]:
    if isinstance(schema, Mapping):
        return list(schema.items())
    return [(c, t) for c, t in schema]


# -- ORM rows -> records --------------------------------------------------------------------


def _apply_control(row: m.Query, key: str, value: Any) -> None:
    if key == "qos":
        row.qos = {} if value is None else value
    elif key == "weight":
        row.weight = value
    else:
        row.memory_budget = value


def _one_query(s: Session, pipeline: str, name: str) -> m.Query:
    row = s.scalars(
        select(m.Query).where(m.Query.pipeline == pipeline, m.Query.name == name).with_for_update()
    ).one_or_none()
    if row is None:
        raise CatalogInputError(f"no query {name!r} in pipeline {pipeline!r}")
    return row


def _query(q: m.Query) -> QueryRecord:
    return QueryRecord(
        pipeline=q.pipeline,
        name=q.name,
        cql=q.cql,
        sink=q.sink,
        weight=float(q.weight),
        active=bool(q.active),
        qos=q.qos or {},
        memory_budget=q.memory_budget,
        spec_hash=q.spec_hash,
        start_after=q.start_after,
        status=q.status,
        error=q.error,
        updated_at=aware(q.updated_at),
    )


def _source(r: m.Stream) -> SourceRecord:
    return SourceRecord(
        pipeline=r.pipeline,
        name=r.name,
        is_relation=bool(r.is_relation),
        schema={str(c): str(t) for c, t in r.schema},
        source=r.source,
        timestamp=r.timestamp,
        updated_at=aware(r.updated_at),
    )


def _deployment(d: m.Deployment) -> DeploymentRecord:
    return DeploymentRecord(
        int(d.id), d.pipeline, d.spec_hash, d.revision, d.status, d.error, aware(d.created_at)
    )


def _pipeline_control(r: m.PipelineControl) -> PipelineControlRecord:
    bound = None if r.latency_bound_ms is None else float(r.latency_bound_ms)
    share = None if r.share is None else float(r.share)
    return PipelineControlRecord(r.pipeline, r.scheduler, bound, share, aware(r.updated_at))


def _adjustment(a: m.Adjustment) -> AdjustmentRecord:
    return AdjustmentRecord(int(a.id), a.pipeline, a.query, a.kind, a.detail or {}, aware(a.at))
