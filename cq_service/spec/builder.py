"""Pass 3 of `loader`: a schema-valid document to a typed `PipelineSpec`, with the checks the
schema cannot express (names unique across streams, relations and queries, case-insensitively;
the timestamp column's type; source files that must exist; formats known from the extension;
durations in whole time units; `resources.latency_bound` exactly with chain_bounded; QoS ranges
and granularity ladders; sizes of memory budgets), every problem collected with its position.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path as FsPath
from typing import Any

from cq_service.errors import Span, SpecError
from cq_service.spec.model import (
    DEFAULT_ARCHIVE_DIR,
    DEFAULT_RUNNER,
    DEFAULT_SCHEDULER,
    LATENCY_BOUNDED_SCHEDULER,
    TIME_UNITS,
    ArchiveSpec,
    FieldSpec,
    PipelineSpec,
    QosSpec,
    QuerySpec,
    ResourcesSpec,
    SinkSpec,
    SourceSpec,
    StreamSpec,
    WindowRange,
)
from cq_service.spec.positions import Path, YamlDocument
from cq_service.spec.schema import ENTITIES, definite, describe_path
from cq_service.types import DataType, parse_type

# The keys of a generator source (the schema checks their types).
GENERATOR_OPTIONS = ("generator", "table", "events", "seed", "rate", "pace")
# The keys of a catalog source (relations only: rows stored in the SQL catalog).
CATALOG_OPTIONS = ("name", "url")
# The keys of a kafka source and sink (the schema checks their types; io/kafka.py reads them
# and rejects any other).
KAFKA_SOURCE_OPTIONS = (
    "topic",
    "bootstrap_servers",
    "group",
    "key",
    "dead_letter_topic",
    "start",
    "time",
    "idle_timeout",
    "client",
    "consumer",
)
KAFKA_SINK_OPTIONS = ("topic", "bootstrap_servers", "key", "client", "producer")

# File extension -> format, for sources and sinks that do not say.
FORMAT_EXTENSIONS: Mapping[str, str] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}

# Duration unit spellings (lower case) -> nanoseconds.
_DURATION_UNITS: Mapping[str, int] = {
    **{u: 1 for u in ("ns", "nanosecond", "nanoseconds")},
    **{u: 1_000 for u in ("us", "microsecond", "microseconds")},
    **{u: 1_000_000 for u in ("ms", "millisecond", "milliseconds")},
    **{u: 1_000_000_000 for u in ("s", "sec", "secs", "second", "seconds")},
    **{u: 60_000_000_000 for u in ("min", "mins", "minute", "minutes")},
    **{u: 3_600_000_000_000 for u in ("h", "hour", "hours")},
    **{u: 86_400_000_000_000 for u in ("d", "day", "days")},
}
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$")
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|B)?\s*$")
_SIZE_UNITS: Mapping[str, int] = {
    "B": 1,
    **{f"{p}B": 1000 ** (k + 1) for k, p in enumerate("KMGT")},
    **{f"{p}iB": 1024 ** (k + 1) for k, p in enumerate("KMGT")},
}

_RESERVED_COLUMNS = ("_ts", "_op")
_TIMESTAMP_TYPES = (DataType.INT, DataType.TIMESTAMP)


def parse_duration(text: str, time_unit: str) -> int:
    """A duration such as ``"5 seconds"`` or ``"500 ms"`` as a whole number of `time_unit`.

    Raises ValueError for an unknown unit or a duration that is not a whole number of units.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"'{text}' is not a duration such as '5 seconds' or '500 ms'")
    number, unit = match.groups()
    unit_ns = _DURATION_UNITS.get(unit.lower())
    if unit_ns is None:
        raise ValueError(
            f"unknown unit '{unit}' in duration '{text.strip()}' "
            "(use ns, us, ms, s, min, h, d or their names, e.g. 'seconds')"
        )
    units = Fraction(number) * unit_ns / TIME_UNITS[time_unit]
    if units.denominator != 1:
        raise ValueError(f"duration '{text.strip()}' is not a whole number of {time_unit}")
    return int(units)


