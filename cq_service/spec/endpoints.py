"""Sources and sinks of a pipeline file, past the schema: each type's options (the keys that
apply to it, defaults), file paths made absolute with their format (from the extension unless
given), source files that must exist, catalog and kafka options, and the checks between them: a
sink must not write a source file, another sink's file, or a source topic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path as FsPath
from typing import Any

from cq_service.errors import Span
from cq_service.spec.model import TIME_UNITS, FieldSpec, SinkSpec, SourceSpec
from cq_service.spec.positions import Path, YamlDocument
from cq_service.spec.schema import definite, describe_path

__all__ = [
    "CATALOG_OPTIONS",
    "FORMAT_EXTENSIONS",
    "GENERATOR_OPTIONS",
    "KAFKA_SINK_OPTIONS",
    "KAFKA_SOURCE_OPTIONS",
    "Endpoints",
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


class Endpoints:
    """Builds the sources and sinks of one document, remembering the files and topics read and
    written so far; problems go to `error`, durations are read with `duration` (both the
    `SpecBuilder`'s)."""

    def __init__(
        self,
        doc: YamlDocument,
        base_dir: FsPath,
        time_unit: str,
        error: Callable[[str, Span], None],
        duration: Callable[[int | str, Path], int],
    ):
        self.doc = doc
        self.base_dir = base_dir
        self.time_unit = time_unit
        self._error = error
        self._duration = duration
        self.sources: dict[str, str] = {}  # absolute source path -> owner description
        self.sinks: dict[str, tuple[str, Span]] = {}  # absolute sink path -> (owner, span)
        self.topics: dict[tuple[str, str], str] = {}  # (brokers, source topic) -> owner

    def source(self, raw: Mapping[str, Any], path: Path, owner: str, name: str) -> SourceSpec:
        """The source of stream or relation `name` (described as `owner`) at `path`."""
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

    def check_kafka_source(
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

    def sink(self, raw: Mapping[str, Any], path: Path, owner: str) -> SinkSpec:
        """The sink at `path` of `owner` (a query, or the dead_letter section)."""
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

    def dead_letter(self, pipeline_name: str) -> SinkSpec:
        """The `dead_letter` section's sink; without one, out/<pipeline>.dead-letter.jsonl."""
        if "dead_letter" in self.doc.value:
            return self.sink(self.doc.value["dead_letter"], ("dead_letter",), "dead_letter")
        default = self.base_dir / "out" / f"{pipeline_name}.dead-letter.jsonl"
        return SinkSpec(
            type="file", path=str(default), format="jsonl", span=Span(1, 1, file=self.doc.file)
        )
