"""Spark baseline of the grouped sliding aggregates of `make bench` (benchmarks/engine_core.py).

    python spark_groups.py --data FILE --range-s R --slide-s L --last-ts T --form F --repeat K

Batch Spark (pyspark, `local[2]`, 2 shuffle partitions, 8 GiB driver) over the same Parquet
file (ts int64 ms, g, v) computes the same windowed groups as the CQL query
`… FROM E [Range R Seconds Slide L Seconds] GROUP BY g`:

    W = groupBy(window(timestamp_millis(ts), "R s + 1 ms", "L seconds"), g)
          .agg(count(*) AS n, sum(v) AS s)
        where window.end - 1 ms <= T (the last event's time)

Spark's window [kL, kL + R + 1 ms) holds the events with ts in [kL, kL + R]: CQL's window at
instant t = kL + R, [t - R, t] (docs/semantics.md: a Range window is closed at both ends, so
Spark's sliding window() assigns each event to R/L + 1 windows where CQL's hold it R/L + 1
instants); the filter keeps the instants CQL reaches (none after the last event).

* form `relation` — every row of W: the relation's content at every slide (CQL emits only its
  changes, − old and + new row of each group that changed; Spark emits every row);
* form `istream` — the rows of W not in the previous slide's W (a left anti join of W with W
  shifted by one slide, on (t, g, n, s)): exactly Istream of the relation, so its row count
  must equal what cq's sink receives (the benchmark checks it).

The result is written to Spark's `noop` sink, so all of it is computed and nothing is stored;
its rows are counted by an `Observation` in the same job. Timed in-process, from defining the DataFrame to the end of the write, in one
SparkSession started beforehand (the JVM and session start-up are not counted, and runs after
the first find the JVM warm): this favours Spark, where cq is timed as a whole process. Prints
one JSON line per run: {"seconds": …, "rows": …}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from pyspark.sql import Observation, SparkSession
from pyspark.sql import functions as F

from cq_service.bench.peers.spark_local import local_session


def session() -> SparkSession:
    return local_session("cq-bench-groups")


def query(spark: SparkSession, data: str, range_s: int, slide_s: int, last_ts: int, form: str):
    events = spark.read.parquet(data).withColumn("t", F.timestamp_millis("ts"))
    window = F.window("t", f"{range_s * 1000 + 1} milliseconds", f"{slide_s} seconds")
    w = (events.groupBy(window, "g")
         .agg(F.count(F.lit(1)).alias("n"), F.sum("v").alias("s"))
         .select((F.unix_millis(F.col("window.end")) - 1).alias("e"), "g", "n", "s")
         .where(F.col("e") <= last_ts))
    if form == "relation":
        return w
    prev = w.select((F.col("e") + slide_s * 1000).alias("e"), "g", "n", "s")
    return w.join(prev, ["e", "g", "n", "s"], "left_anti")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--range-s", type=int, required=True)
    ap.add_argument("--slide-s", type=int, required=True)
    ap.add_argument("--last-ts", type=int, required=True, help="the last event's ts (ms)")
    ap.add_argument("--form", choices=("istream", "relation"), required=True)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    spark = session()
    for k in range(args.repeat):
        start = time.perf_counter()
        df = query(spark, args.data, args.range_s, args.slide_s, args.last_ts, args.form)
        seen = Observation(f"rows{k}")
        df.observe(seen, F.count(F.lit(1)).alias("rows")).write.format("noop").mode(
            "overwrite").save()
        secs = time.perf_counter() - start
        print(json.dumps({"seconds": secs, "rows": seen.get["rows"]}), flush=True)
    spark.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
