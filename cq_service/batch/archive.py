"""`cq archive`: copy each stream's source of a pipeline into Parquet (layout: `batch.layout`).

A PySpark job per stream. Kafka sources are read with Spark's Kafka connector, as a batch from
the offsets archived so far up to the end offsets at the start of the run; file sources (csv,
jsonl, parquet) are read by the engine's own file reader inside a Spark task. Either way the
records are decoded inside Spark (``mapInArrow``) by the engine's decoding (`MessageDecoder`,
`RecordLayout`, the file readers), so the archive holds exactly the elements the engine sees,
with its timestamps and record numbers. Malformed records are written with their reason to
``<root>/_dead_letter/<stream>/`` (Parquet) and counted.

Runs are incremental and idempotent. The catalog (`ArchiveState`) holds, per stream, the number
of the last committed run, the next offset per partition (a file: the last record number read,
and the file's size and mtime) and the completeness boundary. A run's files are named after its
number (``part-<run>-<n>.parquet``) and committed by one catalog write after they are in
place; a run first deletes any file numbered above the committed run (left by a run that
crashed before committing), so nothing is ever archived twice. A run with nothing new writes
nothing. docs/archive.md is the user's guide.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cq_service.batch.archive_decode import DECODED_EXTRA, file_decoder, kafka_decoder
from cq_service.batch.layout import (
    archive_root,
    archive_schema,
    stream_dir,
)
from cq_service.catalog import ArchiveState, Catalog
from cq_service.errors import CQError
from cq_service.spec.model import PipelineSpec, StreamSpec

__all__ = [
    "DEAD_LETTER_DIR",
    "DEAD_LETTER_SCHEMA",
    "ArchiveError",
    "ArchiveResult",
    "StreamResult",
    "archive_pipeline",
    "dead_letter_dir",
]

log = logging.getLogger(__name__)

# Malformed records of stream S: <root>/_dead_letter/S/part-<run>.parquet.
DEAD_LETTER_DIR = "_dead_letter"
DEAD_LETTER_SCHEMA = pa.schema(
    [
        ("source", pa.string()),  # the stream
        ("file", pa.string()),  # the file, or kafka:<topic>/<partition>
        ("record", pa.int64()),  # line/row number, or offset (DeadRecord.record)
        ("reason", pa.string()),
        ("raw", pa.string()),
        ("_partition", pa.int32()),
        ("_offset", pa.int64()),
    ]
)
_STAGING_DIR = "_staging"
_ARCHIVED_KINDS = ("kafka", "file")



class ArchiveError(CQError):
    """An archive run failed (a source that cannot be read, Spark or Maven failing, ...)."""


@dataclass(frozen=True)
class StreamResult:
    """What one run did for one stream. `offsets` maps each partition read to its (first,
    end) offsets (a file: the record numbers after the last archived and of the last read);
    `skipped` says why a stream was not archived (not a Kafka or file source)."""

    stream: str
    source: str
    rows: int = 0
    files: int = 0
    dead_letters: int = 0
    offsets: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    boundary: int | None = None
    run: int | None = None
    rewritten: bool = False
    skipped: str | None = None

    @property
    def wrote(self) -> bool:
        return self.files > 0 or self.dead_letters > 0


@dataclass(frozen=True)
class ArchiveResult:
    pipeline: str
    root: Path
    streams: tuple[StreamResult, ...]


def dead_letter_dir(root: str | Path, stream: str) -> Path:
    """The folder of stream `stream`'s malformed records."""
    return Path(root) / DEAD_LETTER_DIR / stream


def archive_pipeline(
    spec: PipelineSpec,
    catalog: Catalog,
    *,
    root: str | Path | None = None,
    spark: Any = None,
    master: str | None = None,
    streams: Sequence[str] | None = None,
    on_stream: Callable[[StreamResult], None] | None = None,
) -> ArchiveResult:
    """Archive every stream of `spec` (or those named in `streams`) under `root` (default:
    `archive_root(spec)`), recording progress in `catalog`. `spark` is a SparkSession (default:
    `batch.spark.session()` on `master`, None: local[2]); `on_stream` is called with each
    stream's result as it is done."""
    target = archive_root(spec, root)
    wanted = list(spec.streams) if streams is None else list(streams)
    unknown = [s for s in wanted if s not in spec.streams]
    if unknown:
        raise ArchiveError(f"{spec.name}: no stream named {', '.join(unknown)}")
    results = []
    for name in wanted:
        stream = spec.streams[name]
        if stream.source.type not in _ARCHIVED_KINDS:
            result = StreamResult(
                name, stream.source.type, skipped=f"a {stream.source.type} source is not archived"
            )
        else:
            if spark is None:
                from cq_service.batch.spark import session

                spark = session(master=master or "local[2]", app_name=f"cq-archive-{spec.name}")
            result = _StreamJob(spec, stream, catalog, target, spark).run()
        results.append(result)
        if on_stream is not None:
            on_stream(result)
    return ArchiveResult(spec.name, target, tuple(results))


