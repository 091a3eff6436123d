"""Quix Streams peer of `cq bench kafka` (standalone; runs in .venv-quix, see the Makefile:
quixstreams pins confluent-kafka < 2.13, older than cq's).

    python quix_kafka.py --bootstrap HOST:PORT --query Q --bids TOPIC --asks TOPIC \
        --out TOPIC --messages N --work DIR

Reads the bids topic from the earliest offsets with a fresh consumer group, per message in
Python as Quix Streams does, and writes each result as a JSON message to the output topic. It
stops after the N-th input message (N: the topic's message count, given by the bench) with
`Application.stop()`; the application then flushes its producer and commits, and the process
exits. Only pass-through (`sdf[["auction", "price"]]`), filter (`price % 123 == 0`, then the
same projection) and NEXMark q1 (a dict per bid) are expressed here; the sliding aggregate, the
join and q7 are not run on Quix.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid

from quixstreams import Application


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "query", "bids", "asks", "out", "work"):
        ap.add_argument(f"--{name}", required=True)
    ap.add_argument("--messages", type=int, required=True)
    args = ap.parse_args()
    if args.query not in ("pass-through", "filter", "nexmark-q1"):
        print(json.dumps({"engine": "quix", "query": args.query, "supported": False}))
        return 0
    start = time.perf_counter()
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=f"cqbench-quix-{uuid.uuid4().hex[:12]}",
        auto_offset_reset="earliest",
        state_dir=tempfile.mkdtemp(prefix="quix-", dir=args.work),
        use_changelog_topics=False,
        auto_create_topics=False,
        loglevel="WARNING",
    )
    source = app.topic(args.bids, value_deserializer="json")
    sink = app.topic(args.out, value_serializer="json")
    seen = [0]

    def tick(_value) -> None:
        seen[0] += 1
        if seen[0] == args.messages:
            app.stop()

    sdf = app.dataframe(source)
    sdf = sdf.update(tick)
    if args.query == "nexmark-q1":
        sdf = sdf.apply(lambda v: {"auction": v["auction"], "price": v["price"] * 89 // 100,
                                   "bidder": v["bidder"], "dateTime": v["dateTime"]})
    else:
        if args.query == "filter":
            sdf = sdf.filter(lambda v: v["price"] % 123 == 0)
        sdf = sdf[["auction", "price"]]
    sdf.to_topic(sink)
    app.run()
    print(json.dumps({"engine": "quix", "query": args.query, "messages": seen[0],
                      "seconds": time.perf_counter() - start}), flush=True)
    return 0 if seen[0] == args.messages else 1


if __name__ == "__main__":
    sys.exit(main())
