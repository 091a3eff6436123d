"""Connectors that feed and drain the engine: file, generator and Kafka sources, result sinks, the dead letter.

`open_source(stream, time_unit)` reads a stream's or relation's records as `RawChunk`s;
`open_sink(spec, names, types)` writes result elements; `DeadLetterSink` takes malformed
records and late elements. Implementations register by name in `SOURCES` and `SINKS`.
"""

from cq_service.io.base import (
    SINKS,
    SOURCES,
    DeadRecord,
    LateElement,
    RawChunk,
    Sink,
    SinkError,
    SourceError,
    SourceReader,
    open_sink,
    open_source,
    register_sink,
    register_source,
)
from cq_service.io.dead_letter import DeadLetterSink
from cq_service.io.files import CsvReader, JsonlReader, ParquetReader
from cq_service.io.generator import NexmarkSource
from cq_service.io.kafka import KafkaReader, KafkaSink
from cq_service.io.sinks import (
    BlackholeSink,
    CsvSink,
    JsonlSink,
    ParquetSink,
    StdoutSink,
    csv_lines,
    json_lines,
)
from cq_service.io.system import StatisticsReader

__all__ = [
    "SINKS",
    "SOURCES",
    "BlackholeSink",
    "CsvReader",
    "CsvSink",
    "DeadLetterSink",
    "DeadRecord",
    "JsonlReader",
    "JsonlSink",
    "KafkaReader",
    "KafkaSink",
    "LateElement",
    "NexmarkSource",
    "ParquetReader",
    "ParquetSink",
    "RawChunk",
    "Sink",
    "SinkError",
    "SourceError",
    "SourceReader",
    "StatisticsReader",
    "StdoutSink",
    "csv_lines",
    "json_lines",
    "open_sink",
    "open_source",
    "register_sink",
    "register_source",
]
