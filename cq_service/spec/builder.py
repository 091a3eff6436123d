"""Pass 3 of `loader`: a schema-valid document to a typed `PipelineSpec`, with the checks the
schema cannot express (names unique across streams, relations and queries, case-insensitively;
the timestamp column's type; source files that must exist; formats known from the extension;
durations in whole time units; `resources.latency_bound` exactly with chain_bounded and
`resources.share` exactly with chain_share; QoS ranges
and granularity ladders; sizes of memory budgets), every problem collected with its position.

This module builds streams, relations, queries, QoS, resources and the archive, and checks the
names; sources and sinks are built by `endpoints`, durations and sizes read by `quantities`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path as FsPath
from typing import Any

from cq_service.errors import Span, SpecError
from cq_service.spec.constraints import build_constraints, check_references
from cq_service.spec.endpoints import Endpoints
from cq_service.spec.model import (
    DEFAULT_ARCHIVE_DIR,
    DEFAULT_FILTER_ORDER,
    DEFAULT_JOIN,
    DEFAULT_RUNNER,
    DEFAULT_SCHEDULER,
    DEFAULT_SHARED_JOIN,
    LATENCY_BOUNDED_SCHEDULER,
    SHARE_SCHEDULER,
    ArchiveSpec,
    FieldSpec,
    PipelineSpec,
    QosSpec,
    QuerySpec,
    ResourcesSpec,
    StreamSpec,
    WindowRange,
)
from cq_service.spec.positions import Path, YamlDocument
from cq_service.spec.quantities import parse_duration, parse_size
from cq_service.spec.schema import ENTITIES, describe_path
from cq_service.spec.sys_stream import SYS_STREAM, is_sys_stream
from cq_service.types import DataType, parse_type

_RESERVED_COLUMNS = ("_ts", "_op")
_TIMESTAMP_TYPES = (DataType.INT, DataType.TIMESTAMP)


# --- checks after the schema -------------------------------------------------------------------


@dataclass(frozen=True)
class _Name:
    kind: str  # "stream", "relation", "query"
    name: str
    span: Span


class SpecBuilder:
    """Builds the typed spec from a schema-valid document, collecting semantic errors."""

    def __init__(self, doc: YamlDocument, base_dir: FsPath):
        self.doc = doc
        self.base_dir = base_dir
        self.errors: list[SpecError] = []
        self.time_unit: str = doc.value.get("time_unit", "ms")
        self.endpoints = Endpoints(doc, base_dir, self.time_unit, self._error, self._duration)

    def build(self, path: str) -> PipelineSpec:
        value = self.doc.value
        streams = {
            name: self._stream(name, ("streams", name), False)
            for name in value.get("streams", {}) or {}
        }
        relations = {
            name: self._stream(name, ("relations", name), True)
            for name in value.get("relations", {}) or {}
        }
        queries = {name: self._query(name) for name in value.get("queries", {}) or {}}
        self._check_names()
        check_references(
            {n: s.constraints for n, s in streams.items()}
            | {n: q.constraints for n, q in queries.items()},
            {**streams, **relations},
            list(queries),
            self._error,
        )
        return PipelineSpec(
            version=int(value["version"]),
            name=value["name"],
            time_unit=self.time_unit,
            streams=streams,
            relations=relations,
            queries=queries,
            dead_letter=self.endpoints.dead_letter(value["name"]),
            path=path,
            base_dir=str(self.base_dir),
            resources=self._resources(),
            archive=self._archive(),
        )

    def _error(self, message: str, span: Span) -> None:
        self.errors.append(SpecError(message, span))

    # streams and relations

    def _stream(self, name: str, path: Path, is_relation: bool) -> StreamSpec:
        raw = self.doc.value[path[0]][name]
        what = describe_path(path)
        schema = self._fields(raw["schema"], (*path, "schema"), what)
        timestamp = raw.get("timestamp")
        if timestamp is not None:
            self._check_timestamp(timestamp, schema, path, what)
        source = self.endpoints.source(raw["source"], (*path, "source"), what, name)
        if source.type == "kafka":
            self.endpoints.check_kafka_source(source, schema, timestamp, path)
        max_delay = 0
        if "max_delay" in raw:
            max_delay = self._duration(raw["max_delay"], (*path, "max_delay"))
        heartbeat = None
        if "heartbeat" in raw:
            heartbeat = self._heartbeat(raw["heartbeat"], schema, (*path, "heartbeat"), what)
        return StreamSpec(
            name=name,
            schema=schema,
            source=source,
            timestamp=timestamp,
            is_relation=is_relation,
            max_delay=max_delay,
            late=raw.get("late", "drop"),
            heartbeat=heartbeat,
            constraints=build_constraints(
                self.doc, raw.get("constraints", ()), (*path, "constraints"), what, schema,
                self._error,
            ),
            span=self.doc.span(path, key=True),
        )

    def _heartbeat(
        self, raw: Mapping[str, object], schema: tuple[FieldSpec, ...], path: Path, what: str
    ) -> tuple[str, int] | None:
        """`heartbeat: {field: F, offset: D}`: F an int or timestamp column of the schema."""
        name = raw["field"]
        types = {f.name: f.type for f in schema}
        if name not in types:
            self._error(
                f"{what}: heartbeat field {name!r} is not in its schema "
                f"({', '.join(types) or 'no columns'})",
                self.doc.span((*path, "field")),
            )
            return None
        if types[name] not in _TIMESTAMP_TYPES:
            self._error(
                f"{what}: heartbeat field {name!r} must be an int or timestamp column, "
                f"not {types[name].value}",
                self.doc.span((*path, "field")),
            )
            return None
        offset = self._duration(raw["offset"], (*path, "offset")) if "offset" in raw else 0
        return name, offset

    def _fields(self, columns: Mapping[str, str], path: Path, what: str) -> tuple[FieldSpec, ...]:
        fields = []
        seen: dict[str, FieldSpec] = {}
        for column, type_name in columns.items():
            field = FieldSpec(
                column, parse_type(type_name), self.doc.span((*path, column), key=True)
            )
            folded = column.lower()
            if folded in _RESERVED_COLUMNS:
                self._error(f"column name '{column}' in {what} is reserved", field.span)
            elif folded in seen:
                first = seen[folded]
                self._error(
                    f"column '{column}' in {what} has the same name as column '{first.name}' "
                    f"(line {first.span.line}); column names are case-insensitive",
                    field.span,
                )
            seen.setdefault(folded, field)
            fields.append(field)
        return tuple(fields)

    def _check_timestamp(
        self, timestamp: str, schema: tuple[FieldSpec, ...], path: Path, what: str
    ) -> None:
        for field in schema:
            if field.name == timestamp and field.type not in _TIMESTAMP_TYPES:
                self._error(
                    f"timestamp column '{timestamp}' of {what} has type {field.type}; "
                    "it must be int or timestamp",
                    self.doc.span((*path, "schema", field.name)),
                )

    def _duration(self, value: int | str, path: Path) -> int:
        if isinstance(value, int | float):
            return int(value)
        try:
            return parse_duration(value, self.time_unit)
        except ValueError as exc:
            self._error(f"{describe_path(path)}: {exc}", self.doc.span(path))
            return 0

    # queries

    def _query(self, name: str) -> QuerySpec:
        path: Path = ("queries", name)
        raw = self.doc.value["queries"][name]
        sink = None
        if "sink" in raw:
            sink = self.endpoints.sink(raw["sink"], (*path, "sink"), f"query '{name}'")
        return QuerySpec(
            name=name,
            cql=raw["cql"],
            sink=sink,
            weight=float(raw.get("weight", 1.0)),
            qos=self._qos(raw["qos"], (*path, "qos")) if "qos" in raw else QosSpec(),
            cql_positions=self.doc.char_positions((*path, "cql")) or (),
            constraints=build_constraints(
                self.doc, raw.get("constraints", ()), (*path, "constraints"),
                f"query '{name}'", None, self._error,
            ),
            span=self.doc.span(path, key=True),
        )

    def _qos(self, raw: Mapping[str, Any], path: Path) -> QosSpec:
        value = raw.get("window")
        where: Path = (*path, "window")
        if isinstance(value, dict) and not value:
            self._error(f"{describe_path(where)}: name at least one FROM item", self.doc.span(where))
        ranges: list[tuple[str | None, Path, Any]] = []  # (FROM item, None: all; path; range)
        if isinstance(value, list):
            ranges = [(None, where, value)]
        elif isinstance(value, dict):
            ranges = [(str(k), (*where, k), v) for k, v in value.items()]
        windows = [
            WindowRange(stream, *r)
            for stream, at, bounds in ranges
            if (r := self._range(bounds, at)) is not None
        ]
        ladder: tuple[int, ...] = ()
        if "granularity" in raw:
            ladder = self._ladder(raw["granularity"], (*path, "granularity"))
        return QosSpec(tuple(windows), ladder, span=self.doc.span(path, key=True))

    def _range(self, value: Any, path: Path) -> tuple[int, int] | None:
        """[min, max] of window sizes in time_unit, 0 < min <= max; None after an error."""
        span = self.doc.span(path)
        if not isinstance(value, list):
            self._error(f"{describe_path(path)} must be a range [min, max]", span)
            return None
        if len(value) != 2:
            self._error(f"{describe_path(path)} must be a range [min, max], got {len(value)} values",
                        span)
            return None
        before = len(self.errors)
        low, high = (self._duration(v, (*path, k)) for k, v in enumerate(value))
        if len(self.errors) > before:
            return None
        if low <= 0 or low > high:
            self._error(f"{describe_path(path)} must have 0 < min <= max, got [{low}, {high}] "
                        f"{self.time_unit}", span)
            return None
        return low, high

    def _ladder(self, value: list[Any], path: Path) -> tuple[int, ...]:
        """Granularities finest first, each > 0 and dividing the next; () after an error."""
        before = len(self.errors)
        rungs = [self._duration(v, (*path, k)) for k, v in enumerate(value)]
        if len(self.errors) > before:
            return ()
        if rungs[0] <= 0:
            self._error(f"{describe_path(path)}: the finest granularity must be > 0",
                        self.doc.span((*path, 0)))
            return ()
        for k in range(1, len(rungs)):
            if rungs[k] <= rungs[k - 1] or rungs[k] % rungs[k - 1]:
                self._error(
                    f"{describe_path(path)}: each granularity must be a larger multiple of the one "
                    f"before it (finest first), but {rungs[k]} {self.time_unit} follows "
                    f"{rungs[k - 1]} {self.time_unit}",
                    self.doc.span((*path, k)),
                )
                return ()
        return tuple(rungs)

    # resources

    def _resources(self) -> ResourcesSpec:
        """The `resources` section; its defaults without one, or after an error (reported)."""
        path: Path = ("resources",)
        raw = self.doc.value.get("resources")
        if raw is None:
            return ResourcesSpec(span=Span(1, 1, file=self.doc.file))
        return dataclasses.replace(
            self._scheduling(raw, path),
            memory_budget=self._size(raw["memory_budget"], (*path, "memory_budget"))
            if "memory_budget" in raw
            else None,
            runner=raw.get("runner", DEFAULT_RUNNER),
            shared_join=raw.get("shared_join", DEFAULT_SHARED_JOIN),
            filter_order=raw.get("filter_order", DEFAULT_FILTER_ORDER),
            join=raw.get("join", DEFAULT_JOIN),
            statistics_interval=self._positive_duration(
                raw["statistics_interval"], (*path, "statistics_interval")
            )
            if "statistics_interval" in raw
            else None,
        )

    def _scheduling(self, raw: Mapping[str, Any], path: Path) -> ResourcesSpec:
        """The section's scheduler, latency bound and share (the defaults after an error)."""
        span = self.doc.span(path, key=True)
        scheduler = raw.get("scheduler", DEFAULT_SCHEDULER)
        pairs = (
            ("share", SHARE_SCHEDULER, "a share of FIFO steps from 0 to 1, e.g. share: 0.3"),
            ("latency_bound", LATENCY_BOUNDED_SCHEDULER, "a latency_bound, e.g. latency_bound: 50 ms"),
        )
        for key, owner, example in pairs:  # each setting exactly with its scheduler
            if scheduler == owner and key not in raw:
                self._error(
                    f"resources: scheduler {scheduler} needs {example}",
                    self.doc.span((*path, "scheduler")),
                )
                return ResourcesSpec(span=span)
            if scheduler != owner and key in raw:
                chosen = scheduler if "scheduler" in raw else f"{scheduler} (the default)"
                self._error(
                    f"{key} in resources only applies to scheduler {owner}, "
                    f"but the scheduler is {chosen}",
                    self.doc.span((*path, key), key=True),
                )
                return ResourcesSpec(span=span)
        if scheduler == SHARE_SCHEDULER:
            share = float(raw["share"])
            if not 0 <= share <= 1:  # NaN: the schema's range lets it by
                self._error(
                    f"share of resources must be a number from 0 to 1, got {raw['share']}",
                    self.doc.span((*path, "share")),
                )
                return ResourcesSpec(span=span)
            return ResourcesSpec(scheduler=scheduler, share=share, span=span)
        if scheduler != LATENCY_BOUNDED_SCHEDULER:
            return ResourcesSpec(scheduler=scheduler, span=span)
        bound = self._positive_duration(raw["latency_bound"], (*path, "latency_bound"))
        if bound is None:
            return ResourcesSpec(span=span)
        return ResourcesSpec(scheduler=scheduler, latency_bound=bound, span=span)

    def _size(self, value: int | str, path: Path) -> int | None:
        """A size in bytes: an integer, or a number with B, KB, MiB, ... (1 KB = 1000 B, 1 KiB =
        1024 B); None after reporting why not."""
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except ValueError as exc:
            self._error(f"{describe_path(path)}: {exc}", self.doc.span(path))
            return None


    def _positive_duration(self, value: int | str, path: Path) -> int | None:
        """A duration as a whole number of time_unit > 0; None after reporting why not."""
        before = len(self.errors)
        bound = self._duration(value, path)
        if len(self.errors) > before:
            return None
        if bound <= 0:
            self._error(f"{describe_path(path)} must be > 0, got '{value}'", self.doc.span(path))
            return None
        return bound

    # archive

    def _archive(self) -> ArchiveSpec | None:
        """The `archive` section (None without one): its folder made absolute, its schedule in
        wall-clock seconds (at least one)."""
        path: Path = ("archive",)
        raw = self.doc.value.get("archive")
        if raw is None:
            return None
        folder = self.base_dir / str(raw.get("path", DEFAULT_ARCHIVE_DIR))
        every = None
        if "every" in raw:
            try:
                every = parse_duration(str(raw["every"]), "ns") / 1e9
            except ValueError as exc:
                self._error(f"every of the archive: {exc}", self.doc.span((*path, "every")))
            else:
                if every < 1:
                    self._error(
                        f"every of the archive must be at least 1 second, got '{raw['every']}'",
                        self.doc.span((*path, "every")),
                    )
                    every = None
        return ArchiveSpec(
            path=str(folder.resolve()), every=every, span=self.doc.span(path, key=True)
        )

    # names

    def _check_names(self) -> None:
        """Stream, relation and query names share one case-insensitive namespace."""
        names = [
            _Name(ENTITIES[section], name, self.doc.span((section, name), key=True))
            for section in ENTITIES
            for name in self.doc.value.get(section, {}) or {}
        ]
        names.sort(key=lambda n: (n.span.line, n.span.col))
        first: dict[str, _Name] = {}
        for entry in names:
            if is_sys_stream(entry.name):
                self._error(
                    f"{entry.kind} name '{entry.name}' is reserved: {SYS_STREAM} is the engine's "
                    f"statistics stream, which every query may read without declaring it",
                    entry.span,
                )
                continue
            earlier = first.setdefault(entry.name.lower(), entry)
            if earlier is entry:
                continue
            same = (
                "the same name"
                if earlier.name == entry.name
                else "the same name (case-insensitively)"
            )
            self._error(
                f"{entry.kind} '{entry.name}' has {same} as {earlier.kind} '{earlier.name}' "
                f"(line {earlier.span.line}); streams, relations and queries share one namespace",
                entry.span,
            )
