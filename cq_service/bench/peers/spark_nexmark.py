"""Spark Structured Streaming peer of `cq bench nexmark` (standalone: no cq_service import).

    python spark_nexmark.py --data DIR --query qN --out OUT.parquet

Runs one NEXMark query as a Spark Structured Streaming job over DIR/{person,auction,bid}.parquet
(local[2], 2 shuffle partitions, default state store), writes the query's comparable result to
OUT.parquet and prints one JSON line on stdout (Spark's logs go to stderr). Every query uses
Spark's built-in (JVM) operators only: no Python UDFs and no applyInPandasWithState /
transformWithState, which would need pandas and Python workers; chained stateful operators in
append mode (Spark >= 3.5) and `max_by(x, y, k)` (Spark >= 4.2) make them unnecessary.

How every query runs
--------------------
* Sources: `spark.readStream.parquet(DIR)` with an explicit schema and a `pathGlobFilter` picking
  the table's file. Times are int64 ms; `timestamp_millis` turns them into event-time columns
  where a window or a watermark needs one.
* Trigger: `availableNow`, so the bounded input is processed as a stream and the query stops.
  Spark's file source splits its input by file, so each (single) input file is read in ONE
  micro-batch; then Spark runs a no-data micro-batch in which the advanced watermark closes the
  remaining windows and auctions. `latency_ms` is therefore not measured (null).
* Sink: the native parquet file sink in append mode (the only mode the file sink supports). The
  sink is read back afterwards (untimed) to build OUT.parquet; `rows` is what the sink received.
* Time ("seconds", in-process, the same boundaries as the other engines): from defining the
  query's DataFrames (their analysis, the end-of-input marker files of q4 and q6), through
  `start()` (planning, whole-stage code generation, opening the sources) to
  `awaitTermination()` (every micro-batch and the sink's commit). Not counted: the interpreter,
  the JVM and the SparkSession, which are started first; no warm-up job is run. The benchmark
  also times the whole process, spawn to exit.
* End of input: append mode emits a window or an aggregate group only once the watermark has
  passed it, and Spark (unlike Flink) does not advance the watermark to +infinity at the end of a
  bounded source. q5 and q7 need nothing extra (see below). q4 and q6 need every auction to close,
  i.e. the watermark to pass the last `expires`: each of their two input streams is read from a
  temporary folder holding a symbolic link to the data file and an end-of-input marker file, one
  row dated far in the future (year 2100). The file source takes the oldest file first and here
  one file per micro-batch (`maxFilesPerTrigger` 1), so the marker arrives in a micro-batch of
  its own after all the data. The markers match nothing (auction -1 gets no bid before it
  expires): they only move the watermark, like Flink's final watermark.

The queries (CQL in pipelines/nexmark/nexmark.yaml)
---------------------------------------------------
q0  Bid projected to all columns: stateless select. No deviation.
q1  `price * 89 div 100` (integer division): stateless select. No deviation.
q2  `auction IN (...)` filter: stateless. No deviation.
q3  Stream-stream inner join Auction x Person on seller = id with the selections pushed below
    it; no watermark, so both sides stay in state for ever, like CQL's [Rows Unbounded]. No
    deviation.
q4  winning bids: stream-stream inner join Auction x Bid on id = auction AND B.time < expires
    (watermarks: `expires` with 10 min of delay, bids 0 s; the redundant bound
    B.time >= expires - 10 min, true as bids follow their auction and auctions last < 10 min,
    lets Spark drop join state), then MAX(price) grouped by the auction and its `expires`: an
    append-mode aggregation keyed on the watermarked `expires`, so each auction is emitted
    exactly when it closes, like CQL's ClosedAuction stream. Then a stream-static join with the
    Category table and AVG(final) per category. Deviation: Spark's append mode allows an
    aggregation after an aggregation only if it is grouped by event time, so the running average
    is grouped by (category, one event-time window spanning the whole input) and emitted once,
    at end of input (marker above): only the final value, not CQL's running one.
q5  Each bid is assigned explicitly to every minute boundary t0 with dateTime in
    [t0 - 3600000, t0] (`explode(sequence(...))`) and t0 is the event time, with a watermark
    delay of 60 minutes: a window is emitted once the newest bid's last boundary is 60 minutes
    past t0, i.e. once the bids have reached t0. COUNT(*) per (t0, auction), then a chained
    aggregation per t0 collects (auction, count) and keeps the auctions with the maximal count.
    Deviation from the plain `window("ts", "3600001 milliseconds", "1 minute")` with
    t0 = end - 1 (which gives the same windows): a [start, end) window ends 1 ms after its
    boundary, so at the end of the input the window of the last boundary, if a bid falls exactly
    on it, stays open unless an end-of-input marker follows, and a marker would also fire the ~60
    later windows, which CQL never produces. With t0 as event time exactly the windows with
    t0 <= the last bid's time are emitted, without a marker.
q6  winning bids as in q4, then per seller `max_by(final, expires, 10)` (the 10 finals with
    the latest closing times; Spark >= 4.2) and their average. Deviations: no row-count windows
    in Structured Streaming, so a bounded top-10 aggregate stands in for [Partition By seller
    Rows 10]; as in q4 it is grouped by one window spanning the whole input and emitted once at
    end of input. Ties in `expires` within a seller are broken arbitrarily.
q7  Bids assigned to the minute boundaries t0 with dateTime in [t0 - 60000, t0] (one or two
    each) as in q5; MAX(price) per t0 (watermark delay 1 minute on t0), then a stream-stream
    join of that aggregate with the (again assigned) bids on t0 and price = max: every bid with
    the window's maximal price. Deviation: explicit boundaries instead of
    `window("ts", "60001 milliseconds", "1 minute")`, for the end-of-input reason given in q5.
q8  Stream-stream inner join Person x Auction on id = seller with
    A.time BETWEEN P.time - 12 h AND P.time + 12 h (watermarks 0 s: both files are sorted by
    time, so Spark drops join state older than 12 h). No deviation.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cq_service.bench.peers.spark_local import local_session

TABLES: dict[str, list[tuple[str, str]]] = {
    "person": [
        ("id", "bigint"), ("name", "string"), ("emailAddress", "string"),
        ("creditCard", "string"), ("city", "string"), ("state", "string"),
        ("dateTime", "bigint"), ("extra", "string"),
    ],
    "auction": [
        ("id", "bigint"), ("itemName", "string"), ("description", "string"),
        ("initialBid", "bigint"), ("reserve", "bigint"), ("dateTime", "bigint"),
        ("expires", "bigint"), ("seller", "bigint"), ("category", "bigint"), ("extra", "string"),
    ],
    "bid": [
        ("auction", "bigint"), ("bidder", "bigint"), ("price", "bigint"), ("channel", "string"),
        ("url", "string"), ("dateTime", "bigint"), ("extra", "string"),
    ],
}
ARROW_TYPES = {"bigint": pa.int64(), "string": pa.string(), "double": pa.float64()}

# Comparable results: columns of OUT.parquet, in order, with their types.
RESULTS: dict[str, list[tuple[str, str]]] = {
    "q0": TABLES["bid"],
    "q1": [("auction", "bigint"), ("price", "bigint"), ("bidder", "bigint"),
           ("dateTime", "bigint")],
    "q2": [("auction", "bigint"), ("price", "bigint")],
    "q3": [("name", "string"), ("city", "string"), ("state", "string"), ("id", "bigint")],
    "q4": [("category", "bigint"), ("avg", "double")],
    "q5": [("t0", "bigint"), ("auction", "bigint")],
    "q6": [("seller", "bigint"), ("avg", "double")],
    "q7": [("t0", "bigint"), ("auction", "bigint"), ("price", "bigint"), ("bidder", "bigint")],
    "q8": [("id", "bigint"), ("name", "string"), ("reserve", "bigint")],
}

CATEGORIES = [(10, "collectibles"), (11, "electronics"), (12, "fashion"), (13, "home"),
              (14, "sports")]
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
END_OF_INPUT_MS = 4_102_444_800_000  # 2100-01-01: the end-of-input marker's event time
WHOLE_INPUT = "36500 days"  # one event-time window [1970, 2069] holding all the input
HOT_ITEMS = (1007, 1020, 2001, 2019, 2087)

NOTES = {
    "q0": "stateless select, parquet sink (append)",
    "q1": "stateless select (price * 89 div 100), parquet sink (append)",
    "q2": "stateless filter, parquet sink (append)",
    "q3": "stream-stream inner join without watermark (unbounded state), append",
    "q4": "winning bids = stream-stream join + MAX per auction keyed on watermarked expires "
          "(emitted at close); AVG per category grouped by one event-time window spanning the "
          "input (append mode allows aggregation after aggregation only by event time), so only "
          "the final average is emitted; an end-of-input marker event (year 2100) advances the "
          "watermark so every auction closes",
    "q5": "windows assigned explicitly (explode of the minute boundaries t0 with dateTime in "
          "[t0-3600000, t0]) with t0 as event time (60 min watermark delay), COUNT per "
          "(t0, auction), chained aggregation per t0 keeping the max-count auctions; not "
          "window(), whose [start,end) window of the last boundary needs an end-of-input marker",
    "q6": "winning bids as q4; per seller max_by(final, expires, 10) (no row windows in "
          "Structured Streaming) averaged, grouped by one event-time window spanning the input, "
          "emitted once after an end-of-input marker event (year 2100)",
    "q7": "windows assigned explicitly (minute boundaries t0 with dateTime in [t0-60000, t0], "
          "t0 as event time), MAX(price) per t0 joined back to the bids on t0 and price "
          "(stream-stream join after an aggregation)",
    "q8": "stream-stream inner join with a +-12 h event-time range condition, 0 s watermarks",
}


def log(msg: str) -> None:
    print(f"[spark_nexmark] {msg}", file=sys.stderr, flush=True)


def ddl(columns: list[tuple[str, str]]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in columns)


def arrow_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    return pa.schema([(name, ARROW_TYPES[kind]) for name, kind in columns])


class Job:
    """The Spark session, the input folder and a scratch folder for sinks and checkpoints."""

    def __init__(self, spark: SparkSession, data: str, work: str) -> None:
        self.spark = spark
        self.data = data
        self.work = work

    def stream(self, table: str, end_marker: dict | None = None):
        """The table's file as a stream; with end_marker, followed by that one marker row."""
        reader = self.spark.readStream.schema(ddl(TABLES[table]))
        data_file = os.path.join(self.data, f"{table}.parquet")
        if end_marker is None:
            return reader.option("pathGlobFilter", f"{table}.parquet").parquet(self.data)
        # A source folder holding (a link to) the data file and then a one-row marker file.
        # The file source takes new files oldest first, here one per micro-batch, so the marker
        # (dated after the data) is read in a micro-batch of its own, after all the data.
        folder = tempfile.mkdtemp(prefix=f"{table}-", dir=self.work)
        os.symlink(data_file, os.path.join(folder, f"{table}.parquet"))
        marker = os.path.join(folder, "zz-end-of-input.parquet")
        row = {name: end_marker.get(name, "" if kind == "string" else -1)
               for name, kind in TABLES[table]}
        pq.write_table(pa.Table.from_pylist([row], schema=arrow_schema(TABLES[table])), marker)
        later = os.stat(data_file).st_mtime + 60
        os.utime(marker, (later, later))
        return reader.option("maxFilesPerTrigger", 1).parquet(folder)


