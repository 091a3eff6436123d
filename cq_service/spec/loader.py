"""Pipeline file (YAML) -> validated, typed `PipelineSpec` (DESIGN §3).

Three passes, each reporting every problem it finds with its position:
1. YAML with positions (`positions.parse_yaml`): syntax errors, duplicate keys, boolean keys;
2. the JSON Schema (`pipeline.schema.json`), each error mapped to the offending key or value;
3. checks the schema cannot express (run once the schema passes): names unique across streams,
   relations and queries (case-insensitively, as in CQL), the timestamp column's type, source
   files that must exist, formats known from the extension, durations in whole time units, a
   `resources.latency_bound` exactly when the scheduler is chain_bounded, QoS ranges with
   min <= max and granularity ladders whose rungs divide each other, sizes of memory budgets.
CQL text is not parsed here; each query keeps the file position of every character.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from importlib import resources
from pathlib import Path as FsPath
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from cq_service.errors import CQError, Span, SpecError
from cq_service.spec.exceptions import SpecErrors
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
from cq_service.spec.positions import Path, YamlDocument, parse_yaml, yaml_kind
from cq_service.types import DataType, parse_type

__all__ = [
    "FORMAT_EXTENSIONS",
    "KAFKA_SINK_OPTIONS",
    "KAFKA_SOURCE_OPTIONS",
    "load_pipeline",
    "load_pipeline_text",
    "parse_duration",
    "pipeline_schema",
]

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
    "consumer",
)
KAFKA_SINK_OPTIONS = ("topic", "bootstrap_servers", "key", "producer")

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

_ENTITIES = {"streams": "stream", "relations": "relation", "queries": "query"}
_RESERVED_COLUMNS = ("_ts", "_op")
_TIMESTAMP_TYPES = (DataType.INT, DataType.TIMESTAMP)


def pipeline_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of pipeline files, version 1 (a fresh copy)."""
    return copy.deepcopy(_schema())


@cache
def _schema() -> dict[str, Any]:
    text = resources.files("cq_service.spec").joinpath("pipeline.schema.json").read_text("utf-8")
    return json.loads(text)


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(_schema())


