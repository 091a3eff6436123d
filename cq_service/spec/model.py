"""The typed, validated form of a pipeline file (DESIGN §3).

`spec.loader.load_pipeline(path)` builds a `PipelineSpec` or raises `SpecErrors` listing every
problem found. Everything here is immutable; paths are already resolved against the pipeline
file's folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cq_service.errors import Span
from cq_service.types import DataType

__all__ = [
    "DEFAULT_ARCHIVE_DIR",
    "DEFAULT_RUNNER",
    "DEFAULT_SCHEDULER",
    "LATENCY_BOUNDED_SCHEDULER",
    "RUNNERS",
    "SCHEDULERS",
    "SHARE_SCHEDULER",
    "TIME_UNITS",
    "ArchiveSpec",
    "FieldSpec",
    "PipelineSpec",
    "QosSpec",
    "QuerySpec",
    "ResourcesSpec",
    "SinkSpec",
    "SourceSpec",
    "StreamSpec",
    "WindowRange",
]

# Length of one unit in nanoseconds; keys are the accepted `time_unit` values.
TIME_UNITS: Mapping[str, int] = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}

# The scheduling policies a pipeline file may name in `resources.scheduler` (the one list: the
# JSON Schema's enum must equal it, a unit test checks; the engine maps each name to a policy).
SCHEDULERS: tuple[str, ...] = (
    "fifo",
    "round_robin",
    "greedy",
    "chain",
    "chain_bounded",
    "chain_share",
)
DEFAULT_SCHEDULER = "chain"
# The scheduler that takes a `latency_bound` (and needs one).
LATENCY_BOUNDED_SCHEDULER = "chain_bounded"
# The scheduler that takes a `share` of FIFO steps, 0 to 1 (and needs one).
SHARE_SCHEDULER = "chain_share"


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: DataType
    span: Span = field(default=Span(), compare=False)


@dataclass(frozen=True)
class SourceSpec:
    """Where a stream's or relation's elements come from.

    `type` is ``file`` for now (later: ``kafka``, ``generator``); `path` is absolute; `format`
    is ``csv``, ``jsonl`` or ``parquet``; `options` holds any further keys (e.g. csv
    ``delimiter``, ``header``)."""

    type: str
    path: str | None = None
    format: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    span: Span = field(default=Span(), compare=False)


@dataclass(frozen=True)
class SinkSpec:
    """Where results go: ``file`` (`path`, `format` jsonl/csv/parquet), ``stdout``, ``blackhole``."""

    type: str
    path: str | None = None
    format: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    span: Span = field(default=Span(), compare=False)


# The k-constraints a stream (or a view's result stream) may declare (issue 26; docs/linear-road.md,
# "Constraints"): referential integrity, clustered arrival, ordered arrival.
CONSTRAINT_KINDS: tuple[str, ...] = ("rids", "ca", "oa")


@dataclass(frozen=True)
class ConstraintSpec:
    """A promise a stream keeps, with adherence `k` (None: ``k: auto``, learned by k-Mon).

    ``rids``: each tuple's partner ``references`` (stream, column) — the one side of a
    many-one join on `attribute` = that column — arrives within k arrivals after it, if after it at
    all. ``ca``: at most k tuples with another value of `attribute` between two with the same value.
    ``oa``: a tuple arriving k+1 or more places after another has an `attribute` at least as large."""

    kind: str
    attribute: str
    k: int | None
    references: tuple[str, str] | None = None
    span: Span = field(default=Span(), compare=False)

    def describe(self) -> str:
        k = "auto" if self.k is None else str(self.k)
        ref = f" -> {self.references[0]}.{self.references[1]}" if self.references else ""
        return f"{self.kind.upper()}(k={k}) on {self.attribute}{ref}"


@dataclass(frozen=True)
class StreamSpec:
    """A stream (``is_relation`` False) or a stored relation (True).

    `timestamp` names the record field carrying application time (None: arrival order, the
    0-based position of the record in its source). The tuple holds the `schema` fields only.
    `max_delay` (in time_unit) bounds how far out of order elements may arrive; later ones
    follow `late`. `heartbeat` (field, offset), when set, is a promise each record makes: no
    later element has a timestamp below its `field` + `offset` (an element that breaks it is
    late too). A relation's records may carry an `_op` field (``+`` insert, ``-`` delete).
    """

    name: str
    schema: tuple[FieldSpec, ...]
    source: SourceSpec
    timestamp: str | None = None
    is_relation: bool = False
    max_delay: int = 0
    late: Literal["drop", "dead_letter"] = "drop"
    heartbeat: tuple[str, int] | None = None
    constraints: tuple[ConstraintSpec, ...] = ()
    span: Span = field(default=Span(), compare=False)


@dataclass(frozen=True)
class WindowRange:
    """The sizes, in time_unit, the resource manager may give a query's Range windows: those on
    `stream` (a FROM item's name or alias), or every one when `stream` is None."""

    stream: str | None
    low: int
    high: int


@dataclass(frozen=True)
class QosSpec:
    """How far the resource manager may adjust a query (its `qos`; brief-costmodel §4).

    `granularity` is a ladder of time granularities in time_unit, finest first, each dividing
    the next; the query runs at any rung of it. No ranges: the query is never adjusted."""

    windows: tuple[WindowRange, ...] = ()
    granularity: tuple[int, ...] = ()
    span: Span = field(default=Span(), compare=False)

    @property
    def adjustable(self) -> bool:
        return bool(self.windows or self.granularity)

    def window_range(self, names: tuple[str, ...]) -> WindowRange | None:
        """The range of the window on the FROM item called `names` (alias and name, any
        case): the one naming it, else the one for every window, else None."""
        low = {n.lower() for n in names}
        named = [r for r in self.windows if r.stream is not None and r.stream.lower() in low]
        ranges = named or [r for r in self.windows if r.stream is None]
        return ranges[0] if ranges else None


@dataclass(frozen=True)
class QuerySpec:
    """A named CQL query. Without a sink it is a view other queries may read by name.

    `cql_positions[i]` is the (line, column) in the pipeline file of character i of `cql`, so a
    CQL error inside the query is reported where the user wrote it."""

    name: str
    cql: str
    sink: SinkSpec | None = None
    weight: float = 1.0
    qos: QosSpec = QosSpec()
    cql_positions: tuple[tuple[int, int], ...] = ()
    constraints: tuple[ConstraintSpec, ...] = ()  # promises the view's result stream keeps
    span: Span = field(default=Span(), compare=False)

    def position_of(self, offset: int) -> tuple[int, int]:
        """File (line, column) of character `offset` of the query text."""
        if not self.cql_positions:
            return (self.span.line, self.span.col)
        offset = max(0, min(offset, len(self.cql_positions) - 1))
        return self.cql_positions[offset]


# What runs a pipeline's queries: the embedded engine, or Spark Structured Streaming.
# `resources.shared_join`: how queries whose joins differ only in their windows run
# (plan/shared_joins.py): one shared join whose work is ordered by MQT, SWF or LWO, or "off",
# each query planned alone.
SHARED_JOINS = ("mqt", "swf", "lwo", "off")
DEFAULT_SHARED_JOIN = "mqt"

# `resources.filter_order`: how each selection orders its conjuncts (adaptive/filter_order/,
# docs/adaptive.md "Filter ordering"): A-Greedy or a variant, or "static", as written.
FILTER_ORDERS = ("a-greedy", "sweep", "independent", "local-swaps", "static")
DEFAULT_FILTER_ORDER = "a-greedy"

# `resources.join`: how a join of three or more relations runs (plan/mjoins.py, docs/joins.md):
# a tree of binary joins, one n-way MJoin, one with A-Caching's subresult caches, or "auto"
# (the tree until the cost model chooses).
JOINS = ("auto", "mjoin", "mjoin-caching", "tree")
DEFAULT_JOIN = "auto"

RUNNERS = ("embedded", "spark")
DEFAULT_RUNNER = "embedded"


@dataclass(frozen=True)
class ResourcesSpec:
    """How the engine shares its resources among the queries: the `resources` section.

    `scheduler` is one of `SCHEDULERS`. `latency_bound` (in time_unit) is set exactly when the
    scheduler is ``chain_bounded``: Chain, but no element may wait longer than the bound.
    `share` (0 to 1) is set exactly when the scheduler is ``chain_share``: the share of
    scheduling steps given to the oldest waiting input (FIFO), the rest to Chain.
    `span` is where the section was written (line 1 when the file has none)."""

    scheduler: str = DEFAULT_SCHEDULER
    latency_bound: int | None = None
    share: float | None = None
    memory_budget: int | None = None  # bytes the deployment's state and queues may take
    runner: str = DEFAULT_RUNNER  # what runs the queries: one of RUNNERS (docs/spark-runner.md)
    shared_join: str = DEFAULT_SHARED_JOIN  # one of SHARED_JOINS (docs/scheduling.md)
    filter_order: str = DEFAULT_FILTER_ORDER  # one of FILTER_ORDERS (docs/adaptive.md)
    join: str = DEFAULT_JOIN  # one of JOINS (docs/joins.md)
    # SysStream's interval in time_unit (None: one second; spec/sys_stream.py)
    statistics_interval: int | None = None
    span: Span = field(default=Span(), compare=False)

    def __post_init__(self) -> None:
        if self.runner not in RUNNERS:
            raise ValueError(
                f"unknown runner {self.runner!r} (expected one of: {', '.join(RUNNERS)})"
            )
        if self.shared_join not in SHARED_JOINS:
            raise ValueError(
                f"unknown shared_join {self.shared_join!r} "
                f"(expected one of: {', '.join(SHARED_JOINS)})"
            )
        if self.filter_order not in FILTER_ORDERS:
            raise ValueError(
                f"unknown filter_order {self.filter_order!r} "
                f"(expected one of: {', '.join(FILTER_ORDERS)})"
            )
        if self.join not in JOINS:
            raise ValueError(
                f"unknown join {self.join!r} (expected one of: {', '.join(JOINS)})"
            )
        if self.scheduler not in SCHEDULERS:
            raise ValueError(
                f"unknown scheduler {self.scheduler!r} (expected one of: {', '.join(SCHEDULERS)})"
            )
        bounded = self.scheduler == LATENCY_BOUNDED_SCHEDULER
        if bounded and (self.latency_bound is None or self.latency_bound <= 0):
            raise ValueError(f"scheduler {self.scheduler} needs a latency_bound > 0")
        if not bounded and self.latency_bound is not None:
            raise ValueError(
                f"latency_bound only applies to scheduler {LATENCY_BOUNDED_SCHEDULER}, "
                f"not {self.scheduler}"
            )
        shared = self.scheduler == SHARE_SCHEDULER
        if shared and (self.share is None or not 0 <= self.share <= 1):
            raise ValueError(f"scheduler {self.scheduler} needs a share from 0 to 1")
        if not shared and self.share is not None:
            raise ValueError(
                f"share only applies to scheduler {SHARE_SCHEDULER}, not {self.scheduler}"
            )


# The archive's folder when the `archive` section does not name one: beside the pipeline file.
DEFAULT_ARCHIVE_DIR = "archive"


@dataclass(frozen=True)
class ArchiveSpec:
    """Where `cq archive` copies the pipeline's streams to (Parquet) and how often the worker
    does it: the `archive` section (docs/archive.md).

    `path` is absolute (the section's path resolved against the pipeline file's folder, or
    `DEFAULT_ARCHIVE_DIR` beside it); `every` is the worker's schedule in wall-clock seconds, or
    None: archived only on demand. `span` is where the section was written (line 1 without one)."""

    path: str
    every: float | None = None
    span: Span = field(default=Span(), compare=False)


@dataclass(frozen=True)
class PipelineSpec:
    version: int
    name: str
    time_unit: str
    streams: Mapping[str, StreamSpec]
    relations: Mapping[str, StreamSpec]
    queries: Mapping[str, QuerySpec]  # in file order
    dead_letter: SinkSpec
    path: str = ""  # the pipeline file
    base_dir: str = ""  # the folder relative paths were resolved against
    resources: ResourcesSpec = ResourcesSpec()  # the `resources` section, or its defaults
    archive: ArchiveSpec | None = None  # the `archive` section (None: archive/ beside the file)

    @property
    def time_unit_ns(self) -> int:
        return TIME_UNITS[self.time_unit]
