"""The Spark runner: a pipeline's queries as one Spark Structured Streaming job from Kafka to the
queries' sinks, with results equal to the embedded engine's.

    problems = check(spec)                      # [] when every query can run on Spark
    job = StreamingJob(spec, spark, checkpoint)  # one job for the whole pipeline
    report = job.run(available_now=True, final=True)

Spark reads every stream's Kafka topic; `foreachBatch` hands each micro-batch (the new Kafka
messages) to `StreamingJob.batch`, which, on Spark:

1. decodes the messages with the project's own `MessageDecoder` in `mapInArrow` (one task per
   Kafka partition, in offset order) and decides which elements are late exactly as the
   embedded engine's `Reorderer` does for a partitioned source: an element is late when its
   timestamp is more than `max_delay` before the latest timestamp seen before it in its Kafka
   partition, or below a heartbeat an earlier record of that partition promised, or at or below
   the stream's heartbeat already released. Malformed messages go to the source's dead-letter
   topic (with the reason in headers, as `KafkaReader` sends them) and, like late elements under
   ``late: dead_letter``, to the pipeline's dead-letter sink; every one is counted.
2. advances each stream's heartbeat (``min`` over its partitions of latest − max_delay − 1, or a
   promised heartbeat − 1) and each query's (the smallest of its streams'), kept on the driver.
3. for each query with new elements or whose heartbeat W moved past the last instant it
   emitted, steps its engines (`engine_steps`): the new elements hashed on the key
   `partitioning.analyze` chose into the query's buckets (one bucket on the single-key path),
   one task per bucket, each going on from the bucket's saved engine state to W. Every bucket
   steps, so a window's expiry is emitted without new arrivals; no element is replayed.
4. writes the results (those at instants in (emitted, W]) to the query's sink in `cq run`'s
   canonical order (non-decreasing ``_ts``; within one ``_ts`` retractions first), flushes,
   then commits the batch: the clocks, each query's state version, as one JSON file.

Spark's own checkpoint keeps the Kafka offsets; a batch Spark replays after a crash that was
already committed here is skipped, one that was not is redone from the committed state versions
(its results may then be written twice: at-least-once, like the worker). `run(final=True)`
(what `cq run` does) ends, once the available input is processed, with the final heartbeat at
the largest timestamp seen — the embedded `cq run`'s end of input — so its output equals
`cq run`'s on the embedded engine. docs/spark-runner.md explains the choices.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.batch import engine_in_spark as eis
from cq_service.batch import engine_steps as steps
from cq_service.batch import kafka_decoding as decoding
from cq_service.batch.kafka_decoding import ELEMENT, LATE, MALFORMED, NONE, SUMMARY
from cq_service.batch.partitioning import KEY, Partitioning, analyze
from cq_service.compiler import compile_pipeline, subset
from cq_service.errors import CQError, Span
from cq_service.io.base import DeadRecord, LateElement, json_safe
from cq_service.io.kafka import KafkaWriter, bootstrap_servers
from cq_service.spec.model import PipelineSpec, QuerySpec
from cq_service.types import DataType

__all__ = [
    "NONE",
    "Problem",
    "StreamingError",
    "StreamingJob",
    "StreamingReport",
    "check",
    "describe",
    "spark_session",
    "supported",
]

_STATE_FILE = "cq-state.json"

class StreamingError(CQError):
    """A pipeline the Spark runner cannot run, or a job that failed."""


# -- what the runner supports -------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """Why the Spark runner cannot run `query`, located at the query in the pipeline file."""

    query: str
    reason: str
    span: Span

    def render(self) -> str:
        return f"{self.span.file}:{self.span.line}:{self.span.col}: {self.query}: {self.reason}"


def _stream_problem(spec: PipelineSpec, name: str) -> str | None:
    if name in spec.relations:
        r = spec.relations[name]
        if r.source.type != "file":
            return (f"relation {name} is read from {r.source.type}; the spark runner "
                    "broadcasts stored relations from files only")
        return None
    s = spec.streams[name]
    if s.source.type != "kafka":
        return f"stream {name} is read from {s.source.type}, not Kafka"
    if s.timestamp is None:
        return (f"stream {name} has no timestamp field: arrival order across Kafka partitions "
                "is not reproducible on Spark")
    return None


def supported(spec: PipelineSpec, query: str) -> tuple[Partitioning | None, str | None]:
    """The partitioning `query` runs with on Spark (the key path, or the single-key path: one
    task), or None and the one-line reason why it cannot run."""
    try:
        compiled = compile_pipeline(subset(spec, [query]))
    except CQError as e:
        return None, e.message
    bound = next(q for q in compiled.queries if q.name == query)
    part = analyze(bound)
    if not part.streams:
        return None, "the query reads no stream"
    for name in (*part.streams, *part.relations):
        why = _stream_problem(compiled.spec, name)
        if why:
            return None, why
    return part, None


def _span(q: QuerySpec) -> Span:
    line, col = q.position_of(0)
    return Span(line, col, file=q.span.file)


def check(spec: PipelineSpec) -> list[Problem]:
    """Why each query with a sink cannot run on the Spark runner (empty: all can)."""
    problems = []
    for name, q in spec.queries.items():
        if q.sink is None:
            continue  # a view runs inside the queries that read it
        _, why = supported(spec, name)
        if why:
            problems.append(Problem(name, why, _span(q)))
    return problems


def describe(spec: PipelineSpec) -> list[str]:
    """One line per query with a sink: how the Spark runner runs it, or why it cannot."""
    lines = []
    for name, q in spec.queries.items():
        if q.sink is None:
            continue
        part, why = supported(spec, name)
        if part is None:
            lines.append(Problem(name, f"unsupported by runner spark: {why}", _span(q)).render())
        else:
            how = ("single key: one task holds all its state, does not scale"
                   if part.path != KEY else "state kept per bucket of keys")
            lines.append(f"{name}: runner spark: {part.describe()} ({how})")
    return lines


def spark_session(master: str | None = None, partitions: int = 2) -> Any:
    """The runner's SparkSession (`batch.spark.session`, with the Kafka connector's jars)."""
    from cq_service.batch.spark import session

    return session(
        master=master or f"local[{partitions}]",
        app_name="cq-spark-runner",
        conf={"spark.sql.shuffle.partitions": partitions,
              "spark.sql.execution.arrow.maxRecordsPerBatch": 65_536},
        kafka=True,
    )


def _fingerprint(spec: PipelineSpec, query: str) -> str:
    """What a query's saved engine state depends on: its CQL, the views' it reads, and the
    schemas of the streams and relations those read."""
    sub = subset(spec, [query])
    parts = {"queries": {n: q.cql for n, q in sub.queries.items()},
             "inputs": {n: [(f.name, str(f.type)) for f in x.schema]
                        for n, x in {**sub.streams, **sub.relations}.items()}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


# -- the job ------------------------------------------------------------------------------------


@dataclass
class _QueryRun:
    name: str
    part: Partitioning
    streams: tuple[int, ...]  # indexes into the job's streams
    columns: tuple[str, ...]
    types: tuple[DataType, ...]
    relations: dict[str, bytes]
    sink: Any = None


@dataclass
class StreamingReport:
    """What a run did: batches, late and malformed counts per stream, results per query, and
    the heartbeat each query ended at."""

    batches: int = 0
    late: dict[str, int] = field(default_factory=dict)
    malformed: dict[str, int] = field(default_factory=dict)
    results: dict[str, int] = field(default_factory=dict)
    ended_at: dict[str, int | None] = field(default_factory=dict)
    dead_letters: int = 0
    # per query, per engine step: elements fed, new elements, state bytes, buckets, buckets
    # that went on with a kept engine, the slowest task's seconds
    steps: dict[str, list[dict[str, int | float]]] = field(default_factory=dict)
    batch_seconds: list[float] = field(default_factory=list)  # per micro-batch, on the driver
    batch_messages: list[int] = field(default_factory=list)  # elements decoded per micro-batch


class StreamingJob:
    """The pipeline's queries on Spark Structured Streaming (see the module docstring)."""

    def __init__(self, spec: PipelineSpec, spark: Any, checkpoint: str | Path,
                 partitions: int | None = None, max_offsets_per_trigger: int | None = None):
        problems = check(spec)
        if problems:
            raise StreamingError("; ".join(p.render() for p in problems))
        self.spec, self.spark = spec, spark
        self.checkpoint = Path(checkpoint)
        self.checkpoint.mkdir(parents=True, exist_ok=True)
        self.partitions = partitions or spark.sparkContext.defaultParallelism
        self.max_offsets_per_trigger = max_offsets_per_trigger
        self.report = StreamingReport()
        self.queries: list[_QueryRun] = []
        names: list[str] = []
        for q in spec.queries:
            if spec.queries[q].sink is None:
                continue
            part, _ = supported(spec, q)
            assert part is not None
            for s in part.streams:
                if s not in names:
                    names.append(s)
            self.queries.append(_QueryRun(q, part, (), (), (), {}))
        # Streams no query reads are read too: the end of input is the largest timestamp over
        # all of the pipeline's streams, as in the embedded `cq run` (their malformed records
        # are dead-lettered as the embedded engine does).
        names += [n for n, s in spec.streams.items() if n not in names
                  and s.source.type == "kafka" and s.timestamp is not None]
        self.streams = tuple(names)
        for run in self.queries:
            run.streams = tuple(self.streams.index(s) for s in run.part.streams)
            run.columns, run.types = eis.result_schema(spec, run.name)
        self.state = self._load_state()
        self._dead_sink: Any = None
        self._dead_topics: KafkaWriter | None = None
        self._query: Any = None  # the running streaming query
        self._stopped = False
        self._lock = threading.Lock()
        self._batch_lock = threading.Lock()  # held by the micro-batch in progress
        self._has_new: dict[str, bool] = {}  # query -> new elements in this micro-batch

    # state on the driver

    def _load_state(self) -> dict:
        path = self.checkpoint / _STATE_FILE
        state = {"batch": -1, "streams": {}, "queries": {}}
        if path.exists():
            state = json.loads(path.read_text())
            if any("buckets" not in q for q in state["queries"].values()):
                raise StreamingError(
                    f"{self.checkpoint}: a checkpoint of an earlier runner (it kept elements to "
                    "replay, not engine state); start the job on a new checkpoint")
        for s in self.streams:
            state["streams"].setdefault(
                s, {"latest": {}, "promised": {}, "passed": NONE, "max_seen": NONE})
        for q in self.queries:
            saved = state["queries"].setdefault(q.name, {
                "emitted": NONE, "version": -1, "token": "", "plan": _fingerprint(self.spec, q.name),
                "buckets": self.partitions if q.part.path == KEY else 1})
            if saved["plan"] != _fingerprint(self.spec, q.name):
                raise StreamingError(
                    f"{self.checkpoint}: query {q.name} (or a view or stream it reads) changed "
                    "since this checkpoint was written; its saved engine state is the old "
                    "query's: run the new version on a new checkpoint")
        return state

    def _commit(self) -> None:
        path = self.checkpoint / _STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1))
        os.replace(tmp, path)

    # running

    def run(self, available_now: bool = True, final: bool = True,
            processing_time: str | None = None, timeout: float | None = None) -> StreamingReport:
        """Start the streaming query; with `available_now`, stop once the input available now
        is processed, then (with `final`) end every query at the largest timestamp seen."""
        from cq_service.io import open_sink
        from cq_service.io.dead_letter import DeadLetterSink

        for q in self.queries:
            q.sink = open_sink(self.spec.queries[q.name].sink, list(q.columns), list(q.types))
            q.relations = self._relations(q)
        self._dead_sink = DeadLetterSink(self.spec.dead_letter)
        try:
            stream = self._reader().writeStream.foreachBatch(self.batch).option(
                "checkpointLocation", str(self.checkpoint / "spark"))
            if available_now:
                stream = stream.trigger(availableNow=True)
            elif processing_time:
                stream = stream.trigger(processingTime=processing_time)
            with self._lock:
                if self._stopped:
                    return self.report
                query = self._query = stream.start()
            try:
                query.awaitTermination(timeout)
            except Exception:
                if not self._stopped:
                    raise
            if query.exception() is not None and not self._stopped:
                raise StreamingError(f"the streaming query failed: {query.exception()}")
            if query.isActive:
                query.stop()
            if final:
                self.finish()
        finally:
            for q in self.queries:
                if q.sink is not None:
                    q.sink.close()
            self._dead_sink.close()
            self.report.dead_letters = self._dead_sink.count
            if self._dead_topics is not None:
                self._dead_topics.close()
        return self.report

    def stop(self) -> None:
        """Stop the streaming query (from another thread) between micro-batches; `run` then
        returns."""
        with self._lock:
            self._stopped = True
            query = self._query
        with self._batch_lock:
            pass  # the micro-batch in progress, if any, finishes and commits
        if query is not None and query.isActive:
            query.stop()

    def _relations(self, q: _QueryRun) -> dict[str, bytes]:
        return {r: eis.to_ipc(eis.source_table(self.spec.relations[r], self.spec.time_unit))
                for r in q.part.relations}

    def _reader(self) -> Any:
        topics = sorted({self.spec.streams[s].source.options["topic"] for s in self.streams})
        servers = set()
        for s in self.streams:
            servers.update(bootstrap_servers(
                self.spec.streams[s].source.options.get("bootstrap_servers")))
        starts = {self.spec.streams[s].source.options.get("start", "earliest")
                  for s in self.streams}
        reader = (self.spark.readStream.format("kafka")
                  .option("kafka.bootstrap.servers", ",".join(sorted(servers)))
                  .option("subscribe", ",".join(topics))
                  .option("startingOffsets", "latest" if starts == {"latest"} else "earliest"))
        if self.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", self.max_offsets_per_trigger)
        return reader.load()

    def batch(self, df: Any, batch_id: int) -> None:
        """One micro-batch (the foreachBatch function; see the module docstring). After `stop`
        a batch fails before doing anything: Spark does not commit it, and replays it on the
        next start."""
        with self._batch_lock:
            if self._stopped:
                raise StreamingError("the job is stopping")
            self._batch(df, batch_id)

    def _batch(self, df: Any, batch_id: int) -> None:
        if batch_id <= self.state["batch"]:
            return  # committed before a restart: Spark replays it, we already did it
        started = time.perf_counter()
        decoded = self._decode(df)
        decoded.persist()
        try:
            side = decoded.where("_kind <> 0").toArrow()
            self._account(side)
            fresh = {r["_src"]: r["count"] for r in decoded.where(f"_kind = {ELEMENT}")
                     .groupBy("_src").count().collect()}
            self._has_new = {q.name: any(i in fresh for i in q.streams) for q in self.queries}
            kinds = side.column("_kind").to_numpy()
            read = sum(fresh.values()) + int(((kinds == MALFORMED) | (kinds == LATE)).sum())
            for q in self.queries:
                self._advance(q, decoded, self._heartbeat(q))
            self._dead_sink.flush()
            if self._dead_topics is not None:
                self._dead_topics.flush()
        finally:
            decoded.unpersist()
        self.state["batch"] = batch_id
        self._commit()
        self._drop_old_states()
        self.report.batches += 1
        self.report.batch_seconds.append(time.perf_counter() - started)
        self.report.batch_messages.append(read)

    def finish(self) -> None:
        """The end of input: every query's final heartbeat at the largest timestamp any of the
        job's streams saw (the embedded `cq run`'s end), and every stream's heartbeat with it."""
        seen = [s["max_seen"] for s in self.state["streams"].values() if s["max_seen"] != NONE]
        if not seen:
            return
        end = max(seen)
        empty = self.spark.createDataFrame([], decoding.element_ddl(self.spec, self.streams))
        self._has_new = {}
        for q in self.queries:
            self._advance(q, empty, end)
        for s in self.state["streams"].values():
            s["passed"] = max(s["passed"], end)
        self._commit()
        self._drop_old_states()

    def _decode(self, df: Any) -> Any:
        # Spark's Kafka source reads each topic partition's new offsets as one Spark partition
        # (no `minPartitions`), so the decoder sees every Kafka partition whole, in one task,
        # without a shuffle; `_account` checks it.
        rows = df.select("topic", "partition", "offset", "key", "value", "timestamp")
        clocks = {s: self.state["streams"][s] for s in self.streams}
        return rows.mapInArrow(decoding.decoder(self.spec, self.streams, clocks),
                               decoding.element_ddl(self.spec, self.streams))

    def _account(self, side: pa.Table) -> None:
        """Count and dead-letter the malformed and late rows; move the streams' clocks."""
        kinds = side.column("_kind").to_numpy()
        srcs = side.column("_src").to_numpy()
        for i, name in enumerate(self.streams):
            stream = self.spec.streams[name]
            mine = srcs == i
            clock = self.state["streams"][name]
            summary = side.filter(pa.array(mine & (kinds == SUMMARY)))
            parts = summary.column("_partition").to_pylist()
            if len(parts) != len(set(parts)):
                raise StreamingError(f"stream {name}: a Kafka partition's messages reached "
                                     "more than one decoding task; lateness needs them in one")
            for row in summary.select(["_partition", "_ts", "_promise"]).to_pylist():
                p = str(row["_partition"])
                if row["_ts"] is not None and row["_ts"] != NONE:
                    clock["latest"][p] = max(clock["latest"].get(p, NONE), row["_ts"])
                    clock["max_seen"] = max(clock["max_seen"], row["_ts"])
                if row["_promise"] is not None and row["_promise"] != NONE:
                    clock["promised"][p] = max(clock["promised"].get(p, NONE), row["_promise"])
            bad = side.filter(pa.array(mine & (kinds == MALFORMED)))
            late = side.filter(pa.array(mine & (kinds == LATE)))
            self.report.malformed[name] = self.report.malformed.get(name, 0) + bad.num_rows
            self.report.late[name] = self.report.late.get(name, 0) + late.num_rows
            self._dead_letter(name, bad)
            if stream.late == "dead_letter" and late.num_rows:
                cols = [f.name for f in stream.schema]
                data = late.select([eis.stream_column(i, j) for j in range(len(cols))])
                self._dead_sink.write(
                    LateElement(name, int(t), dict(zip(cols, json_safe(list(r.values())))), why)
                    for t, r, why in zip(late.column("_ts").to_pylist(), data.to_pylist(),
                                         late.column("_reason").to_pylist())
                )
            # The stream's heartbeat: the slowest partition's bound, or a promise.
            bounds = [m - stream.max_delay - 1 for m in clock["latest"].values()]
            skew = min(bounds) if bounds else NONE
            promises = list(clock["promised"].values())
            promise = max(promises) - 1 if promises else NONE
            clock["passed"] = max(clock["passed"], skew, promise)

    def _dead_letter(self, name: str, bad: pa.Table) -> None:
        if not bad.num_rows:
            return
        stream = self.spec.streams[name]
        opts = stream.source.options
        topic = opts["topic"]
        dlq = opts.get("dead_letter_topic") or f"{topic}.dlq"
        if self._dead_topics is None:
            self._dead_topics = KafkaWriter(bootstrap_servers(opts.get("bootstrap_servers")),
                                            error=StreamingError, span=stream.span)
        records = []
        for row in bad.select(["_partition", "_offset", "_reason", "_raw", "_mkey"]).to_pylist():
            headers = [
                ("cq.reason", row["_reason"].encode("utf-8")),
                ("cq.stream", name.encode("utf-8")),
                ("cq.source.topic", topic.encode("utf-8")),
                ("cq.source.partition", str(row["_partition"]).encode()),
                ("cq.source.offset", str(row["_offset"]).encode()),
            ]
            self._dead_topics.send(dlq, row["_raw"], row["_mkey"], headers)
            raw = "" if row["_raw"] is None else row["_raw"].decode("utf-8", errors="replace")
            records.append(DeadRecord(name, f"kafka:{topic}/{row['_partition']}",
                                      int(row["_offset"]), row["_reason"], raw))
        self._dead_sink.write(records)

    def _heartbeat(self, q: _QueryRun) -> int:
        """The query's heartbeat: the slowest of its streams'."""
        return min(self.state["streams"][self.streams[i]]["passed"] for i in q.streams)

    # the engine pass

    def _advance(self, q: _QueryRun, decoded: Any, beat: int) -> None:
        """Step `q`'s engines (one per bucket, `engine_steps`) over its new elements to `beat`;
        write the results released: those in (emitted, beat]."""
        from pyspark.sql import functions as F

        qs = self.state["queries"][q.name]
        emitted = qs["emitted"]
        beat = max(beat, emitted)
        if beat == emitted and not self._has_new.get(q.name, True):
            return  # nothing to feed, no time passed: the state stays as it is
        # The engine sees the query's streams in `q.part.streams` order: renumber _src and the
        # side-by-side columns to that order.
        renamed = [F.col("_ts"), F.col("_partition"), F.col("_offset")]
        src = F.lit(-1)
        for local, i in enumerate(q.streams):
            src = F.when(F.col("_src") == i, F.lit(local)).otherwise(src)
            width = len(self.spec.streams[self.streams[i]].schema)
            renamed += [F.col(eis.stream_column(i, j)).alias(eis.stream_column(local, j))
                        for j in range(width)]
        bucket = F.lit(0)
        if q.part.path == KEY:
            for i in q.streams:
                key = q.part.keys.get(self.streams[i])
                h = (F.xxhash64("_partition", "_offset") if key is None else
                     F.xxhash64(F.col(eis.stream_column(i, self._column(i, key)))))
                bucket = F.when(F.col("_src") == i, h).otherwise(bucket)
        new = decoded.where(F.col("_kind") == ELEMENT).where(F.col("_src").isin(list(q.streams)))
        # Spark's hash partitioner puts each key in one of the `buckets` partitions, the same
        # one at every batch: partition p is bucket p (single-key path: one partition).
        rows = new.select(*renamed, src.alias("_src"), bucket.alias("_part")).repartition(
            qs["buckets"], "_part")
        token = f"{self.state['batch'] + 1}-{os.urandom(6).hex()}"
        task = steps.StepTask(self.spec, q.name, q.part.streams,
                              str(self.checkpoint / "state" / q.name), qs["version"],
                              qs["token"], token, beat, qs["buckets"], q.relations)
        table = rows.mapInArrow(steps.step_runner(task.pickled()),
                                eis.result_ddl(q.types)).toArrow()
        self._write(q, table)
        qs["version"] += 1
        qs["token"] = token
        if beat > emitted:
            qs["emitted"] = beat
            self.report.ended_at[q.name] = beat
        stats = steps.step_stats(task.folder, qs["version"])
        stats["batch"] = self.report.batches  # the micro-batch's index (finish: one past)
        self.report.steps.setdefault(q.name, []).append(stats)

    def _column(self, i: int, name: str) -> int:
        return [f.name for f in self.spec.streams[self.streams[i]].schema].index(name)

    def _write(self, q: _QueryRun, table: pa.Table) -> None:
        if not table.num_rows:
            return
        batch = eis.ordered(table, len(q.types))
        q.sink.write(batch.ts, batch.w.astype(np.int8), list(batch.columns))
        q.sink.flush()
        self.report.results[q.name] = self.report.results.get(q.name, 0) + len(batch.ts)

    def _drop_old_states(self) -> None:
        """Remove the state versions before each query's committed one."""
        for q in self.queries:
            folder = self.checkpoint / "state" / q.name
            current = steps.version_dir(folder, self.state["queries"][q.name]["version"])
            if not folder.is_dir():
                continue
            for old in folder.iterdir():
                if old != current:
                    shutil.rmtree(old, ignore_errors=True)
