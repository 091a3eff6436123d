"""`cq bench backfill`: backfill throughput against `cq run` over the same history.

One run generates NEXMark events once (Parquet), archives the streams with `cq archive`'s job
(`batch.archive`, file sources), and for each query measures, `repeat` times, (a) `cq run` over
the Parquet files, in this process, and (b) `cq backfill` of the whole archive on a warm local
Spark session (its start-up excluded, as the peers' JVM start is in `cq bench nexmark`), after
one untimed run of each (the Python workers' imports, the JIT). The median of each gives
events/s (all generated events / seconds) and their ratio. Every backfill result must equal
`cq run`'s byte for byte, or the run fails. The machine's load average is reported with them.

The queries cover both paths: q1 (stateless) and q8 (a keyed join) take the key path, q5 and
q7 the single-partition path (docs/backfill.md).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from cq_service.batch.archive import archive_pipeline
from cq_service.batch.backfill import plan_backfill, run_backfill, spark_session
from cq_service.bench.cq_nexmark import NEXMARK_PIPELINE, one_query
from cq_service.catalog import Catalog
from cq_service.compiler import compile_pipeline
from cq_service.io import nexmark
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline

__all__ = ["QUERIES", "Row", "run", "text"]

QUERIES = ("q1", "q8", "q5", "q7")


@dataclass
class Row:
    query: str
    path: str
    reason: str
    run_seconds: list[float] = field(default_factory=list)
    backfill_seconds: list[float] = field(default_factory=list)
    events: int = 0
    results: int = 0
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before and after

    @property
    def run_rate(self) -> float:
        return self.events / statistics.median(self.run_seconds)

    @property
    def backfill_rate(self) -> float:
        return self.events / statistics.median(self.backfill_seconds)


def run(events: int, repeat: int = 3, queries: tuple[str, ...] = QUERIES,
        partitions: int | None = None, work: Path | None = None) -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="cq-bench-backfill-", dir=work) as tmp:
        d = Path(tmp)
        nexmark.write(d / "data", events)
        spark = spark_session(partitions)
        spark.sparkContext.setLogLevel("ERROR")
        spec = load_pipeline(NEXMARK_PIPELINE)
        rows = []
        for q in queries:
            one = one_query(spec, q, d / f"{q}.parquet", data=d / "data")
            with Catalog(f"sqlite:///{d / f'catalog-{q}.db'}") as catalog:  # runs are incremental
                catalog.upgrade()
                archive_pipeline(one, catalog, root=d / f"archive-{q}", spark=spark)
                # Where `cq run` ends: the largest timestamp of the query's inputs (each file
                # archived to its end, so its boundary is its largest _ts).
                end = max(catalog.archive_boundary(one.name, s) for s in one.streams)
            plan = plan_backfill(one, q, end=end, root=d / f"archive-{q}")
            row = Row(q, plan.partitioning.path, plan.partitioning.reason, events=events)
            before = os.getloadavg()[0]
            for k in range(repeat + 1):  # the first run warms up, untimed
                start = time.perf_counter()
                run_pipeline(compile_pipeline(one))
                seconds = time.perf_counter() - start
                report = run_backfill(plan, spark, out=d / f"bf-{q}", partitions=partitions)
                if k:
                    row.run_seconds.append(seconds)
                    row.backfill_seconds.append(report.seconds)
                expected = pq.read_table(d / f"{q}.parquet")
                got = pq.read_table(d / f"bf-{q}" / "part-0.parquet")
                if not got.equals(expected):
                    raise AssertionError(f"{q}: the backfill differs from cq run")
                row.results = got.num_rows
            row.load = (before, os.getloadavg()[0])
            rows.append(row)
        return rows


def text(rows: list[Row], events: int, repeat: int, cores: int) -> str:
    lines = [
        f"Backfill vs cq run: NEXMark, {events:,} events, median of {repeat} after a warm-up, "
        f"{cores} cores (local Spark, warm session)",
        "",
        f"{'query':6} {'path':7} {'cq run ev/s':>14} {'backfill ev/s':>14} {'ratio':>7}  "
        f"{'results':>9}  load (1 min, before/after)",
    ]
    for r in rows:
        lines.append(f"{r.query:6} {r.path:7} {r.run_rate:14,.0f} {r.backfill_rate:14,.0f} "
                     f"{r.backfill_rate / r.run_rate:7.2f}  {r.results:9,}  "
                     f"{r.load[0]:.2f} / {r.load[1]:.2f}")
    lines.append("")
    lines += [f"{r.query}: {r.path} path: {r.reason}" for r in rows]
    return "\n".join(lines)
