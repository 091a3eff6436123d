"""PyFlink peer of `cq bench kafka` (standalone: no cq_service import; runs in .venv-flink, see
the Makefile: apache-flink pins an older pyarrow than cq's).

    python flink_kafka.py --bootstrap HOST:PORT --query Q --bids TOPIC --asks TOPIC \
        --out TOPIC --work DIR [--live-bids N --live-asks M]

One Flink SQL job (Table API, streaming mode, PyFlink's local executor: a MiniCluster in
PyFlink's JVM, parallelism 2) reads the input topics with Flink's Kafka connector
(flink-sql-connector-kafka, fetched into ~/.m2 by maven_jars.py; kafka-clients is shaded in
it) from the earliest offsets, parses the JSON values with Flink's json format, runs the query
with Flink SQL's built-in operators only (no Python UDFs) and writes each result row as a JSON
message to the output topic with the connector's sink (at-least-once: its producer is flushed
when the input ends). The process exits once the job has FINISHED.

End of the run: the sources are bounded. By default (`scan.bounded.mode` latest-offset) each
reads up to the partitions' latest offsets as of the job's start, as Spark's `availableNow`
trigger does; the bench's topics are complete by then. With --live-bids/--live-asks (the
bench's latency phase, the input still being produced, message i of a topic on partition
i % 2) each source is bounded at the offsets that N messages reach on the two partitions
(`specific-offsets`), so the job ends after the N-th message, as Quix Streams' does. At the
end of a bounded input the final watermark fires every pending window.

Event time: `ts = TO_TIMESTAMP_LTZ(dateTime, 3)` (session time zone UTC), watermark
`ts - 1 ms`: every partition's times never decrease, and the Kafka source keeps a watermark
per partition, so no event is late.

The queries (the CQL is in cq_service/bench/kafka_bench.py):
pass-through  auction, price of every bid.
filter        the same, where price % 123 = 0.
sliding-agg   COUNT(*) per auction in HOP(1 s slide, 10 s size) windows; `t0` = window_end -
              1 s, CQL's window boundary (the times are whole seconds: [t0 - 9 s, t0 + 1 s)
              holds the seconds of [Range 9999 ms] at t0). Windows are emitted once, when the
              watermark passes them (every one at the end of input), so the bench compares the
              windows with t0 <= last time - 30 s, as for Spark.
join          interval join of bids and asks on auction and A.ts BETWEEN B.ts - 1 s AND
              B.ts + 1 s (inclusive, as CQL's two [Range 1 Second] windows); each pair once.
nexmark-q1    auction, price * 89 / 100 (BIGINT: the division truncates as in CQL), bidder,
              dateTime of every NEXMark bid.
nexmark-q5    flink_nexmark.py's q5 (exact, HOP + the bids at t0 added in a 1 ms-offset
              TUMBLE), `t0` written in ms with each row.
nexmark-q7    flink_nexmark.py's q7 (exact, the same construction for MAX(price), an interval
              join back to the bids), `t0` in ms with each row.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

from maven_jars import coordinate, ensure_jar  # beside this script

PARALLELISM = 2
CONNECTOR = "flink-sql-connector-kafka"
SCHEMA = "id BIGINT, auction BIGINT, bidder BIGINT, price BIGINT, `dateTime` BIGINT"
NEXMARK_SCHEMA = ("auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, "
                  "`dateTime` BIGINT, extra STRING")
QUERIES = ("pass-through", "filter", "sliding-agg", "join", "nexmark-q1", "nexmark-q5",
           "nexmark-q7")
# Epoch milliseconds of a whole-second TIMESTAMP_LTZ (session time zone UTC).
EPOCH_MS = "CAST(TIMESTAMPDIFF(SECOND, TO_TIMESTAMP_LTZ(0, 3), {}) AS BIGINT) * 1000"


def bounded(live: int | None) -> str:
    """The source's end: the latest offsets at the start, or where `live` messages end."""
    if not live:
        return "'scan.bounded.mode' = 'latest-offset'"
    ends = f"partition:0,offset:{(live + 1) // 2};partition:1,offset:{live // 2}"
    return ("'scan.bounded.mode' = 'specific-offsets', "
            f"'scan.bounded.specific-offsets' = '{ends}'")


