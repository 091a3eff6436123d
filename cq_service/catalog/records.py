"""What the catalog repository hands out: plain, frozen values (never ORM objects)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

__all__ = [
    "AdjustmentRecord",
    "ArchiveState",
    "Checkpoint",
    "DeploymentRecord",
    "PipelineControlRecord",
    "QueryRecord",
    "RelationRowRecord",
    "SourceRecord",
    "StatsRecord",
]


@dataclass(frozen=True)
class QueryRecord:
    """A deployed query: its definition, its run-time controls and its status.

    `qos` maps a setting to the range the engine may choose from, e.g. ``{"window": [60, 600]}``;
    `start_after` is the stream time before which a query added to a running worker sees
    nothing (None: from the start)."""

    pipeline: str
    name: str
    cql: str
    sink: Mapping[str, Any] | None
    weight: float
    active: bool
    qos: Mapping[str, Any]
    memory_budget: int | None
    spec_hash: str
    start_after: int | None
    status: str
    error: str | None
    updated_at: datetime


@dataclass(frozen=True)
class SourceRecord:
    """A stream or relation as a deployed pipeline declared it (`schema`: column -> type, in
    order; `source`: the source keys, e.g. ``{"type": "catalog", "name": "Domains"}``)."""

    pipeline: str
    name: str
    is_relation: bool
    schema: Mapping[str, str]
    source: Mapping[str, Any]
    timestamp: str | None
    updated_at: datetime

    @property
    def catalog_relation(self) -> str | None:
        """The catalog relation this relation reads (None unless its source type is catalog)."""
        if not self.is_relation or self.source.get("type") != "catalog":
            return None
        return str(self.source.get("name") or self.name)


class RelationRowRecord(NamedTuple):
    """One stored change of a relation: `op` is ``+`` (insert) or ``-`` (delete)."""

    id: int
    ts: int
    op: str
    row: dict[str, Any]


@dataclass(frozen=True)
class DeploymentRecord:
    id: int
    pipeline: str
    spec_hash: str
    revision: str | None
    status: str  # applied | rejected | removed
    error: str | None  # FILE:LINE:COL: message, for a rejected file
    created_at: datetime


@dataclass(frozen=True)
class PipelineControlRecord:
    """A deployment's run-time control: `scheduler` (None: the worker's configuration or the
    pipeline file decides), for chain_bounded only `latency_bound_ms`, for chain_share only
    `share` (of FIFO steps, 0 to 1)."""

    pipeline: str
    scheduler: str | None
    latency_bound_ms: float | None
    share: float | None
    updated_at: datetime


@dataclass(frozen=True)
class AdjustmentRecord:
    id: int
    pipeline: str
    query: str | None
    kind: str
    detail: Mapping[str, Any]
    at: datetime


@dataclass(frozen=True)
class StatsRecord:
    id: int
    at: datetime
    pipeline: str | None
    data: Any


@dataclass(frozen=True)
class Checkpoint:
    """A worker's at-least-once checkpoint. `offsets` maps ``stream/topic`` to {partition:
    next offset} (partition keys come back as strings, as JSON keeps them); `queries` holds
    per-query data."""

    key: str
    frontier: int | None
    offsets: Mapping[str, Any] = field(default_factory=dict)
    queries: Mapping[str, Any] = field(default_factory=dict)
    updated_at: datetime | None = None


@dataclass(frozen=True)
class ArchiveState:
    """How far a stream of a pipeline is archived (`cq archive`, docs/archive.md).

    `source` is ``kafka`` or ``file``; `run` the number of the last committed run (archive file
    names carry it); `offsets` maps a partition to the next offset to archive (a file source:
    partition 0, the number of the last record read); `max_ts` maps a partition to its largest
    archived _ts; `boundary` is the largest _ts such that every element at or below it is
    archived (None: none yet); `next_position` the next arrival-order timestamp; `file_size`,
    `file_mtime_ns` a file source's when it was archived; `rows`, `dead_letters` totals."""

    pipeline: str
    stream: str
    source: str
    run: int
    offsets: Mapping[int, int] = field(default_factory=dict)
    max_ts: Mapping[int, int] = field(default_factory=dict)
    next_position: int = 0
    boundary: int | None = None
    file_size: int | None = None
    file_mtime_ns: int | None = None
    rows: int = 0
    dead_letters: int = 0
    updated_at: datetime | None = None