def q0(job: Job):
    return job.stream("bid").select(*(name for name, _ in TABLES["bid"]))


def q1(job: Job):
    return job.stream("bid").select(
        "auction", F.expr("price * 89 div 100").alias("price"), "bidder", "dateTime")


def q2(job: Job):
    return job.stream("bid").where(F.col("auction").isin(*HOT_ITEMS)).select("auction", "price")


def q3(job: Job):
    a = job.stream("auction").where(F.col("category") == 10).select(
        F.col("id").alias("aid"), "seller")
    p = job.stream("person").where(F.col("state").isin("OR", "ID", "CA")).select(
        F.col("id").alias("pid"), "name", "city", "state")
    return a.join(p, F.col("seller") == F.col("pid")).select(
        "name", "city", "state", F.col("aid").alias("id"))


def winning_bids(job: Job):
    """(aid, seller, category, expires, final) once per auction with a bid, when it closes."""
    a = (job.stream("auction", {"dateTime": END_OF_INPUT_MS, "expires": END_OF_INPUT_MS})
         .select(F.col("id").alias("aid"), "seller", "category",
                 F.timestamp_millis("expires").alias("expires"))
         .withWatermark("expires", "10 minutes"))
    b = (job.stream("bid", {"dateTime": END_OF_INPUT_MS})
         .select("auction", "price", F.timestamp_millis("dateTime").alias("btime"))
         .withWatermark("btime", "0 seconds"))
    joined = a.join(b, F.expr(
        "auction = aid AND btime < expires AND btime >= expires - INTERVAL 10 MINUTES"))
    return joined.groupBy("aid", "seller", "category", "expires").agg(
        F.max("price").alias("final"))