def load_pipeline(path: str | FsPath) -> PipelineSpec:
    """Read, validate and type the pipeline file at `path`.

    Raises `SpecErrors` listing every problem found, each rendered ``FILE:LINE:COL: message``.
    """
    shown = str(path)
    try:
        text = FsPath(path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SpecErrors([SpecError(f"cannot read pipeline file: {reason}", file=shown)]) from None
    except UnicodeDecodeError as exc:
        error = SpecError(f"pipeline file is not UTF-8 text: {exc.reason}", file=shown)
        raise SpecErrors([error]) from None
    return load_pipeline_text(text, path)


def load_pipeline_text(text: str, path: str | FsPath = "pipeline.yaml") -> PipelineSpec:
    """Validate and type pipeline `text`, as if read from `path`.

    Relative paths in the text are resolved against `path`'s folder; `path` itself need not
    exist. Raises `SpecErrors` listing every problem found.
    """
    shown = str(path)
    doc = parse_yaml(text, shown)
    errors: list[CQError] = list(doc.errors)
    schema_errors = _schema_errors(doc)
    errors.extend(schema_errors)
    spec = None
    if not schema_errors:
        absolute = FsPath(path).resolve()
        builder = _SpecBuilder(doc, absolute.parent)
        spec = builder.build(str(absolute))
        errors.extend(builder.errors)
    if errors or spec is None:
        raise SpecErrors(_in_file_order(errors), file=shown)
    return spec


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


def _in_file_order(errors: Iterable[CQError]) -> list[CQError]:
    """Errors sorted by position, one per position and message."""
    seen: set[tuple[int, int, str]] = set()
    unique = []
    for error in errors:
        span = error.span or Span(0, 0)
        if (span.line, span.col, error.message) not in seen:
            seen.add((span.line, span.col, error.message))
            unique.append(error)
    return sorted(unique, key=lambda e: (e.span.line, e.span.col) if e.span else (0, 0))


# --- schema errors -----------------------------------------------------------------------------


# Keys no longer offered, with why (reported instead of "unknown key").
WITHDRAWN: dict[Path, str] = {
    ("resources", "cpu_budget"): (
        "resources: cpu_budget is no longer offered: the cost model's CPU estimates of joins "
        "and aggregations are not within 25% out of sample (docs/resources.md), too far to "
        "hold a CPU bound by; bound the deployment with memory_budget"
    ),
}


def _schema_errors(doc: YamlDocument) -> list[SpecError]:
    if doc.value is None:
        return [SpecError("the pipeline file is empty", Span(1, 1, file=doc.file))]
    if not isinstance(doc.value, dict):
        message = f"a pipeline file must be a mapping of keys (version, name, …), got {yaml_kind(doc.value)}"
        return [SpecError(message, doc.span(()))]
    found: list[SpecError] = []
    for error in _validator().iter_errors(doc.value):
        found.extend(_explain(error, doc))
    return found


def _explain(error: ValidationError, doc: YamlDocument) -> list[SpecError]:
    """One or more readable errors, each at the position of the offending key or value."""
    path: Path = tuple(error.absolute_path)
    schema_path = list(error.absolute_schema_path)
    kind = error.validator
    what = _describe(path)

    if kind == "additionalProperties" and error.validator_value is False:
        allowed = list(error.schema.get("properties", {}))
        allowed = [k for k in allowed if _allowed_for(error.schema, error.instance, k)]
        where = f" in {_the(what)}" if path else ""
        return [
            SpecError(
                WITHDRAWN.get((*path, key))
                or f"unknown key '{key}'{where} (expected one of: {', '.join(allowed)})",
                doc.span((*path, key), key=True),
            )
            for key in error.instance
            if key not in error.schema.get("properties", {})
        ]
    if len(schema_path) >= 2 and schema_path[-2] == "propertyNames":
        key = str(error.instance)
        span = doc.span((*path, key), key=True)
        if kind == "enum":  # a key a stdout/blackhole sink does not take
            if key not in _declaring_schema(error.schema).get("properties", {}):
                return []  # an unknown key: reported by additionalProperties
            kind_of = _type_of(doc, path)
            others = [k for k in error.validator_value if k != "type"]
            takes = f"only {', '.join(others)}" if others else "no other keys"
            message = (
                f"key '{key}' is not allowed in {_the(what)}: "
                f"a {path[-1]} of type '{kind_of}' takes {takes}"
            )
            return [SpecError(message, span)]
        message = error.schema.get("patternErrorMessage", f"must match {error.validator_value}")
        noun, where = _name_kind(path)
        return [SpecError(f"{noun} '{key}'{where} {message}", span)]
    if kind == "required":
        missing = [name for name in error.validator_value if name not in error.instance]
        where = f" in {_the(what)}" if path else ""
        return [
            SpecError(f"missing key '{name}'{where}", doc.span(path, key=True)) for name in missing
        ]

    span = doc.span(path)
    value = error.instance
    raw = doc.raw(path)
    if raw == "" and value is None:
        return [SpecError(f"{what} is empty{_expected_suffix(error)}", span)]
    if _read_as_non_string(error, doc, path):
        return [
            SpecError(
                f"{what}: {raw} was read as {yaml_kind(value)}; quote it{_expected_suffix(error)}",
                span,
            )
        ]
    return [SpecError(_value_message(error, what, _shown(value, raw)), span)]


def _value_message(error: ValidationError, what: str, got: str) -> str:
    kind, expected, schema = error.validator, error.validator_value, error.schema
    if kind == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        names = [_TYPE_NAMES.get(t, t) for t in types]
        if "pattern" in schema and "string" in types:
            names = [n if n != "a string" else "a duration such as '5 seconds'" for n in names]
        return f"{what} must be {' or '.join(names)}, got {got}"
    if kind == "enum":
        return f"{what} must be one of {', '.join(map(str, expected))}, got {got}"
    if kind == "const":
        return f"{what} must be {expected}, got {got}"
    if kind == "pattern":
        message = schema.get("patternErrorMessage", f"must match {expected}")
        return f"{what} {got} {message}"
    if kind == "minimum":
        return f"{what} must be >= {expected}, got {got}"
    if kind == "exclusiveMinimum":
        return f"{what} must be > {expected}, got {got}"
    if kind in ("minLength", "maxLength"):
        if schema.get("minLength") == schema.get("maxLength") == 1:
            return f"{what} must be a single character, got {got}"
        if kind == "minLength":
            return f"{what} must not be empty"
        return f"{what} must be at most {expected} characters long, got {got}"
    if kind == "minItems":
        if expected > 1:
            return f"{what} must have at least {expected} items, got {len(error.instance)}"
        return f"{what} must not be empty"
    if kind == "minProperties":
        if error.absolute_path and error.absolute_path[-1] == "schema":
            return f"{what} must list at least one column"
        return f"{what} must not be empty"
    return f"{what}: {error.message}"


_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "object": "a mapping",
    "array": "a list",
    "boolean": "true or false",
    "null": "null",
}