def source(tenv, name: str, topic: str, schema: str, bootstrap: str, live: int | None) -> None:
    tenv.execute_sql(
        f"CREATE TEMPORARY TABLE {name} ({schema}, ts AS TO_TIMESTAMP_LTZ(`dateTime`, 3), "
        "WATERMARK FOR ts AS ts - INTERVAL '0.001' SECOND) WITH ("
        f"'connector' = 'kafka', 'topic' = '{topic}', "
        f"'properties.bootstrap.servers' = '{bootstrap}', "
        f"'properties.group.id' = 'cqbench-flink-{uuid.uuid4().hex[:12]}', "
        f"'scan.startup.mode' = 'earliest-offset', {bounded(live)}, "
        "'format' = 'json', 'json.fail-on-missing-field' = 'true')"
    )


def sink(tenv, columns: str, topic: str, bootstrap: str) -> None:
    tenv.execute_sql(
        f"CREATE TEMPORARY TABLE sink ({columns}) WITH ("
        f"'connector' = 'kafka', 'topic' = '{topic}', "
        f"'properties.bootstrap.servers' = '{bootstrap}', "
        "'sink.delivery-guarantee' = 'at-least-once', 'format' = 'json')"
    )


def build(tenv, args) -> tuple[str, str]:
    """(sink columns, INSERT statement) of the query; its source tables and views created."""
    q = args.query
    if q.startswith("nexmark"):
        source(tenv, "bid", args.bids, NEXMARK_SCHEMA, args.bootstrap, args.live_bids)
        if q == "nexmark-q1":
            return ("auction BIGINT, price BIGINT, bidder BIGINT, `dateTime` BIGINT",
                    "INSERT INTO sink SELECT auction, price * 89 / 100, bidder, `dateTime` "
                    "FROM bid")
        import flink_nexmark  # beside this script: the exact q5 and q7 of `cq bench nexmark`

        columns, _fmt, insert = flink_nexmark.BUILDERS[q[len("nexmark-"):]](tenv)
        select = insert.strip().removeprefix("INSERT INTO sink")
        tenv.execute_sql(f"CREATE TEMPORARY VIEW query_result AS {select}")
        rest = [c.split()[0] for c in columns.split(",")[1:]]
        return ("t0 BIGINT, " + ", ".join(f"{c} BIGINT" for c in rest),
                f"INSERT INTO sink SELECT {EPOCH_MS.format('t0')}, {', '.join(rest)} "
                "FROM query_result")
    source(tenv, "bids", args.bids, SCHEMA, args.bootstrap, args.live_bids)
    if q == "pass-through":
        return "auction BIGINT, price BIGINT", "INSERT INTO sink SELECT auction, price FROM bids"
    if q == "filter":
        return ("auction BIGINT, price BIGINT",
                "INSERT INTO sink SELECT auction, price FROM bids WHERE MOD(price, 123) = 0")
    if q == "sliding-agg":
        # window_time is window_end - 1 ms; in whole seconds, down: window_end - 1 s = t0.
        t0 = EPOCH_MS.format("window_time")
        return ("t0 BIGINT, auction BIGINT, n BIGINT",
                f"INSERT INTO sink SELECT {t0}, auction, COUNT(*) "
                "FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '1' SECOND, "
                "INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end, window_time")
    if q == "join":
        source(tenv, "asks", args.asks, SCHEMA, args.bootstrap, args.live_asks)
        return ("bid BIGINT, ask BIGINT, auction BIGINT, price BIGINT, ask_price BIGINT",
                "INSERT INTO sink SELECT B.id, A.id, B.auction, B.price, A.price "
                "FROM bids B, asks A WHERE B.auction = A.auction "
                "AND A.ts BETWEEN B.ts - INTERVAL '1' SECOND AND B.ts + INTERVAL '1' SECOND")
    raise SystemExit(f"unknown query {q}")


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "bids", "asks", "out", "work"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--query", required=True, choices=QUERIES)
    ap.add_argument("--live-bids", type=int, default=0,
                    help="the input is still being produced: end after N messages of --bids")
    ap.add_argument("--live-asks", type=int, default=0, help="the same for --asks")
    args = ap.parse_args()
    start = time.perf_counter()
    jar = ensure_jar(coordinate(CONNECTOR))
    # Exactly one JSON line on stdout: everything else (the JVM included) writes to stderr.
    stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    from pyflink.table import EnvironmentSettings, TableEnvironment

    tenv = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = tenv.get_config()
    config.set("pipeline.jars", jar.as_uri())
    config.set("parallelism.default", str(PARALLELISM))
    config.set("table.local-time-zone", "UTC")
    columns, insert = build(tenv, args)
    sink(tenv, columns, args.out, args.bootstrap)
    defined = time.perf_counter()
    tenv.execute_sql(insert).wait()
    done = time.perf_counter()
    stdout.write(json.dumps({"engine": "pyflink", "query": args.query,
                             "session_seconds": defined - start,
                             "seconds": done - defined}) + "\n")
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
