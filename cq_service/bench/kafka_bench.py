"""`cq bench kafka`: Kafka in, Kafka out, on cq (both clients), Spark, Quix Streams and PyFlink.

One run produces the input once (a topic of N bid-like JSON events on 2 partitions, and a
second topic of N/10 asks for the join; kept and reused while they hold exactly that data:
their names carry N and the seed), then for every query runs every engine as a fresh child
process, reading both topics from their beginning to their end and writing its results to a
fresh output topic of its own. Each run is timed the same way for every engine:

* whole process: spawn to exit, which includes reading to the end of the input and the sink's
  messages acknowledged by the broker (every engine flushes its producer before it exits);
* first to last output: the broker timestamps (LogAppendTime, set by the broker as it appends)
  of the first and the last message of the output topic; input messages ÷ that span is the steady-state rate. It leaves
  out start-up and shut-down but also the time before the first result.

Peak RSS is the engine's process tree's (JVMs included). After every run the output topic's
message count is checked against the count computed here from the generated events, without
any engine (`expected_counts`): a difference fails the run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cq_service.bench.kafka_topics import (
    count,
    create_topic,
    delete_topics,
    encode,
    end_offsets,
    messages,
    output_span,
    topics_present,
)
from cq_service.bench.procmem import run_measured

__all__ = [
    "AGG_SETTLED_MS",
    "ENGINES",
    "FILTER_MODULUS",
    "QUERIES",
    "SCHEMAS",
    "STREAM_NAMES",
    "Cell",
    "Query",
    "Row",
    "agg_cutoff_ms",
    "cq_pipeline",
    "delete_topics",
    "disagreements",
    "expected_counts",
    "generate",
    "generate_nexmark",
    "run_benchmark",
]

_PEERS = Path(__file__).resolve().parent / "peers"
_REPO = Path(__file__).resolve().parents[2]

BASE_TIME_MS = 1_700_000_000_000
SPAN_SECONDS = 200  # the input spans this much event time, whatever N (whole seconds)
GROUPS = 10_000  # distinct `auction` values
PRICE_MAX = 100_000
FILTER_MODULUS = 123  # the filter keeps price % 123 == 0: about 1 event in 123
MIN_SPAN_OUTPUTS = 1_000  # fewer output messages: no first-to-last rate
AGG_SETTLED_MS = 30_000  # the aggregate's windows compared: t0 <= last time - this (see below)


@dataclass(frozen=True)
class Query:
    name: str
    inputs: tuple[str, ...]  # "bids", "asks"
    cql: str
    about: str


QUERIES: dict[str, Query] = {
    q.name: q
    for q in (
        Query("pass-through", ("bids",), "SELECT auction, price FROM Bids",
              "two columns of every bid"),
        Query("filter", ("bids",),
              f"SELECT auction, price FROM Bids WHERE price % {FILTER_MODULUS} = 0",
              f"bids with price % {FILTER_MODULUS} = 0 (about 1 in {FILTER_MODULUS})"),
        Query("sliding-agg", ("bids",),
              "SELECT Rstream(auction, COUNT(*) AS n) "
              "FROM Bids [Range 9999 Milliseconds Slide 1 Second] GROUP BY auction",
              f"COUNT per auction ({GROUPS:,} groups) over a 10 s window sliding by 1 s, "
              "every group with bids in the window at every slide"),
        Query("join", ("bids", "asks"),
              "SELECT Istream(B.id AS bid, A.id AS ask, B.auction, B.price, A.price AS ask_price) "
              "FROM Bids [Range 1 Second] B, Asks [Range 1 Second] A "
              "WHERE B.auction = A.auction",
              "bids ⋈ asks on auction, timestamps at most 1 s apart"),
        Query("nexmark-q1", ("nexmark",),
              "SELECT Rstream(auction, price * 89 / 100 AS price, bidder, dateTime) "
              "FROM Bid [Now]",
              "NEXMark q1 (currency conversion) over the NEXMark bids"),
        Query("nexmark-q5", ("nexmark",),
              "SELECT Rstream(auction) "
              "FROM (SELECT B1.auction, COUNT(*) AS num "
              "FROM Bid [Range 60 Minute Slide 1 Minute] B1 GROUP BY B1.auction) "
              "WHERE num >= ALL (SELECT COUNT(*) "
              "FROM Bid [Range 60 Minute Slide 1 Minute] B2 GROUP BY B2.auction)",
              "NEXMark q5 (hot items: the auctions with the most bids in the last hour, every "
              "minute) over the NEXMark bids"),
        Query("nexmark-q7", ("nexmark",),
              "SELECT Rstream(B.auction, B.price, B.bidder) "
              "FROM Bid [Range 1 Minute Slide 1 Minute] B "
              "WHERE B.price = (SELECT MAX(B1.price) FROM Bid [Range 1 Minute Slide 1 Minute] B1)",
              "NEXMark q7 (highest bid of every minute) over the NEXMark bids"),
    )
}

# cq with each Kafka client, Spark Structured Streaming, Quix Streams, PyFlink (Flink SQL).
ENGINES = ("cq", "cq-kafka-python", "spark", "quix", "pyflink")
QUIX_QUERIES = ("pass-through", "filter", "nexmark-q1")
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
# Per-boundary queries: CQL's Rstream repeats a window's result at every instant until the next
# boundary; the count (and the latency) takes each boundary's distinct rows once.
BOUNDARY_FIELDS = {"nexmark-q5": ("auction",), "nexmark-q7": ("auction", "price", "bidder")}
# The columns of each input kind, as the pipeline schema declares them.
SCHEMAS = {
    "bids": "{id: int, auction: int, bidder: int, price: int, dateTime: timestamp}",
    "asks": "{id: int, auction: int, bidder: int, price: int, dateTime: timestamp}",
    "nexmark": "{auction: int, bidder: int, price: int, channel: string, url: string, "
               "dateTime: timestamp, extra: string}",
}
STREAM_NAMES = {"bids": "Bids", "asks": "Asks", "nexmark": "Bid"}



# ---------------------------------------------------------------------------------------------
# The input


def generate(n: int, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """The bids (n) and asks (n // 10) as columns; message i goes to partition i % 2.

    Times are whole seconds (ms since the epoch), spread evenly over SPAN_SECONDS, so they
    never decrease within a partition and every instant is a slide boundary of the aggregate."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, size in (("bids", n), ("asks", max(n // 10, 1))):
        idx = np.arange(size, dtype=np.int64)
        out[name] = {
            "id": idx,
            "auction": rng.integers(0, GROUPS, size, dtype=np.int64),
            "bidder": rng.integers(0, 100_000, size, dtype=np.int64),
            "price": rng.integers(1, PRICE_MAX + 1, size, dtype=np.int64),
            "dateTime": BASE_TIME_MS + (idx * SPAN_SECONDS // size) * 1000,
        }
    return out


def generate_nexmark(events: int, seed: int) -> dict[str, np.ndarray]:
    """The bids among `events` NEXMark events (cq_service/io/nexmark.py, 10,000 events per
    second of event time), as columns; `id` is their position (message i: partition i % 2)."""
    import pyarrow as pa

    from cq_service.io import nexmark

    table = pa.concat_tables(list(nexmark.generate_kind("bid", events, seed=seed)))
    cols = {name: table[name].to_numpy(zero_copy_only=False) for name in table.column_names}
    cols["id"] = np.arange(table.num_rows, dtype=np.int64)
    return cols


def q7_rows(bids: dict[str, np.ndarray]) -> int:
    """NEXMark q7's result rows: for every minute boundary t0 between the first and the last
    bid, the bids with dateTime in [t0 - 1 min, t0] whose price is the largest there."""
    ts, price = bids["dateTime"], bids["price"]
    first = -(-int(ts.min()) // MINUTE_MS) * MINUTE_MS
    rows = 0
    for t0 in range(first, int(ts.max()) + 1, MINUTE_MS):
        inside = price[(ts >= t0 - MINUTE_MS) & (ts <= t0)]
        if len(inside):
            rows += int((inside == inside.max()).sum())
    return rows


def q5_rows(bids: dict[str, np.ndarray]) -> int:
    """NEXMark q5's result rows: for every minute boundary t0 between the first and the last
    bid, the auctions whose bid count in [t0 - 60 min, t0] is the largest there."""
    ts, auction = bids["dateTime"], bids["auction"]
    first = -(-int(ts.min()) // MINUTE_MS) * MINUTE_MS
    rows = 0
    for t0 in range(first, int(ts.max()) + 1, MINUTE_MS):
        inside = auction[(ts >= t0 - HOUR_MS) & (ts <= t0)]
        if len(inside):
            _, counts = np.unique(inside, return_counts=True)
            rows += int((counts == counts.max()).sum())
    return rows


def _seconds_by_group(cols: dict[str, np.ndarray]) -> np.ndarray:
    """Events per (second, auction): a SPAN_SECONDS × GROUPS array."""
    sec = (cols["dateTime"] - BASE_TIME_MS) // 1000
    grid = np.zeros((SPAN_SECONDS, GROUPS), dtype=np.int64)
    np.add.at(grid, (sec, cols["auction"]), 1)
    return grid


def expected_counts(data: dict[str, dict[str, np.ndarray]]) -> dict[str, int]:
    """Output messages per query, from the events alone (no engine involved).

    sliding-agg counts the (t0, auction) rows with t0 <= the last time - AGG_SETTLED_MS only:
    cq evaluates every boundary up to the end of input, Spark only those its watermark has
    passed, so the comparison keeps the windows both have certainly closed."""
    bids, asks = data["bids"], data["asks"]
    b, a = _seconds_by_group(bids), _seconds_by_group(asks)
    present = np.cumsum(b > 0, axis=0)  # windows of 10 seconds: [t0 - 9 s, t0]
    window = present.copy()
    window[10:] -= present[:-10]
    last = int((bids["dateTime"].max() - BASE_TIME_MS) // 1000)
    settled = last - AGG_SETTLED_MS // 1000
    first = int((bids["dateTime"].min() - BASE_TIME_MS) // 1000)
    agg = int((window[first:settled + 1] > 0).sum()) if settled >= first else 0
    pairs = int((b * a).sum() + (b[1:] * a[:-1]).sum() + (b[:-1] * a[1:]).sum())
    counts = {
        "pass-through": len(bids["id"]),
        "filter": int((bids["price"] % FILTER_MODULUS == 0).sum()),
        "sliding-agg": agg,
        "join": pairs,
    }
    if "nexmark" in data:
        counts["nexmark-q1"] = len(data["nexmark"]["id"])
        counts["nexmark-q5"] = q5_rows(data["nexmark"])
        counts["nexmark-q7"] = q7_rows(data["nexmark"])
    return counts


def agg_cutoff_ms(data: dict[str, dict[str, np.ndarray]]) -> int:
    return int(data["bids"]["dateTime"].max()) - AGG_SETTLED_MS


# ---------------------------------------------------------------------------------------------
# The broker


def count_settled(bootstrap: str, topic: str, cutoff_ms: int) -> int:
    """sliding-agg rows whose window boundary (`_ts`, or Spark's `t0`) is <= cutoff_ms."""
    return sum(1 for v in messages(bootstrap, topic) if v.get("_ts", v.get("t0")) <= cutoff_ms)


def boundary_row(v: dict, fields: tuple[str, ...]) -> tuple:
    """(boundary, *fields) of a per-boundary query's output message: CQL's Rstream repeats a
    window's result at every instant until the next boundary (its boundary: `_ts` rounded down
    to the minute), Spark emits it once with `t0`."""
    t0 = v["t0"] if "t0" in v else v["_ts"] // MINUTE_MS * MINUTE_MS
    return (t0, *(v[f] for f in fields))


def count_per_boundary(bootstrap: str, topic: str, fields: tuple[str, ...],
                       last_ms: int) -> int:
    """NEXMark q5's distinct (boundary, auction) or q7's (boundary, auction, price, bidder)
    rows (see `boundary_row`) with boundary <= last_ms, the last bid's time: CQL evaluates
    the boundaries up to the end of input, Flink's final watermark fires those after it too."""
    rows = {boundary_row(v, fields) for v in messages(bootstrap, topic)}
    return sum(1 for r in rows if r[0] <= last_ms)


def ensure_input(bootstrap: str, n: int, seed: int, data, say=print) -> dict[str, str]:
    """The input topics for (n, seed), produced unless they already hold exactly that data."""
    from confluent_kafka import Producer

    names = {kind: f"cqbench-{kind}-{n}-{seed}" for kind in data}
    present = topics_present(bootstrap)
    for kind, topic in names.items():
        want = len(data[kind]["id"])
        if topic in present:
            offs = end_offsets(bootstrap, topic)
            if len(offs) == 2 and all(low == 0 for low, _ in offs.values()) and sum(
                    high for _, high in offs.values()) == want:
                say(f"reusing {topic} ({want:,} messages)")
                continue
            delete_topics(bootstrap, [topic])
            time.sleep(1)
        say(f"producing {want:,} messages to {topic}")
        create_topic(bootstrap, topic, 2)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50,
                             "batch.num.messages": 100_000, "batch.size": 1_000_000,
                             "queue.buffering.max.messages": 2_000_000,
                             "queue.buffering.max.kbytes": 2_000_000,
                             "compression.type": "none", "acks": "all"})
        failed = []

        def report(err, _msg, failed=failed) -> None:
            if err is not None:
                failed.append(err)

        values = encode(data[kind])
        for i, value in enumerate(values):
            while True:
                try:
                    producer.produce(topic, value, partition=i % 2, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)
        if producer.flush(300) or failed:
            raise RuntimeError(f"producing {topic} failed: {failed[:3]}")
        if count(bootstrap, topic) != want:
            raise RuntimeError(f"{topic} holds {count(bootstrap, topic)} messages, not {want}")
    return names


# ---------------------------------------------------------------------------------------------
# The engines


def cq_pipeline(query: Query, topics: dict[str, str], out: str, bootstrap: str,
                client: str) -> str:
    """The pipeline YAML of `query` on `client`, Kafka in and out."""
    group = f"cqbench-{uuid.uuid4().hex[:12]}"
    streams = []
    for kind in query.inputs:
        streams.append(
            f"  {STREAM_NAMES[kind]}:\n"
            f"    schema: {SCHEMAS[kind]}\n"
            "    timestamp: dateTime\n"
            f"    source: {{type: kafka, topic: {topics[kind]}, bootstrap_servers: "
            f"'{bootstrap}', group: {group}-{kind}, start: earliest, client: {client}}}\n"
        )
    return (
        "version: 1\nname: cqbench\ntime_unit: ms\nstreams:\n" + "".join(streams)
        + "queries:\n  q:\n"
        + f"    cql: {json.dumps(query.cql)}\n"
        + f"    sink: {{type: kafka, topic: {out}, bootstrap_servers: '{bootstrap}', "
        f"client: {client}}}\n"
    )


def _quix_python() -> str:
    return os.environ.get("CQ_QUIX_PYTHON") or str(_REPO / ".venv-quix" / "bin" / "python")


def _flink_python() -> str:
    return os.environ.get("CQ_FLINK_PYTHON") or str(_REPO / ".venv-flink" / "bin" / "python")


def _fetch_flink_jars() -> None:
    """The Flink peer's jars into ~/.m2 (cq_service/bench/peers/maven_jars.py), before any run
    is timed: a no-op once they are there (`make bench-deps` fetches them)."""
    import subprocess

    subprocess.run([_flink_python(), str(_PEERS / "maven_jars.py")], check=True,
                   stdout=subprocess.DEVNULL)


def supported(engine: str, query: str) -> bool:
    return engine != "quix" or query in QUIX_QUERIES


def command(engine: str, query: Query, topics: dict[str, str], out: str, bootstrap: str,
            work: Path, inputs: int, live: dict[str, int] | None = None) -> list[str]:
    """The engine's command line; with `live` (input kind -> messages), it follows its input
    (still being produced) until it has read that many messages (the latency phase)."""
    if engine in ("cq", "cq-kafka-python"):
        client = "confluent-kafka" if engine == "cq" else "kafka-python"
        path = work / f"{engine}-{query.name}.yaml"
        path.write_text(cq_pipeline(query, topics, out, bootstrap, client))
        if live:
            quota = ",".join(f"{STREAM_NAMES[k]}={n}" for k, n in live.items())
            return [sys.executable, "-m", "cq_service.bench.kafka_live", str(path),
                    "--messages", quota]
        return [sys.executable, "-m", "cq_service.cli", "run", str(path)]
    args = ["--bootstrap", bootstrap, "--query", query.name,
            "--bids", topics["nexmark" if "nexmark" in query.inputs else "bids"],
            "--asks", topics["asks"], "--out", out]
    if engine == "spark":
        from cq_service.batch.spark import kafka_jars

        jars = ",".join(str(j) for j in kafka_jars())
        return [sys.executable, str(_PEERS / "spark_kafka.py"), *args, "--jars", jars,
                "--work", str(work), *(["--live", str(inputs)] if live else [])]
    if engine == "quix":
        return [_quix_python(), str(_PEERS / "quix_kafka.py"), *args, "--messages",
                str(inputs), "--work", str(work)]
    if engine == "pyflink":
        ends = [a for k, n in (live or {}).items()
                for a in (f"--live-{'asks' if k == 'asks' else 'bids'}", str(n))]
        return [_flink_python(), str(_PEERS / "flink_kafka.py"), *args, "--work", str(work),
                *ends]
    raise ValueError(f"unknown engine {engine}")


@dataclass
class Cell:
    """One engine on one query: the repeats and their medians."""

    supported: bool = True
    seconds: list[float] = field(default_factory=list)  # whole process
    spans: list[float] = field(default_factory=list)  # first to last output
    peak_rss: int = 0
    outputs: int | None = None
    compared: int | None = None  # the count checked (sliding-agg: settled windows only)
    agrees: bool | None = None
    note: str = ""
    latency_asked: float | None = None  # half the sustained rate: what production aimed at
    latency_rate: float | None = None  # input msg/s produced in the latency phase
    p50_ms: float | None = None
    p99_ms: float | None = None
    latency_samples: int = 0
    latency_note: str = ""

    def sustained(self, inputs: int) -> float | None:
        """Input msg/s first to last output; whole process where there is no span, or where
        the span is under a tenth of the whole process (results written in a burst)."""
        s, m = self.span(), self.median()
        if s and m and s >= m / 10:
            return inputs / s
        return inputs / m if m else None

    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    def span(self) -> float | None:
        return statistics.median(self.spans) if self.spans else None


@dataclass
class Row:
    query: str
    inputs: int  # input messages read
    expected: int
    cells: dict[str, Cell] = field(default_factory=dict)


def run_benchmark(
    *, bootstrap: str, events: int, seed: int = 0, queries: tuple[str, ...],
    engines: tuple[str, ...], repeat: int, work: Path, timeout: float = 1800.0,
    say: Callable[[str], None] = print, on_row: Callable[[list[Row]], None] | None = None,
    latency: bool = False, grace: float = 5.0,
) -> list[Row]:
    """Every engine on every query, `repeat` times (the throughput phase); with `latency`,
    then once more with the input produced at half the engine's sustained rate
    (cq_service/bench/kafka_latency.py), `grace` seconds after the engine connected."""
    work.mkdir(parents=True, exist_ok=True)
    say(f"generating {events:,} events (seed {seed})")
    data = generate(events, seed)
    if any("nexmark" in QUERIES[q].inputs for q in queries):
        data["nexmark"] = generate_nexmark(events, seed)
    expected = expected_counts(data)
    cutoff = agg_cutoff_ms(data)
    topics = ensure_input(bootstrap, events, seed, data, say)
    if "pyflink" in engines:
        _fetch_flink_jars()
    rows: list[Row] = []
    for name in queries:
        q = QUERIES[name]
        inputs = sum(len(data[k]["id"]) for k in q.inputs)
        row = Row(name, inputs, expected[name])
        for engine in engines:
            cell = Cell()
            row.cells[engine] = cell
            if not supported(engine, name):
                cell.supported = False
                cell.note = "not expressed on this engine here"
                continue
            for r in range(repeat):
                out = f"cqbench-out-{engine}-{name}-{uuid.uuid4().hex[:8]}"
                create_topic(bootstrap, out, 2, append_time=True)
                try:
                    say(f"{name} on {engine} ({r + 1}/{repeat})")
                    cmd = command(engine, q, topics, out, bootstrap, work, inputs)
                    env = dict(os.environ, PYTHONPATH=str(_REPO))
                    done = run_measured(cmd, timeout=timeout, env=env)
                    if done.returncode != 0:
                        tail = "\n".join(done.stderr.strip().splitlines()[-20:])
                        say(f"{engine} on {name} failed ({done.returncode}):\n{tail}")
                        cell.agrees = False
                        cell.note = f"the run failed (exit {done.returncode})"
                        break
                    cell.seconds.append(done.wall)
                    cell.peak_rss = max(cell.peak_rss, done.peak_rss)
                    cell.outputs = count(bootstrap, out)
                    if name == "sliding-agg":
                        cell.compared = count_settled(bootstrap, out, cutoff)
                    elif name in BOUNDARY_FIELDS:
                        cell.compared = count_per_boundary(
                            bootstrap, out, BOUNDARY_FIELDS[name],
                            int(data["nexmark"]["dateTime"].max()))
                    else:
                        cell.compared = cell.outputs
                    # A few messages written in one burst give no rate (NEXMark q7: 4 rows).
                    span = output_span(bootstrap, out) if cell.outputs >= MIN_SPAN_OUTPUTS else None
                    if span:
                        cell.spans.append(span)
                    cell.agrees = cell.compared == row.expected
                    if not cell.agrees:
                        cell.note = (f"{cell.compared:,} output messages where "
                                     f"{row.expected:,} are expected")
                        break
                finally:
                    delete_topics(bootstrap, [out])
            if latency and cell.agrees:
                _latency_phase(engine, q, cell, row, data, bootstrap, work, timeout, grace, say)
        rows.append(row)
        if on_row:
            on_row(rows)
    return rows


def _latency_phase(engine: str, q: Query, cell: Cell, row: Row, data, bootstrap: str,
                  work: Path, timeout: float, grace: float, say) -> None:
    """`measure` at half the sustained rate of `cell` (the throughput phase's); the result
    kept in `cell`."""
    from cq_service.bench import kafka_latency

    sustained = cell.sustained(row.inputs)
    if not sustained:
        return
    rate = cell.latency_asked = sustained / 2
    say(f"{q.name} on {engine}: latency at {rate:,.0f} msg/s (half of {sustained:,.0f})")

    def cmd(lat_topics, out, live):
        return command(engine, q, lat_topics, out, bootstrap, work, row.inputs, live)

    try:
        got = kafka_latency.measure(
            engine=engine, query=q, data=data, rate=rate, bootstrap=bootstrap, work=work,
            engine_command=cmd, env=dict(os.environ, PYTHONPATH=str(_REPO)), timeout=timeout,
            grace=grace, boundary_fields=BOUNDARY_FIELDS.get(q.name), say=say)
    except RuntimeError as e:
        say(f"latency of {q.name} on {engine} not measured: {e}")
        cell.latency_note = "the latency run failed"
        return
    cell.latency_rate, cell.p50_ms, cell.p99_ms = got.rate, got.p50_ms, got.p99_ms
    cell.latency_samples, cell.latency_note = got.samples, got.note
    if q.name in kafka_latency.RECORD_KEYS and got.samples != cell.outputs:
        # Every output of a record-at-a-time query is matched to its input: fewer means the
        # latency run did not process (or write) the whole input.
        cell.latency_note = f"only {got.samples:,} of {cell.outputs:,} results in the latency run"
        say(f"  {cell.latency_note}")
    if got.p50_ms is not None:
        say(f"  p50 {got.p50_ms:.0f} ms, p99 {got.p99_ms:.0f} ms over {got.samples:,} results")


def disagreements(rows: list[Row]) -> list[str]:
    return [f"{r.query} on {e}: {c.note}" for r in rows for e, c in r.cells.items()
            if c.supported and c.agrees is False]