def _relative_sqlite(url: str, base_dir: FsPath) -> str:
    """A catalog URL with a relative SQLite path (``sqlite:///cat.db`` or a bare path) made
    absolute against `base_dir`; other URLs as they are."""
    prefix = "sqlite:///"
    if url.startswith(prefix):
        rest = url[len(prefix) :]
    elif "://" not in url:
        rest = url
    else:
        return url
    where, sep, query = rest.partition("?")
    if not where or where.startswith(("/", "file:")) or where == ":memory:":
        return url
    return f"{prefix}{(base_dir / where).resolve()}{sep}{query}"


def _brokers(raw: Mapping[str, Any]) -> str:
    """A kafka source's or sink's `bootstrap_servers` as written, normalised ("" for the
    default), to tell whether two of them name the same cluster."""
    servers = raw.get("bootstrap_servers")
    if servers is None:
        return ""
    items = servers.split(",") if isinstance(servers, str) else servers
    return ",".join(sorted(str(s).strip() for s in items))


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
        self.sources: dict[str, str] = {}  # absolute source path -> owner description
        self.sinks: dict[str, tuple[str, Span]] = {}  # absolute sink path -> (owner, span)
        self.topics: dict[tuple[str, str], str] = {}  # (brokers, source topic) -> owner

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
        return PipelineSpec(
            version=int(value["version"]),
            name=value["name"],
            time_unit=self.time_unit,
            streams=streams,
            relations=relations,
            queries=queries,
            dead_letter=self._dead_letter(value["name"]),
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
        source = self._source(raw["source"], (*path, "source"), what, name)
        if source.type == "kafka":
            self._check_kafka_source(source, schema, timestamp, path)
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

    def _source(self, raw: Mapping[str, Any], path: Path, owner: str, name: str) -> SourceSpec:
        file_path, fmt = self._file(raw, path, "source")
        options: dict[str, Any] = {}
        for key in raw:
            if key in CATALOG_OPTIONS:
                wrong, kind = raw.get("type") != "catalog", "catalog"
            elif key in KAFKA_SOURCE_OPTIONS:
                wrong, kind = raw.get("type") != "kafka", "kafka"
            else:
                wrong = (key in GENERATOR_OPTIONS) != (raw.get("type") == "generator")
                kind = "generator" if key in GENERATOR_OPTIONS else "file"
            if wrong and key not in ("type",):
                self._error(
                    f"'{key}' only applies to {kind} sources, "
                    f"but {definite(describe_path(path))} is of type {raw.get('type')}",
                    self.doc.span((*path, key), key=True),
                )
        if raw.get("type") == "catalog":
            options = self._catalog_options(raw, path, owner, name)
        elif raw.get("type") == "kafka":
            options = self._kafka_source_options(raw, path, owner, name)
        elif raw.get("type") == "generator":
            options = {k: raw[k] for k in GENERATOR_OPTIONS if k in raw}
            options.setdefault("seed", 0)
            options.setdefault("rate", 10_000)
        elif fmt == "csv":
            options = {"delimiter": raw.get("delimiter", ","), "header": raw.get("header", True)}
        elif fmt is not None:
            for key in ("delimiter", "header"):
                if key in raw:
                    self._error(
                        f"'{key}' only applies to csv files, but {definite(describe_path(path))} is {fmt}",
                        self.doc.span((*path, key), key=True),
                    )
        if file_path is not None:
            self._check_exists(file_path, fmt, raw["path"], (*path, "path"), owner)
            self.sources.setdefault(file_path, owner)
        return SourceSpec(
            type=raw["type"],
            path=file_path,
            format=fmt,
            options=options,
            span=self.doc.span(path, key=True),
        )

    def _catalog_options(
        self, raw: Mapping[str, Any], path: Path, owner: str, name: str
    ) -> dict[str, Any]:
        """A catalog source: the catalog relation's `name`, the catalog `url` (None: the
        default, chosen when read) and the reading `pipeline` (it sees the shared rows and its
        own). Relations only."""
        if path[0] != "relations":
            self._error(
                f"{owner}: source type 'catalog' is for relations only "
                "(a stream cannot be read from the catalog)",
                self.doc.span((*path, "type")),
            )
        url = raw.get("url")
        return {
            "name": raw.get("name", name),
            "url": None if url is None else _relative_sqlite(url, self.base_dir),
            "pipeline": self.doc.value["name"],
        }

    def _kafka_source_options(
        self, raw: Mapping[str, Any], path: Path, owner: str, name: str
    ) -> dict[str, Any]:
        """A kafka source's options as written, the consumer `group` defaulting to
        ``cq.<pipeline>.<stream>`` and `idle_timeout` in seconds (io/kafka.py: the rest)."""
        options = {k: raw[k] for k in KAFKA_SOURCE_OPTIONS if k in raw}
        options.setdefault("group", f"cq.{self.doc.value['name']}.{name}")
        if "idle_timeout" in raw:
            units = self._duration(raw["idle_timeout"], (*path, "idle_timeout"))
            options["idle_timeout"] = units * TIME_UNITS[self.time_unit] / 1e9
        self.topics.setdefault((_brokers(raw), raw["topic"]), owner)
        return options

    def _check_kafka_source(
        self, source: SourceSpec, schema: tuple[FieldSpec, ...], timestamp: str | None, path: Path
    ) -> None:
        """A kafka source's `key` names a schema column; `time: record` fills the timestamp."""
        what = definite(describe_path((*path, "source")))
        key = source.options.get("key")
        columns = [f.name for f in schema]
        if key is not None and key not in columns:
            self._error(
                f"key {key!r} of {what} is not a column of its schema ({', '.join(columns)})",
                self.doc.span((*path, "source", "key")),
            )
        if source.options.get("time") == "record" and timestamp is None:
            self._error(
                f"time: record in {what} fills the stream's timestamp field with the message "
                "timestamps, but the stream has no `timestamp:`",
                self.doc.span((*path, "source", "time")),
            )

    def _check_exists(
        self, file_path: str, fmt: str | None, shown: str, path: Path, owner: str
    ) -> None:
        target = FsPath(file_path)
        if not target.exists():
            self._error(
                f"source file '{shown}' of {owner} does not exist (looked for {target})",
                self.doc.span(path),
            )
        elif target.is_dir() and fmt != "parquet":
            self._error(
                f"source path '{shown}' of {owner} is a folder, not a file", self.doc.span(path)
            )

    def _file(self, raw: Mapping[str, Any], path: Path, role: str) -> tuple[str | None, str | None]:
        """(absolute path, format) of a file source or sink; (None, None) for other types."""
        if raw.get("type") != "file":
            return None, None
        shown = raw["path"]
        resolved = FsPath(shown)
        if not resolved.is_absolute():
            resolved = self.base_dir / resolved
        resolved = resolved.resolve()
        fmt = raw.get("format") or FORMAT_EXTENSIONS.get(resolved.suffix.lower())
        if fmt is None:
            known = ", ".join(sorted(set(FORMAT_EXTENSIONS.values())))
            self._error(
                f"cannot tell the format of {role} file '{shown}' from its extension; "
                f"add format: one of {known}",
                self.doc.span((*path, "path")),
            )
        return str(resolved), fmt

    # queries and sinks

    def _query(self, name: str) -> QuerySpec:
        path: Path = ("queries", name)
        raw = self.doc.value["queries"][name]
        sink = None
        if "sink" in raw:
            sink = self._sink(raw["sink"], (*path, "sink"), f"query '{name}'")
        return QuerySpec(
            name=name,
            cql=raw["cql"],
            sink=sink,
            weight=float(raw.get("weight", 1.0)),
            qos=self._qos(raw["qos"], (*path, "qos")) if "qos" in raw else QosSpec(),
            cql_positions=self.doc.char_positions((*path, "cql")) or (),
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

    def _sink(self, raw: Mapping[str, Any], path: Path, owner: str) -> SinkSpec:
        file_path, fmt = self._file(raw, path, "sink")
        span = self.doc.span(path, key=True)
        if file_path is not None:
            self._check_sink_path(file_path, raw["path"], (*path, "path"), owner)
        options: dict[str, Any] = {}
        if raw["type"] == "kafka":
            options = {k: raw[k] for k in KAFKA_SINK_OPTIONS if k in raw}
            if isinstance(options.get("key"), str):
                options["key"] = [options["key"]]
            source = self.topics.get((_brokers(raw), raw["topic"]))
            if source is not None:
                self._error(
                    f"sink topic '{raw['topic']}' of {owner} is the source of {source}; "
                    "writing it would feed the results back in",
                    self.doc.span((*path, "topic")),
                )
        return SinkSpec(type=raw["type"], path=file_path, format=fmt, options=options, span=span)

    def _check_sink_path(self, file_path: str, shown: str, path: Path, owner: str) -> None:
        span = self.doc.span(path)
        if file_path in self.sources:
            self._error(
                f"sink file '{shown}' of {owner} is the source of {self.sources[file_path]}; "
                "writing it would overwrite the input",
                span,
            )
        elif file_path in self.sinks:
            other, other_span = self.sinks[file_path]
            self._error(
                f"sink file '{shown}' of {owner} is also written by {other} (line {other_span.line})",
                span,
            )
        else:
            self.sinks[file_path] = (owner, span)

    def _dead_letter(self, pipeline_name: str) -> SinkSpec:
        if "dead_letter" in self.doc.value:
            return self._sink(self.doc.value["dead_letter"], ("dead_letter",), "dead_letter")
        default = self.base_dir / "out" / f"{pipeline_name}.dead-letter.jsonl"
        return SinkSpec(
            type="file", path=str(default), format="jsonl", span=Span(1, 1, file=self.doc.file)
        )

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
        )

    def _scheduling(self, raw: Mapping[str, Any], path: Path) -> ResourcesSpec:
        """The section's scheduler and latency bound (the defaults after an error)."""
        span = self.doc.span(path, key=True)
        scheduler = raw.get("scheduler", DEFAULT_SCHEDULER)
        bounded = scheduler == LATENCY_BOUNDED_SCHEDULER
        if bounded and "latency_bound" not in raw:
            self._error(
                f"resources: scheduler {scheduler} needs a latency_bound, "
                "e.g. latency_bound: 50 ms",
                self.doc.span((*path, "scheduler")),
            )
            return ResourcesSpec(span=span)
        if not bounded and "latency_bound" in raw:
            chosen = scheduler if "scheduler" in raw else f"{scheduler} (the default)"
            self._error(
                f"latency_bound in resources only applies to scheduler "
                f"{LATENCY_BOUNDED_SCHEDULER}, but the scheduler is {chosen}",
                self.doc.span((*path, "latency_bound"), key=True),
            )
            return ResourcesSpec(span=span)
        if not bounded:
            return ResourcesSpec(scheduler=scheduler, span=span)
        bound = self._latency_bound(raw["latency_bound"], (*path, "latency_bound"))
        if bound is None:
            return ResourcesSpec(span=span)
        return ResourcesSpec(scheduler=scheduler, latency_bound=bound, span=span)

    def _size(self, value: int | str, path: Path) -> int | None:
        """A size in bytes: an integer, or a number with B, KB, MiB, ... (1 KB = 1000 B, 1 KiB =
        1024 B); None after reporting why not."""
        if isinstance(value, int):
            return value
        number, unit = _SIZE.match(value).groups()  # the schema checked the pattern
        size = Fraction(number) * _SIZE_UNITS[unit or "B"]
        if size.denominator != 1 or size <= 0:
            self._error(f"{describe_path(path)}: '{value.strip()}' is not a whole number of bytes > 0",
                        self.doc.span(path))
            return None
        return int(size)

    def _latency_bound(self, value: int | str, path: Path) -> int | None:
        """A latency bound as a whole number of time_unit > 0; None after reporting why not."""
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