# -- one stream ----------------------------------------------------------------------------------


@dataclass
class _Plan:
    """What a run reads: the Kafka partitions' [start, end) offsets, or the file's records
    after `after` (all of them when `rewrite`)."""

    offsets: dict[int, tuple[int, int]]
    rewrite: bool = False
    after: int = 0
    file_size: int | None = None
    file_mtime_ns: int | None = None


class _StreamJob:
    def __init__(
        self, spec: PipelineSpec, stream: StreamSpec, catalog: Catalog, root: Path, spark: Any
    ):
        self.spec = spec
        self.stream = stream
        self.catalog = catalog
        self.root = root
        self.spark = spark
        self.kind = stream.source.type
        self.state = catalog.archive_state(spec.name, stream.name) or ArchiveState(
            spec.name, stream.name, self.kind, 0
        )
        self.run_no = self.state.run + 1
        self.folder = stream_dir(root, stream.name)
        self.dead_folder = dead_letter_dir(root, stream.name)
        self.staging = root / _STAGING_DIR / f"{stream.name}-{self.run_no:08d}"

    def run(self) -> StreamResult:
        self._remove_uncommitted()
        plan = self._kafka_plan() if self.kind == "kafka" else self._file_plan()
        if plan is None:
            return StreamResult(self.stream.name, self.kind, boundary=self.state.boundary)
        try:
            frame = self._kafka_frame(plan) if self.kind == "kafka" else self._file_frame(plan)
            decoded = frame.persist()
            try:
                stats, dead = self._write(decoded)
            finally:
                decoded.unpersist()
            if plan.rewrite:
                self._remove_runs(lambda run: run < self.run_no)
            files = self._move_into_place(dead)
            state = self._next_state(plan, stats, dead)
            self.catalog.save_archive_state(state)
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
        rows = sum(n for n, _, _ in stats.values())
        log.info("archived %s: %d rows, %d files, run %d", self.stream.name, rows, files,
                 self.run_no)
        return StreamResult(
            self.stream.name,
            self.kind,
            rows=rows,
            files=files,
            dead_letters=dead.num_rows,
            offsets=dict(plan.offsets),
            boundary=state.boundary,
            run=self.run_no,
            rewritten=plan.rewrite,
        )

    # -- what is new

    def _kafka_plan(self) -> _Plan | None:
        begin, end = _kafka_offsets(self.stream)
        offsets = {}
        for p in sorted(end):
            start = self.state.offsets.get(p, begin[p])
            if start < begin[p]:
                log.warning(
                    "%s: partition %d: offsets %d..%d were deleted before they were archived",
                    self.stream.name, p, start, begin[p] - 1,
                )
                start = begin[p]
            if start < end[p]:
                offsets[p] = (start, end[p])
        return _Plan(offsets) if offsets else None

    def _file_plan(self) -> _Plan | None:
        path = self.stream.source.path
        try:
            info = os.stat(path or "")
        except OSError as e:
            raise ArchiveError(f"{self.stream.name}: cannot read {path}: {e.strerror}") from None
        size, mtime = info.st_size, info.st_mtime_ns
        state = self.state
        if state.run and (state.file_size, state.file_mtime_ns) == (size, mtime):
            return None
        last = state.offsets.get(0, 0)
        grew = (
            state.run > 0
            and _file_format(self.stream) in ("csv", "jsonl")
            and state.file_size is not None
            and size > state.file_size
        )
        after = last if grew else 0
        return _Plan({0: (after + 1, after + 1)}, not grew, after, size, mtime)

    # -- reading and decoding (inside Spark)

    def _output_schema(self) -> pa.Schema:
        return pa.unify_schemas([archive_schema(self.stream), DECODED_EXTRA])

    def _kafka_frame(self, plan: _Plan) -> Any:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        opts = self.stream.source.options
        topic = opts["topic"]
        reader = (
            self.spark.read.format("kafka")
            .option("kafka.bootstrap.servers", ",".join(_servers(self.stream)))
            .option("assign", json.dumps({topic: sorted(plan.offsets)}))
            .option(
                "startingOffsets",
                json.dumps({topic: {str(p): s for p, (s, _) in plan.offsets.items()}}),
            )
            .option(
                "endingOffsets",
                json.dumps({topic: {str(p): e for p, (_, e) in plan.offsets.items()}}),
            )
        )
        for key, value in _java_settings(opts.get("consumer") or {}).items():
            reader = reader.option(f"kafka.{key}", value)
        frame = reader.load().select(
            F.col("partition").cast("int").alias("partition"),
            F.col("offset"),
            F.col("key"),
            F.col("value"),
            F.coalesce(F.unix_millis(F.col("timestamp")), F.lit(-1)).alias("ms"),
        )
        if self.stream.timestamp is None:
            # Arrival order: messages numbered in (partition, offset) order, continuing the
            # numbering of earlier runs.
            order = Window.orderBy("partition", "offset")
            position = F.row_number().over(order) - 1 + F.lit(self.state.next_position)
        else:
            position = F.lit(0).cast("long")
        frame = frame.withColumn("position", position.cast("long"))
        decode = kafka_decoder(self.stream, self.spec.time_unit)
        return frame.mapInArrow(decode, _spark_schema(self._output_schema()))

    def _file_frame(self, plan: _Plan) -> Any:
        frame = self.spark.createDataFrame([(0, plan.after)], "task int, after long").coalesce(1)
        decode = file_decoder(self.stream, self.spec.time_unit)
        return frame.mapInArrow(decode, _spark_schema(self._output_schema()))

    # -- writing

    def _write(self, decoded: Any) -> tuple[dict[int, tuple[int, int, int]], pa.Table]:
        """Write the elements to the staging folder (one file per hour); return per partition
        (rows, largest _ts, largest _offset), and the dead records."""
        from pyspark.sql import functions as F

        fields = archive_schema(self.stream).names
        good = decoded.where(F.col("_dead_reason").isNull())
        per_partition = good.groupBy("_partition").agg(
            F.count(F.lit(1)).alias("n"), F.max("_ts").alias("ts"), F.max("_offset").alias("o")
        )
        stats = {
            int(r["_partition"]): (int(r["n"]), int(r["ts"]), int(r["o"]))
            for r in per_partition.collect()
        }
        if stats:
            (
                good.select(*fields, "date", "hour")
                .repartition("date", "hour")
                .sortWithinPartitions("_ts", "_partition", "_offset")
                .write.mode("overwrite")
                .partitionBy("date", "hour")
                .parquet(str(self.staging / "elements"))
            )
        dead_rows = decoded.where(F.col("_dead_reason").isNotNull()).select(
            F.lit(self.stream.name).alias("source"),
            F.col("_dead_file").alias("file"),
            F.col("_offset").alias("record"),
            F.col("_dead_reason").alias("reason"),
            F.col("_dead_raw").alias("raw"),
            F.col("_partition"),
            F.col("_offset"),
        )
        dead = _to_arrow(dead_rows, DEAD_LETTER_SCHEMA).sort_by(
            [("_partition", "ascending"), ("_offset", "ascending")]
        )
        return stats, dead

    def _move_into_place(self, dead: pa.Table) -> int:
        """Move the staged files to their final names (atomic renames); return how many."""
        moved = 0
        staged = self.staging / "elements"
        for hour_dir in sorted(staged.glob("date=*/hour=*")):
            target = self.folder / hour_dir.parent.name / hour_dir.name
            target.mkdir(parents=True, exist_ok=True)
            for k, part in enumerate(sorted(hour_dir.glob("*.parquet"))):
                os.replace(part, target / _file_name(self.run_no, k))
                moved += 1
        if dead.num_rows:
            self.dead_folder.mkdir(parents=True, exist_ok=True)
            tmp = self.staging / "dead.parquet"
            pq.write_table(dead, tmp)
            os.replace(tmp, self.dead_folder / _file_name(self.run_no, 0))
        return moved

    def _remove_uncommitted(self) -> None:
        """Delete the files of runs after the committed one (a run that crashed before its
        catalog write), and any staging left behind."""
        self._remove_runs(lambda run: run > self.state.run)
        shutil.rmtree(self.staging, ignore_errors=True)

    def _remove_runs(self, doomed: Callable[[int], bool]) -> None:
        for folder in (self.folder, self.dead_folder):
            if not folder.is_dir():
                continue
            for path in folder.rglob("part-*.parquet"):
                run = _run_of(path.name)
                if run is not None and doomed(run):
                    path.unlink()

    # -- committing

    def _next_state(
        self, plan: _Plan, stats: Mapping[int, tuple[int, int, int]], dead: pa.Table
    ) -> ArchiveState:
        old = self.state
        keep_old = not plan.rewrite
        max_ts = dict(old.max_ts) if keep_old else {}
        for p, (_, ts, _) in stats.items():
            max_ts[p] = max(ts, max_ts.get(p, ts))
        rows = sum(n for n, _, _ in stats.values()) + (old.rows if keep_old else 0)
        dead_letters = dead.num_rows + (old.dead_letters if keep_old else 0)
        if self.kind == "kafka":
            offsets = dict(old.offsets)
            offsets.update({p: end for p, (_, end) in plan.offsets.items()})
            read = sum(end - start for start, end in plan.offsets.values())
            boundary = None
            if max_ts:
                boundary = min(max_ts.values()) - self.stream.max_delay
                if old.boundary is not None:
                    boundary = max(boundary, old.boundary)
            return ArchiveState(
                self.spec.name, self.stream.name, "kafka", self.run_no, offsets, max_ts,
                next_position=old.next_position + read, boundary=boundary, rows=rows,
                dead_letters=dead_letters,
            )  # fmt: skip
        last_record = max(
            [plan.after, *(last for _, _, last in stats.values()), *self._last_records(dead)]
        )
        offsets = {0: last_record}
        plan.offsets[0] = (plan.after + 1, offsets[0])
        return ArchiveState(
            self.spec.name, self.stream.name, "file", self.run_no, offsets, max_ts,
            boundary=max_ts.get(0), file_size=plan.file_size, file_mtime_ns=plan.file_mtime_ns,
            rows=rows, dead_letters=dead_letters,
        )  # fmt: skip

    @staticmethod
    def _last_records(dead: pa.Table) -> list[int]:
        return [int(pc.max(dead.column("_offset")).as_py())] if dead.num_rows else []


