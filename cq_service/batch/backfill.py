"""Backfill: a query's results over the archived past, computed on Spark by our own engine.

    plan = plan_backfill(spec, "q8", start=T1, end=T2)     # the path, the bounds, the feed
    report = run_backfill(plan, spark, out=Path("out/q8"))  # or sink=True: the query's sink

Spark reads each stream's archive (`batch.layout`) from the first instant the results at T1
depend on (`feed_from`, see `partitioning.history_reach`) to T2, hashes it on the key
`partitioning.analyze` chose (the key path) or keeps it in one partition (the single path),
sorts every partition in replay order (``_ts``, ``_partition``, ``_offset``) and runs the engine
in each (`engine_in_spark`), which ends at T2 and keeps the results with ``_ts`` >= T1. The
driver merges them by ``_ts``: within one ``_ts``, retractions first, then by the row's values
(NULL first) — the canonical order `cq run` writes (`engine.consolidate.canonical_order`), so
the files are byte-identical to `cq run`'s on the same input.

The results at an instant are final only once no element at or before it can still come, so T2
is at most the archive's completeness boundary (the default). docs/backfill.md has the rest.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cq_service.batch import backfill_tasks as bt
from cq_service.batch import engine_in_spark as eis
from cq_service.batch.layout import ARCHIVE_COLUMNS, archive_root, archive_schema
from cq_service.batch.partitioning import KEY, Partitioning, analyze
from cq_service.compiler import compile_pipeline, subset
from cq_service.engine.operators.base import NEVER
from cq_service.errors import CQError
from cq_service.io import open_sink
from cq_service.spec.model import PipelineSpec
from cq_service.types import DataType

__all__ = [
    "BackfillError",
    "BackfillPlan",
    "BackfillReport",
    "plan_backfill",
    "run_backfill",
    "spark_session",
]


class BackfillError(CQError):
    """A backfill that cannot run as asked (unknown query, no boundary, T1 > T2)."""


@dataclass(frozen=True)
class BackfillPlan:
    """A backfill of `query` over [start, end]. `start` None: from the archive's first element.
    `feed_from` is the first ``_ts`` read from the archive (None: everything)."""

    spec: PipelineSpec
    query: str
    partitioning: Partitioning
    start: int | None
    end: int
    feed_from: int | None
    root: Path
    columns: tuple[str, ...]
    types: tuple[DataType, ...]

    def describe(self) -> str:
        feed = "the archive's start" if self.feed_from is None else str(self.feed_from)
        start = "the archive's start" if self.start is None else str(self.start)
        return (
            f"{self.query}: {self.partitioning.describe()}\n"
            f"  results for [{start}, {self.end}]; archive read from {feed} "
            f"(window reach {'unbounded' if self.partitioning.reach is None else self.partitioning.reach})"
        )


@dataclass
class BackfillReport:
    plan: BackfillPlan
    seconds: float
    elements: int  # result elements written
    inputs: dict[str, int] = field(default_factory=dict)  # archived elements read per stream
    partitions: int = 1
    table: pa.Table | None = None  # the merged result (``_ts``, ``_op``, columns)


def plan_backfill(
    spec: PipelineSpec,
    query: str,
    *,
    start: int | None = None,
    end: int | None = None,
    root: str | Path | None = None,
    boundary: Callable[[str], int | None] | None = None,
) -> BackfillPlan:
    """The backfill of `query` over [start, end]; `end` defaults to the smallest completeness
    boundary (`boundary(stream)`, e.g. the catalog's) of the streams it reads."""
    if query not in spec.queries:
        raise BackfillError(f"no query {query!r} in pipeline {spec.name!r}")
    compiled = compile_pipeline(subset(spec, [query]))
    bound = next(q for q in compiled.queries if q.name == query)
    part = analyze(bound)
    if end is None:
        known = [boundary(s) if boundary else None for s in part.streams]
        if not part.streams or any(b is None for b in known):
            raise BackfillError(
                f"{query}: no completeness boundary is recorded for its streams "
                "(run `cq archive` first, or give --to)"
            )
        end = min(b for b in known if b is not None)
    if start is not None and start > end:
        raise BackfillError(f"{query}: --from {start} is after --to {end}")
    feed_from = None
    if start is not None and part.reach is not None:
        feed_from = start - 1 - part.reach
    sink = next(s for s in compiled.plan.sinks if s.query == query) if spec.queries[
        query].sink else None
    if sink is not None:
        columns, types = tuple(sink.columns), tuple(sink.types)
    else:
        columns, types = eis.result_schema(spec, query)
    return BackfillPlan(spec, query, part, start, end, feed_from, archive_root(spec, root),
                        columns, types)


def spark_session(partitions: int | None = None, master: str | None = None) -> Any:
    """The batch jobs' SparkSession (`batch.spark.session`; no Kafka jars: backfill reads the
    archive only), local with `partitions` cores unless `master` says otherwise."""
    from cq_service.batch.spark import session

    cores = partitions or os.cpu_count() or 2
    return session(
        master=master or f"local[{cores}]",
        app_name="cq-backfill",
        conf={
            "spark.sql.shuffle.partitions": cores,
            "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
            "spark.sql.execution.arrow.maxRecordsPerBatch": 65_536,
            "spark.ui.showConsoleProgress": "true",
            "spark.driver.memory": "2g",
            # The tasks' results (Arrow IPC) go straight to the driver, not via the block manager.
            "spark.task.maxDirectResultSize": "512m",
        },
        kafka=False,
    )


def run_backfill(
    plan: BackfillPlan,
    spark: Any,
    *,
    out: Path | None = None,
    sink: bool = False,
    partitions: int | None = None,
    progress: bool = False,
    keep_table: bool = False,
    spread: str | None = None,
) -> BackfillReport:
    """Run `plan` on `spark`; write the results to Parquet under `out` (``part-0.parquet``)
    and/or to the query's sink (`sink`). `spread` forces how keyed streams reach their tasks
    (``filter`` or ``shuffle``, see `backfill_tasks`); None chooses by the archive's size."""
    started = time.perf_counter()
    part = plan.partitioning
    spec = plan.spec
    sc = spark.sparkContext
    n_parts = 1 if part.path != KEY else (partitions or sc.defaultParallelism)
    job = _job(plan, n_parts)
    splits = [
        bt.list_splits(plan.root, s, i, spec.time_unit, plan.feed_from, plan.end)
        for i, s in enumerate(part.streams)
    ]
    with _TaskProgress(spark, enabled=progress):
        results = _run_tasks(sc, job, splits, spread)
    inputs = {s: sum(c.get(i, 0) for c, _ in results) for i, s in enumerate(part.streams)}
    tables = [pa.ipc.open_stream(data).read_all() for _, data in results]
    merged = _merge(pa.concat_tables(tables), len(plan.types))
    _write(plan, merged, out, sink)
    report = BackfillReport(plan, time.perf_counter() - started, merged.num_rows, inputs, n_parts)
    if keep_table:
        report.table = merged
    return report


def _job(plan: BackfillPlan, tasks: int) -> bt.Job:
    """What every task of `plan`'s job gets (`backfill_tasks.Job`)."""
    part, spec = plan.partitioning, plan.spec
    relations = {}
    for r in part.relations:
        table = eis.source_table(spec.relations[r], spec.time_unit)
        mask = np.asarray(table.column("_ts").to_numpy() <= plan.end)
        relations[r] = eis.to_ipc(table.filter(pa.array(mask)))
    emit_from = plan.start if plan.start is not None else NEVER
    task = eis.EngineTask(spec, plan.query, part.streams, int(emit_from), plan.end, relations,
                          ordered=False)  # `_merge` orders the results
    keys = tuple(part.keys.get(s) if part.path == KEY else None for s in part.streams)
    used = eis.source_columns(spec, plan.query)
    schemas = tuple(archive_schema(spec.streams[s]) for s in part.streams)
    columns = tuple(
        tuple(c for c in schema.names if c in used.get(s, schema.names) or c == key
              or c in ARCHIVE_COLUMNS)
        for s, schema, key in zip(part.streams, schemas, keys, strict=True)
    )
    job = bt.Job(task.pickled(), schemas, columns, keys, plan.feed_from, plan.end, tasks)
    return job


def _run_tasks(sc: Any, job: bt.Job, splits: list[list[bt.Split]],
               spread: str | None) -> list[bt.TaskResult]:
    """The backfill's one Spark job (`backfill_tasks` describes the spreads): every task's
    result."""
    n = job.tasks
    keyed = [s for i, ss in enumerate(splits) if job.keys[i] is not None for s in ss]
    own = [s for i, ss in enumerate(splits) if job.keys[i] is None for s in ss]
    if spread is None:
        spread = "filter" if (n - 1) * sum(s.nbytes for s in keyed) <= bt.FILTER_LIMIT \
            else "shuffle"
    if spread not in ("filter", "shuffle"):
        raise BackfillError(f"unknown spread {spread!r} (filter or shuffle)")
    if not keyed:
        shares = bt.assign(own, n)
        return sc.parallelize(shares, n).map(partial(bt.direct_task, job)).collect()
    if spread == "filter":
        shares = bt.assign(own, n)
        return (sc.parallelize(list(enumerate(shares)), n)
                .map(lambda a: bt.filter_task(job, a[0], a[1], keyed)).collect())
    shares = bt.assign(own + keyed, n)
    return (sc.parallelize(list(enumerate(shares)), n)
            .flatMap(lambda a: bt.map_task(job, a[0], a[1]))
            .partitionBy(n, _bucket)
            .mapPartitions(lambda got: [bt.reduce_task(job, got)])
            .collect())


def _bucket(key: int) -> int:
    """The shuffle's partition of a bucket: itself."""
    return key


def _merge(table: pa.Table, width: int) -> pa.Table:
    """The partitions' results in one table in `cq run`'s order (by _ts, − before +, values)."""
    if table.num_rows == 0:
        return table
    batch = eis.ordered(table, width)
    return pa.Table.from_arrays(
        [pa.array(batch.ts), pa.array(batch.w.astype(np.int8)), *batch.columns],
        names=table.column_names,
    )


def _write(plan: BackfillPlan, table: pa.Table, out: Path | None, sink: bool) -> None:
    width = len(plan.columns)
    ts = table.column("_ts").to_numpy() if table.num_rows else np.empty(0, np.int64)
    ops = table.column("_op").to_numpy() if table.num_rows else np.empty(0, np.int8)
    cols = [table.column(f"c{i}").combine_chunks() for i in range(width)]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        signs = pc.if_else(pa.array(ops > 0, pa.bool_()), "+", "-").cast(pa.string())
        named = pa.Table.from_arrays(
            [pa.array(ts, pa.int64()), signs, *cols], names=["_ts", "_op", *plan.columns],
        )
        pq.write_table(named, out / "part-0.parquet")
    if sink:
        spec = plan.spec.queries[plan.query].sink
        if spec is None:
            raise BackfillError(f"{plan.query} is a view: it has no sink (use --out)")
        writer = open_sink(spec, list(plan.columns), list(plan.types))
        try:
            step = 65_536
            for k in range(0, len(ts), step):
                writer.write(ts[k:k + step], ops[k:k + step], [c.slice(k, step) for c in cols])
        finally:
            writer.close()


class _TaskProgress:
    """A rich bar of the Spark tasks done, polled from the status tracker while a job runs."""

    def __init__(self, spark: Any, enabled: bool):
        self.spark, self.enabled = spark, enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _TaskProgress:
        if self.enabled:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _poll(self) -> None:
        from rich.progress import Progress

        tracker = self.spark.sparkContext.statusTracker()
        with Progress() as bars:
            tasks: dict[int, Any] = {}
            while True:
                stopping = self._stop.is_set()
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info is None:
                        continue
                    if sid not in tasks:
                        tasks[sid] = bars.add_task(f"stage {sid} tasks", total=info.numTasks)
                    bars.update(tasks[sid], completed=info.numCompletedTasks)
                if stopping:
                    for bar in tasks.values():
                        total = bars.tasks[bar].total or 0
                        bars.update(bar, completed=total)
                    return
                self._stop.wait(0.25)
