"""The seams between the engine and the outside world: sources, sinks and what they carry.

A `SourceReader` turns one stream's or relation's source into `RawChunk`s: typed columns in
schema order, timestamps, `+1`/`-1` operations and the record number of every element, plus the
`DeadRecord`s of the malformed records it met on the way (they never stop a read). A `Sink`
receives result elements column by column and writes them in its format.

Implementations register themselves by name (``file:csv``, ``file:jsonl``, ``file:parquet`` for
sources; the same plus ``stdout`` and ``blackhole`` for sinks) and are chosen from the pipeline
file by `open_source` / `open_sink`.
"""

from __future__ import annotations

import importlib
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.errors import EngineError
from cq_service.spec.model import SinkSpec, SourceSpec, StreamSpec
from cq_service.types import DataType

__all__ = [
    "SINKS",
    "SOURCES",
    "DeadRecord",
    "LateElement",
    "RawChunk",
    "Sink",
    "SinkError",
    "SourceError",
    "SourceReader",
    "json_safe",
    "open_sink",
    "open_source",
    "register_sink",
    "register_source",
]


class SourceError(EngineError):
    """A source that cannot be read at all (missing file, missing column, bad option)."""


class SinkError(EngineError):
    """A sink that cannot be opened or written."""


# -- what sources produce ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeadRecord:
    """A malformed source record, left out of the stream and sent to the dead-letter sink.

    `record` is the 1-based line number (csv, jsonl; a csv header is line 1) or row number
    (parquet); `reason` is one line; `raw` is the line as written, or the row as JSON."""

    source: str
    file: str
    record: int
    reason: str
    raw: str

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "file": self.file,
            "record": self.record,
            "reason": self.reason,
            "raw": self.raw,
        }


@dataclass(frozen=True, slots=True)
class LateElement:
    """An element that arrived later than its stream's `max_delay` allows (policy dead_letter).

    `row` maps column names to Python values (None for NULL)."""

    source: str
    ts: int
    row: Mapping[str, Any]
    reason: str

    @staticmethod
    def make(
        source: str, ts: int, row: Mapping[str, Any], max_ts: int, max_delay: int
    ) -> LateElement:
        """A late element with the standard reason, e.g. ``late: timestamp 5 < 17 - max_delay 10``."""
        reason = f"late: timestamp {ts} < {max_ts} - max_delay {max_delay}"
        return LateElement(source, int(ts), dict(row), reason)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "reason": self.reason, "_ts": self.ts, "row": dict(self.row)}


def json_safe(value: Any) -> Any:
    """`value` with non-finite floats replaced by None (JSON has no NaN or infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


@dataclass(frozen=True, slots=True, eq=False)
class RawChunk:
    """Elements read from a source, before ordering and late-element handling.

    `columns` are Arrow arrays typed per the stream schema, in schema order; `ts` (int64) the
    timestamps in time_unit; `ops` (int8) +1 insert / -1 delete; `record` (int64) the record
    number of each element (see `DeadRecord`). `dead` lists the malformed records met while
    reading this chunk, in file order.

    Live sources (Kafka) may also give `partition` (int32, the partition of each element; its
    `record` is then the offset in that partition) and `heartbeat`: no element read later has
    a timestamp at or below it. A live source with nothing new returns an empty chunk, not None.
    `arrived` (``time.perf_counter()`` seconds), when a reader knows it, is when the chunk's first
    element reached us; the engine stamps the elements with it (else with the time it reads
    them), and measures latencies from it."""

    columns: tuple[pa.Array, ...]
    ts: np.ndarray
    ops: np.ndarray
    record: np.ndarray
    dead: list[DeadRecord] = field(default_factory=list)
    partition: np.ndarray | None = None
    heartbeat: int | None = None
    arrived: float | None = None

    def __len__(self) -> int:
        return len(self.ts)


# -- sources -------------------------------------------------------------------------------------


class SourceReader(ABC):
    """Reads one stream's or relation's source incrementally.

    Memory is bounded by `batch_rows` records, never by the size of the source.

    `live` is set by `open_source`: False (``cq run``) means read what the source holds now and
    end; True (``cq serve``) means follow the source for new records, returning empty chunks
    while there are none. File sources ignore it.

    `columns`, when given, names the schema columns the pipeline uses. A reader may then leave
    the others out and give them as NULLs of their type — but only where that cannot change
    which records are malformed (a value that could fail to convert is always read)."""

    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        if batch_rows < 1:
            raise ValueError("batch_rows must be positive")
        self.stream = stream
        self.time_unit = time_unit
        self.batch_rows = batch_rows
        self.columns_used = None if columns is None else frozenset(columns)
        self.live = False

    @abstractmethod
    def read(self) -> RawChunk | None:
        """The next chunk (at most `batch_rows` records), or None once the source is exhausted."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the source's resources (idempotent)."""

    def progress(self) -> tuple[int, int] | None:
        """(read, total) of a finite source, in the reader's own unit (bytes of a text file,
        rows of a Parquet file); None when the total is not known (Kafka, generators). For
        `cq run`'s progress bar."""
        return None

    def __iter__(self) -> Iterator[RawChunk]:
        while (chunk := self.read()) is not None:
            yield chunk

    def __enter__(self) -> SourceReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SourceFactory = Callable[..., SourceReader]  # (stream, time_unit, batch_rows, columns=…)
