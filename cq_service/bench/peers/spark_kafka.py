"""Spark Structured Streaming peer of `cq bench kafka` (standalone: no cq_service import).

    python spark_kafka.py --bootstrap HOST:PORT --query Q --bids TOPIC --asks TOPIC \
        --out TOPIC --jars JAR,JAR --work DIR

Reads the input topics with Spark's Kafka connector from the earliest offsets to the latest as
of the start (trigger `availableNow`), parses the JSON values with `from_json`, runs the query
with Spark's built-in operators only (no Python UDFs), writes each result row as a JSON message
to the output topic with the connector's Kafka sink, and exits once the query has terminated
(every micro-batch done and the sink's producer flushed). local[2], 2 shuffle partitions.

With `--live N` (the bench's latency phase, its input still being produced) the query runs with
the default trigger (each micro-batch as soon as the last is done) and follows its topics; it
is stopped once its micro-batches have read N input messages and no micro-batch has run for
3 s after them (the no-data batches, which let the advanced watermark close windows, run at
once).

The queries (the CQL is in cq_service/bench/kafka_bench.py):
pass-through  auction, price of every bid.
filter        the same, where price % 123 = 0.
sliding-agg   `window(ts, "10 seconds", "1 second")` grouped with auction, COUNT(*), append mode
              with a 10 s watermark; `t0` = window end - 1 s, which is CQL's window boundary (the
              bench's times are whole seconds: Spark's [start, end) holds the seconds
              t0 - 9 s .. t0, as CQL's [Range 9999 ms Slide 1 s] at t0). Spark emits a window
              only once its watermark has passed it, so the bench compares the windows with
              t0 <= last time - 30 s.
join          bids ⋈ asks on auction and asks' time within ±1 s of the bid's (watermarks 10 s),
              an inner stream-stream join, which emits each pair once.
nexmark-q1    auction, price * 89 div 100, bidder, dateTime of every NEXMark bid.
nexmark-q5    as spark_nexmark.py's q5: each bid assigned to the minute boundaries t0 with
              dateTime in [t0 - 60 min, t0] (watermark delay 60 min on t0), COUNT(*) per
              (t0, auction), then per t0 the auctions with the largest count (a chained
              aggregation collecting (auction, count)); `t0` is written with each row.
nexmark-q7    as spark_nexmark.py's q7: each bid assigned to the minute boundaries t0 with
              dateTime in [t0 - 1 min, t0], MAX(price) per t0, joined back to the bids on t0
              and price; `t0` is written with each row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cq_service.bench.peers.spark_local import local_session

SCHEMA = "id BIGINT, auction BIGINT, bidder BIGINT, price BIGINT, dateTime BIGINT"
NEXMARK_SCHEMA = ("auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
                  "dateTime BIGINT, extra STRING")
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS


def read(spark: SparkSession, bootstrap: str, topic: str, schema: str = SCHEMA):
    raw = (spark.readStream.format("kafka")
           .option("kafka.bootstrap.servers", bootstrap)
           .option("subscribe", topic)
           .option("startingOffsets", "earliest")
           .option("failOnDataLoss", "false")
           .load())
    cols = F.from_json(F.col("value").cast("string"), schema).alias("v")
    return (raw.select(cols).select("v.*")
            .withColumn("ts", F.timestamp_millis(F.col("dateTime"))))


def bids_by_boundary(bids, range_ms: int = MINUTE_MS):
    """One row per minute boundary t0 with dateTime in [t0 - range, t0] (as spark_nexmark.py's
    q5 and q7), t0 the event time with a watermark delay of `range`."""
    first = F.expr(f"(dateTime + {MINUTE_MS - 1}) div {MINUTE_MS} * {MINUTE_MS}")
    last = F.expr(f"(dateTime + {range_ms}) div {MINUTE_MS} * {MINUTE_MS}")
    return (bids.select("auction", "price", "bidder",
                        F.explode(F.sequence(first, last, F.lit(MINUTE_MS))).alias("t0"))
            .withColumn("t0", F.timestamp_millis("t0"))
            .withWatermark("t0", f"{range_ms} milliseconds"))


def build(spark: SparkSession, args):
    if args.query == "nexmark-q1":
        bids = read(spark, args.bootstrap, args.bids, NEXMARK_SCHEMA)
        return bids.select("auction", F.expr("price * 89 div 100").alias("price"), "bidder",
                           "dateTime"), "append"
    if args.query == "nexmark-q5":
        counts = (bids_by_boundary(read(spark, args.bootstrap, args.bids, NEXMARK_SCHEMA),
                                   HOUR_MS)
                  .groupBy("t0", "auction").agg(F.count(F.lit(1)).alias("num")))
        hottest = counts.groupBy("t0").agg(
            F.max("num").alias("maxnum"),
            F.collect_list(F.struct("auction", "num")).alias("counts"))
        return (hottest
                .select("t0", F.explode(F.expr("filter(counts, c -> c.num = maxnum)")).alias("c"))
                .select(F.unix_millis("t0").alias("t0"), F.col("c.auction").alias("auction"))
                ), "append"
    if args.query == "nexmark-q7":
        highest = (bids_by_boundary(read(spark, args.bootstrap, args.bids, NEXMARK_SCHEMA))
                   .groupBy("t0").agg(F.max("price").alias("maxprice"))
                   .withColumnRenamed("t0", "mt0"))
        bids = bids_by_boundary(read(spark, args.bootstrap, args.bids, NEXMARK_SCHEMA))
        return (bids.join(highest, F.expr("t0 = mt0 AND price = maxprice"))
                .select(F.unix_millis("t0").alias("t0"), "auction", "price", "bidder")), "append"
    bids = read(spark, args.bootstrap, args.bids)
    if args.query == "pass-through":
        return bids.select("auction", "price"), "append"
    if args.query == "filter":
        return bids.where(F.col("price") % 123 == 0).select("auction", "price"), "append"
    if args.query == "sliding-agg":
        agg = (bids.withWatermark("ts", "10 seconds")
               .groupBy(F.window("ts", "10 seconds", "1 second"), F.col("auction"))
               .agg(F.count(F.lit(1)).alias("n")))
        t0 = F.unix_millis(F.col("window.end")) - F.lit(1000)
        return agg.select(t0.alias("t0"), "auction", "n"), "append"
    if args.query == "join":
        asks = read(spark, args.bootstrap, args.asks)
        b = bids.withWatermark("ts", "10 seconds").alias("b")
        a = asks.withWatermark("ts", "10 seconds").alias("a")
        cond = F.expr("b.auction = a.auction AND a.ts >= b.ts - INTERVAL 1 SECOND "
                      "AND a.ts <= b.ts + INTERVAL 1 SECOND")
        joined = b.join(a, cond, "inner")
        return joined.select(F.col("b.id").alias("bid"), F.col("a.id").alias("ask"),
                             F.col("b.auction").alias("auction"), F.col("b.price").alias("price"),
                             F.col("a.price").alias("ask_price")), "append"
    raise SystemExit(f"unknown query {args.query}")


def follow(query, messages: int) -> None:
    """Let `query` run until it has read `messages` input rows and then run no micro-batch for
    3 s (the no-data batches that let the advanced watermark close windows run at once); stop
    it. What was read is the sum of the last progress's end offsets (the topics are new, from
    offset 0): `recentProgress` keeps only the last 100 batches, fewer than a slow poll of it
    can miss."""
    read, batch, last = 0, None, time.monotonic()
    while query.isActive:
        p = query.lastProgress
        if p is not None and p["batchId"] != batch:
            batch, last = p["batchId"], time.monotonic()
            read = max(read, sum(_end_offsets(s["endOffset"]) for s in p["sources"]))
        if read >= messages and time.monotonic() - last > 3:
            query.stop()
            return
        time.sleep(0.1)
    query.awaitTermination()


def _end_offsets(offsets) -> int:
    """The sum of a Kafka source's end offsets ({topic: {partition: offset}}, maybe as JSON)."""
    if isinstance(offsets, str):
        offsets = json.loads(offsets)
    return sum(int(o) for parts in (offsets or {}).values() for o in parts.values())


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "query", "bids", "asks", "out", "jars", "work"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--live", type=int, default=0, help="follow the input; stop after N messages")
    args = ap.parse_args()
    start = time.perf_counter()
    spark = local_session("cqbench-kafka", memory="4g", config={"spark.jars": args.jars})
    checkpoint = tempfile.mkdtemp(prefix="spark-kafka-", dir=args.work)
    try:
        df, mode = build(spark, args)
        defined = time.perf_counter()
        query = (df.select(F.to_json(F.struct(*df.columns)).alias("value"))
                 .writeStream.format("kafka")
                 .option("kafka.bootstrap.servers", args.bootstrap)
                 .option("topic", args.out)
                 .option("checkpointLocation", checkpoint)
                 .outputMode(mode))
        if args.live:
            follow(query.start(), args.live)
        else:
            query = query.trigger(availableNow=True).start()
            query.awaitTermination()
        done = time.perf_counter()
        print(json.dumps({"engine": "spark", "query": args.query,
                          "session_seconds": defined - start,
                          "seconds": done - defined}), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