# -- helpers -------------------------------------------------------------------------------------


def _file_name(run: int, k: int) -> str:
    return f"part-{run:08d}-{k:05d}.parquet"


def _run_of(name: str) -> int | None:
    """The run number in a file name made by `_file_name`."""
    parts = name.split("-")
    if len(parts) >= 2 and parts[1].isdigit():
        return int(parts[1])
    return None


def _file_format(stream: StreamSpec) -> str | None:
    from cq_service.io.base import _format_of

    return _format_of(stream.source)


def _servers(stream: StreamSpec) -> list[str]:
    from cq_service.io.kafka import bootstrap_servers

    return bootstrap_servers(stream.source.options.get("bootstrap_servers"))


def _java_settings(settings: Mapping[str, Any]) -> dict[str, str]:
    """kafka-python consumer settings as the Java client's (``security_protocol`` ->
    ``security.protocol``), for the Spark connector."""
    return {k.replace("_", "."): str(v) for k, v in settings.items()}


def _kafka_offsets(stream: StreamSpec) -> tuple[dict[int, int], dict[int, int]]:
    """The topic's beginning and end offsets per partition, now."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    from cq_service.io.kafka import API_VERSION

    topic = stream.source.options["topic"]
    settings = dict(stream.source.options.get("consumer") or {})
    allowed = {k: v for k, v in settings.items() if k in KafkaConsumer.DEFAULT_CONFIG}
    try:
        consumer = KafkaConsumer(
            bootstrap_servers=_servers(stream),
            api_version=API_VERSION,
            enable_auto_commit=False,
            **allowed,
        )
    except KafkaError as e:
        raise ArchiveError(f"{stream.name}: cannot reach Kafka: {e}") from None
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise ArchiveError(f"{stream.name}: Kafka topic {topic!r} does not exist")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        begin = consumer.beginning_offsets(tps)
        end = consumer.end_offsets(tps)
    except KafkaError as e:
        raise ArchiveError(f"{stream.name}: cannot read the offsets of {topic!r}: {e}") from None
    finally:
        consumer.close()
    return {tp.partition: int(o) for tp, o in begin.items()}, {
        tp.partition: int(o) for tp, o in end.items()
    }


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _to_arrow(frame: Any, schema: pa.Schema) -> pa.Table:
    """A (small) Spark DataFrame as an Arrow table of `schema`."""
    table = frame.toArrow()
    return table.cast(schema) if table.num_rows else schema.empty_table()