SOURCES: dict[str, SourceFactory] = {}
# Readers registered by a module outside io, loaded when a pipeline first names their type:
# the catalog's stored relations (importing the catalog costs SQLAlchemy; most commands never
# open one).
PLUGIN_SOURCES = {"catalog": "cq_service.catalog.relation_source"}


def register_source(kind: str) -> Callable[[type[SourceReader]], type[SourceReader]]:
    """Class decorator: make a reader available as `kind` (``<type>:<format>`` or ``<type>``)."""

    def deco(cls: type[SourceReader]) -> type[SourceReader]:
        SOURCES[kind] = cls
        return cls

    return deco


_SUFFIX_FORMATS = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def _format_of(spec: SourceSpec | SinkSpec) -> str | None:
    if spec.format:
        return spec.format
    if spec.path:
        return _SUFFIX_FORMATS.get(os.path.splitext(spec.path)[1].lower())
    return None


def _kind(spec: SourceSpec | SinkSpec) -> str:
    fmt = _format_of(spec)
    return f"{spec.type}:{fmt}" if spec.type == "file" else spec.type


def open_source(
    stream: StreamSpec,
    time_unit: str,
    batch_rows: int = 65536,
    columns: Collection[str] | None = None,
    live: bool = False,
) -> SourceReader:
    """A reader for `stream`'s source, chosen by its type and format; `columns` (optional)
    names the schema columns used, `live` whether to follow it for new records (see
    `SourceReader`)."""
    kind = _kind(stream.source)
    if stream.source.type in PLUGIN_SOURCES and stream.source.type not in SOURCES:
        importlib.import_module(PLUGIN_SOURCES[stream.source.type])
    factory = SOURCES.get(kind) or SOURCES.get(stream.source.type)
    if factory is None:
        known = ", ".join(sorted(SOURCES))
        raise SourceError(
            f"{stream.name}: unsupported source {kind!r} (supported: {known})", stream.source.span
        )
    reader = factory(stream, time_unit, batch_rows, columns=columns)
    reader.live = live
    return reader


# -- sinks ---------------------------------------------------------------------------------------


class Sink(ABC):
    """Receives result elements in order and writes them out.

    `names` and `types` describe the result columns; `write` gets them as Arrow arrays."""

    def __init__(self, spec: SinkSpec, names: Sequence[str], types: Sequence[DataType]):
        if len(names) != len(types):
            raise ValueError("names and types differ in length")
        self.spec = spec
        self.names = tuple(names)
        self.types = tuple(types)
        self._count = 0
        self._closed = False

    @property
    def count(self) -> int:
        """Elements written so far."""
        return self._count

    def write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        """Append elements: timestamps (int64), operations (+1/-1) and one array per column."""
        if self._closed:
            raise SinkError("write to a closed sink")
        n = len(ts)
        if len(ops) != n or any(len(c) != n for c in columns) or len(columns) != len(self.names):
            raise ValueError("ts, ops and columns must have the sink's columns and equal lengths")
        if n == 0:
            return
        self._write(np.asarray(ts, dtype=np.int64), np.asarray(ops, dtype=np.int8), columns)
        self._count += n

    @abstractmethod
    def _write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        """Write a non-empty, validated group of elements."""

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Push buffered elements to their destination."""

    def close(self) -> None:
        """Flush and release resources (idempotent)."""
        if not self._closed:
            self._closed = True
            self._close()

    def _close(self) -> None:
        self.flush()

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SinkFactory = Callable[[SinkSpec, Sequence[str], Sequence[DataType]], Sink]
SINKS: dict[str, SinkFactory] = {}


def register_sink(kind: str) -> Callable[[type[Sink]], type[Sink]]:
    """Class decorator: make a sink available as `kind` (``file:<format>``, ``stdout``, …)."""

    def deco(cls: type[Sink]) -> type[Sink]:
        SINKS[kind] = cls
        return cls

    return deco


def open_sink(spec: SinkSpec, names: Sequence[str], types: Sequence[DataType]) -> Sink:
    """A sink for `spec`, chosen by its type (and format, for files)."""
    kind = _kind(spec)
    factory = SINKS.get(kind)
    if factory is None:
        known = ", ".join(sorted(SINKS))
        raise SinkError(f"unsupported sink {kind!r} (supported: {known})", spec.span)
    return factory(spec, names, types)