def q4(job: Job):
    categories = job.spark.createDataFrame(CATEGORIES, "cid bigint, cname string")
    wins = winning_bids(job).join(categories, F.col("category") == F.col("cid"))
    return (wins.groupBy("cid", F.window("expires", WHOLE_INPUT))
            .agg(F.avg("final").alias("avg"))
            .select(F.col("cid").alias("category"), "avg"))


def q6(job: Job):
    last10 = (winning_bids(job).groupBy("seller", F.window("expires", WHOLE_INPUT))
              .agg(F.max_by("final", "expires", 10).alias("finals")))
    return last10.select(
        "seller",
        F.expr("aggregate(finals, CAST(0 AS DOUBLE), (s, x) -> s + x) / size(finals)")
        .alias("avg"))


def bids_by_boundary(job: Job, range_ms: int):
    """Bids with one row per minute boundary t0 such that dateTime is in [t0 - range, t0]."""
    first = F.expr(f"(dateTime + {MINUTE_MS - 1}) div {MINUTE_MS} * {MINUTE_MS}")
    last = F.expr(f"(dateTime + {range_ms}) div {MINUTE_MS} * {MINUTE_MS}")
    return (job.stream("bid")
            .select("auction", "price", "bidder",
                    F.explode(F.sequence(first, last, F.lit(MINUTE_MS))).alias("t0"))
            .withColumn("t0", F.timestamp_millis("t0"))
            # A window is complete once the bids have reached its boundary t0, i.e. once the
            # largest t0 seen (the newest bid's last boundary) is `range` past it.
            .withWatermark("t0", f"{range_ms} milliseconds"))


