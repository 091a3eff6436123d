"""How a Kafka source turns a poll's JSON values into Arrow columns (issue 21): pyarrow's JSON
reader over the values joined into one newline-delimited block (what `MessageDecoder` does)
against orjson and msgspec decoding each value, then one `pa.array` per column. The decoders
run in turns, `--repeat` rounds, and the medians are printed.

    .venv/bin/python benchmarks/kafka_decode.py [--messages 65536] [--repeat 9]

orjson and msgspec come with the `bench` extra; they are not used by cq itself.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import msgspec
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pjson

SCHEMA = pa.schema(
    [
        ("auction", pa.int64()),
        ("bidder", pa.int64()),
        ("price", pa.int64()),
        ("channel", pa.string()),
        ("ts", pa.int64()),
    ]
)


class Bid(msgspec.Struct):
    auction: int
    bidder: int
    price: int
    channel: str
    ts: int


def values(n: int) -> list[bytes]:
    """`n` bid-like JSON values, as a Kafka topic of NEXMark bids holds them."""
    rng = np.random.default_rng(0)
    cols = zip(
        rng.integers(0, 10**6, n).tolist(),
        rng.integers(0, 10**5, n).tolist(),
        rng.integers(1, 10**6, n).tolist(),
        rng.integers(0, 50, n).tolist(),
        strict=True,
    )
    return [
        json.dumps({"auction": a, "bidder": b, "price": p, "channel": f"ch-{c}", "ts": 3 * i})
        .encode()
        for i, (a, b, p, c) in enumerate(cols)
    ]


def pyarrow_block(batch: list[bytes]) -> pa.Table:
    data = b"\n".join(batch) + b"\n"
    return pjson.read_json(
        pa.BufferReader(data),
        read_options=pjson.ReadOptions(block_size=len(data) // 2 + 1),
        parse_options=pjson.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore"),
    )


def orjson_each(batch: list[bytes]) -> pa.Table:
    objs = [orjson.loads(v) for v in batch]
    return pa.table([pa.array([o.get(f.name) for o in objs], f.type) for f in SCHEMA], SCHEMA)


_BID = msgspec.json.Decoder(Bid)


def msgspec_each(batch: list[bytes]) -> pa.Table:
    objs = [_BID.decode(v) for v in batch]
    return pa.table([pa.array([getattr(o, f.name) for o in objs], f.type) for f in SCHEMA], SCHEMA)


DECODERS: dict[str, Callable[[list[bytes]], pa.Table]] = {
    "pyarrow JSON reader, one block": pyarrow_block,
    "orjson per value + pa.array": orjson_each,
    "msgspec per value + pa.array": msgspec_each,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=65536)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    batch = values(args.messages)
    first = pyarrow_block(batch)
    for name, decode in DECODERS.items():
        assert decode(batch).equals(first), f"{name} decodes differently"
    seconds: dict[str, list[float]] = {name: [] for name in DECODERS}
    for _ in range(args.repeat):
        for name, decode in DECODERS.items():
            start = time.perf_counter()
            decode(batch)
            seconds[name].append(time.perf_counter() - start)
    print(f"{args.messages:,} JSON values -> Arrow columns, median of {args.repeat}:")
    for name, times in seconds.items():
        median = statistics.median(times)
        print(f"  {name:34s} {median * 1000:7.1f} ms  {args.messages / median / 1e6:5.2f} M values/s")


if __name__ == "__main__":
    main()