def _read_as_non_string(error: ValidationError, doc: YamlDocument, path: Path) -> bool:
    """True if YAML turned an unquoted word the schema wanted as a string into something else."""
    value = error.instance
    if isinstance(value, str | dict | list) or not doc.is_plain(path):
        return False
    if error.validator == "type":
        expected = error.validator_value
        types = [expected] if isinstance(expected, str) else expected
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if numeric and ("integer" in types or "number" in types):
            return False  # a number where numbers are welcome, just not this one
        return "string" in types
    if error.validator in ("enum", "const"):
        options = error.validator_value if error.validator == "enum" else [error.validator_value]
        return all(isinstance(option, str) for option in options)
    return False


def _expected_suffix(error: ValidationError) -> str:
    if error.validator == "enum":
        return f" (must be one of {', '.join(map(str, error.validator_value))})"
    return ""


def _allowed_for(schema: Mapping[str, Any], instance: Any, key: str) -> bool:
    """False if an if/then branch of `schema` that applies to `instance` forbids `key`."""
    for branch in schema.get("allOf", []):
        names = branch.get("then", {}).get("propertyNames", {}).get("enum")
        if names is not None and Draft202012Validator(branch["if"]).is_valid(instance):
            return key in names
    return True


def _declaring_schema(names_schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object schema whose if/then branch holds the `propertyNames` schema `names_schema`."""
    for definition in _schema()["$defs"].values():
        for branch in definition.get("allOf", []):
            if branch.get("then", {}).get("propertyNames") is names_schema:
                return definition
    return {}


def _type_of(doc: YamlDocument, path: Path) -> str:
    value: Any = doc.value
    for part in path:
        value = value[part]
    return str(value.get("type")) if isinstance(value, dict) else "?"


def _describe(path: Path) -> str:
    """A readable name for the value at `path`: "stream 'S'", "format of the sink of query 'q'"."""
    if not path:
        return "the pipeline"
    if len(path) == 1:
        return str(path[0])
    head = str(path[0])
    if len(path) == 2 and head in _ENTITIES:
        return f"{_ENTITIES[head]} '{path[1]}'"
    if len(path) == 4 and head in _ENTITIES and path[2] == "schema":
        return f"type of column '{path[3]}' in {_describe(path[:2])}"
    return f"{path[-1]} of {_the(_describe(path[:-1]))}"


def _the(description: str) -> str:
    first = description.split(" ", 1)[0]
    if description.startswith("the ") or first in _ENTITIES.values() or " " not in description:
        return description
    return f"the {description}"


def _name_kind(path: Path) -> tuple[str, str]:
    """What the keys of the mapping at `path` name, and where: ("column name", " in stream 'S'")."""
    if len(path) == 1 and str(path[0]) in _ENTITIES:
        return f"{_ENTITIES[str(path[0])]} name", ""
    if len(path) == 3 and path[2] == "schema":
        return "column name", f" in {_describe(path[:2])}"
    return "key", f" in {_the(_describe(path))}" if path else ""


def _shown(value: Any, raw: str | None) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, dict | list):
        return yaml_kind(value)
    if raw is not None:
        return raw
    return (
        "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


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


class _SpecBuilder:
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
        what = _describe(path)
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
            self._error(f"{_describe(path)}: {exc}", self.doc.span(path))
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
                    f"but {_the(_describe(path))} is of type {raw.get('type')}",
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
                        f"'{key}' only applies to csv files, but {_the(_describe(path))} is {fmt}",
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
        what = _the(_describe((*path, "source")))
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
            self._error(f"{_describe(where)}: name at least one FROM item", self.doc.span(where))
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
            self._error(f"{_describe(path)} must be a range [min, max]", span)
            return None
        if len(value) != 2:
            self._error(f"{_describe(path)} must be a range [min, max], got {len(value)} values",
                        span)
            return None
        before = len(self.errors)
        low, high = (self._duration(v, (*path, k)) for k, v in enumerate(value))
        if len(self.errors) > before:
            return None
        if low <= 0 or low > high:
            self._error(f"{_describe(path)} must have 0 < min <= max, got [{low}, {high}] "
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
            self._error(f"{_describe(path)}: the finest granularity must be > 0",
                        self.doc.span((*path, 0)))
            return ()
        for k in range(1, len(rungs)):
            if rungs[k] <= rungs[k - 1] or rungs[k] % rungs[k - 1]:
                self._error(
                    f"{_describe(path)}: each granularity must be a larger multiple of the one "
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
            self._error(f"{_describe(path)}: '{value.strip()}' is not a whole number of bytes > 0",
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
            self._error(f"{_describe(path)} must be > 0, got '{value}'", self.doc.span(path))
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
            _Name(_ENTITIES[section], name, self.doc.span((section, name), key=True))
            for section in _ENTITIES
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