def q5(job: Job):
    counts = bids_by_boundary(job, HOUR_MS).groupBy("t0", "auction").agg(
        F.count("*").alias("num"))
    hottest = counts.groupBy("t0").agg(
        F.max("num").alias("maxnum"),
        F.collect_list(F.struct("auction", "num")).alias("counts"))
    return (hottest
            .select("t0", F.explode(F.expr("filter(counts, c -> c.num = maxnum)")).alias("c"))
            .select(F.unix_millis("t0").alias("t0"), F.col("c.auction").alias("auction")))


def q7(job: Job):
    highest = (bids_by_boundary(job, MINUTE_MS).groupBy("t0")
               .agg(F.max("price").alias("maxprice"))
               .withColumnRenamed("t0", "mt0"))
    bids = bids_by_boundary(job, MINUTE_MS)
    return (bids.join(highest, F.expr("t0 = mt0 AND price = maxprice"))
            .select(F.unix_millis("t0").alias("t0"), "auction", "price", "bidder"))


def q8(job: Job):
    p = (job.stream("person")
         .select(F.col("id").alias("pid"), "name", F.timestamp_millis("dateTime").alias("ptime"))
         .withWatermark("ptime", "0 seconds"))
    a = (job.stream("auction")
         .select("seller", "reserve", F.timestamp_millis("dateTime").alias("atime"))
         .withWatermark("atime", "0 seconds"))
    return p.join(a, F.expr(
        "pid = seller AND atime BETWEEN ptime - INTERVAL 12 HOURS AND ptime + INTERVAL 12 HOURS"
    )).select(F.col("pid").alias("id"), "name", "reserve")


QUERIES = {"q0": q0, "q1": q1, "q2": q2, "q3": q3, "q4": q4, "q5": q5, "q6": q6, "q7": q7,
           "q8": q8}


def spark_session() -> SparkSession:
    return local_session(
        "nexmark-peer", config={"spark.sql.streaming.noDataMicroBatches.enabled": "true"}
    )


def run(args: argparse.Namespace) -> dict:
    report = {"engine": "spark", "query": args.query, "supported": True,
              "note": NOTES[args.query], "seconds": None, "rows": None, "latency_ms": None}
    spark = spark_session()
    work = tempfile.mkdtemp(prefix="spark-nexmark-")
    try:
        started = time.perf_counter()
        job = Job(spark, os.path.abspath(args.data), work)
        result = QUERIES[args.query](job)
        sink = os.path.join(work, "sink")
        writer = (result.writeStream.format("parquet").outputMode("append")
                  .option("path", sink)
                  .option("checkpointLocation", os.path.join(work, "checkpoint"))
                  .trigger(availableNow=True))
        query = writer.start()
        query.awaitTermination()
        report["seconds"] = round(time.perf_counter() - started, 3)
        for progress in query.recentProgress:
            log(f"batch {progress['batchId']}: {progress['numInputRows']} input rows, "
                f"{progress['durationMs'].get('triggerExecution')} ms, "
                f"watermark {progress.get('eventTime', {}).get('watermark')}")

        columns = RESULTS[args.query]
        # Read the sink back through its commit log (only committed files).
        table = (spark.read.schema(result.schema).parquet(sink)
                 .select(*(name for name, _ in columns)).toArrow())
        report["rows"] = table.num_rows
        pq.write_table(table.cast(arrow_schema(columns)), args.out)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="folder with person/auction/bid.parquet")
    parser.add_argument("--query", required=True, choices=sorted(QUERIES))
    parser.add_argument("--out", required=True, help="the comparable result (parquet file)")
    args = parser.parse_args()
    print(json.dumps(run(args)), flush=True)


if __name__ == "__main__":
    main()
