"""The latency phase of `cq bench kafka`: p50/p99 at half an engine's sustained rate.

For one engine and query: fresh input topics and a fresh output topic are created, all stamped
by the broker as it appends (LogAppendTime); the engine is started following the input
(`--live`: cq through cq_service/bench/kafka_live.py, Spark with its default trigger, Quix
Streams as always, PyFlink with its sources bounded at the offsets the message count reaches); once its process tree holds a connection to the broker, and `grace`
seconds more (consumer groups join, Spark plans its first micro-batch), the input — the same
messages as the throughput phase's, in event-time order, message i of a stream on partition
i % 2 — is produced at the given rate. The engine stops by itself after the last input
message. Latency is then computed from broker timestamps alone:

* record-at-a-time queries (pass-through, filter, NEXMark q1): an output message's append time
  − the append time of the input message that produced it. Outputs carry no input id, so they
  are matched by their values: the k-th output carrying given values (in append order) is the
  k-th input whose projection has those values.
* windowed queries (sliding-agg, NEXMark q5 and q7): a result for boundary t (cq's `_ts`,
  rounded down to the minute for q5/q7; Spark's and PyFlink's `t0`) is computable once every
  partition of the input has delivered an event with time ≥ t: latency = output append time −
  the latest of those partitions' first appends of an event ≥ t. A result for a boundary some partition never
  reaches (only the end of input closes it) is not counted. For q5/q7 each distinct row of a
  boundary counts once, at its first output message (CQL's Rstream repeats it until the next
  boundary).
* the join: output append time − the later of the two matched inputs' append times (the
  output carries both ids).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cq_service.bench.kafka_topics import (
    consumer,
    create_topic,
    delete_topics,
    encode,
    end_offsets,
)
from cq_service.bench.procmem import process_tree

__all__ = [
    "Latency", "broker_connected", "latencies", "measure", "paced_order",
]

MINUTE_MS = 60_000
GRACE_S = 5.0  # after the engine's first connection to the broker, before producing
RECORD_KEYS = {  # the input columns an output of a record-at-a-time query is matched on
    "pass-through": ("auction", "price"),
    "filter": ("auction", "price"),
    "nexmark-q1": ("auction", "price", "bidder", "dateTime"),
}
_PRIMES = (1_000_003, 998_244_353, 1_000_000_007, 2_147_483_647)


@dataclass
class Latency:
    rate: float  # input messages per second, as produced
    p50_ms: float | None
    p99_ms: float | None
    samples: int
    note: str = ""


# ---------------------------------------------------------------------------------------------
# The engine's process and the broker


def broker_connected(root: int, port: int) -> bool:
    """Whether a process of `root`'s tree holds an established TCP connection to `port`."""
    inodes = set()
    for pid in process_tree(root):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if link.startswith("socket:["):
                        inodes.add(link[8:-1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if f[3] == "01" and int(f[2].rsplit(":", 1)[1], 16) == port and f[9] in inodes:
                    return True
    return False


def paced_order(data: dict[str, dict[str, np.ndarray]], kinds: tuple[str, ...]):
    """(kind, index) of every input message, in event-time order (stable: a stream's own order
    is kept, which is its order within each partition)."""
    kind_of = np.concatenate([np.full(len(data[k]["id"]), j) for j, k in enumerate(kinds)])
    index = np.concatenate([np.arange(len(data[k]["id"])) for k in kinds])
    times = np.concatenate([data[k]["dateTime"] for k in kinds])
    order = np.argsort(times, kind="stable")
    return kind_of[order], index[order]


def produce_paced(bootstrap: str, topics: list[str], values: list[list[bytes]], kind_of,
                  index, rate: float) -> float:
    """Produce the messages in the given order at `rate` per second (as far as this process
    can: on a loaded machine it may fall short); the rate achieved."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1,
                         "enable.idempotence": True, "acks": "all",
                         "queue.buffering.max.messages": 2_000_000})
    produce = producer.produce
    plan = [(topics[k], values[k][i], i % 2)
            for k, i in zip(kind_of.tolist(), index.tolist(), strict=True)]
    n = len(plan)
    start = time.perf_counter()
    j = 0
    while j < n:
        due = min(n, int((time.perf_counter() - start) * rate) + 1)
        while j < due:
            topic, value, partition = plan[j]
            try:
                produce(topic, value, partition=partition)
                j += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        if j < n:
            time.sleep(min(0.002, max(0.0, (j + 1) / rate - (time.perf_counter() - start))))
    seconds = time.perf_counter() - start
    if producer.flush(120):
        raise RuntimeError("the latency phase's input was not all acknowledged")
    return n / max(seconds, 1e-9)


def _append_times(bootstrap: str, topic: str, n: int) -> np.ndarray:
    """The broker append time of message i of a stream (partition i % 2, offset i // 2)."""
    from confluent_kafka import TopicPartition

    out = np.full(n, -1, dtype=np.int64)
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        left = n
        deadline = time.monotonic() + 120
        while left > 0 and time.monotonic() < deadline:
            for msg in c.consume(10_000, 1.0):
                if not msg.error():
                    i = msg.offset() * 2 + msg.partition()
                    if i < n:
                        out[i] = msg.timestamp()[1]
                        left -= 1
    finally:
        c.close()
    if left > 0:
        raise RuntimeError(f"{topic}: {left} of {n} input messages not read back")
    return out


def _outputs(bootstrap: str, topic: str) -> tuple[np.ndarray, list[dict]]:
    from confluent_kafka import TopicPartition

    offsets = end_offsets(bootstrap, topic)
    stamps, values = [], []
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, low) for p, (low, _) in offsets.items()])
        left = sum(high - low for low, high in offsets.values())
        deadline = time.monotonic() + 300
        while left > 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: {left} output messages not read back")
            for msg in c.consume(10_000, 5.0):
                if not msg.error():
                    left -= 1
                    stamps.append(msg.timestamp()[1])
                    values.append(json.loads(msg.value()))
    finally:
        c.close()
    return np.array(stamps, dtype=np.int64), values


# ---------------------------------------------------------------------------------------------
# Latencies from append times


def _key(columns: list[np.ndarray]) -> np.ndarray:
    k = np.zeros(len(columns[0]), dtype=np.uint64)
    for col, prime in zip(columns, _PRIMES, strict=False):
        k = k * np.uint64(prime) + np.asarray(col).astype(np.int64).astype(np.uint64)
    return k


def _match(k_in: np.ndarray, t_in: np.ndarray, k_out: np.ndarray, t_out: np.ndarray):
    """Latencies of outputs matched to inputs by key: the k-th output of a key (append order)
    to the k-th input of that key."""
    oi = np.lexsort((t_in, k_in))
    ks, ts = k_in[oi], t_in[oi]
    oo = np.lexsort((t_out, k_out))
    ko, to = k_out[oo], t_out[oo]
    rank = np.arange(len(ko)) - np.searchsorted(ko, ko, "left")
    idx = np.searchsorted(ks, ko, "left") + rank
    ok = idx < len(ks)
    ok[ok] = ks[idx[ok]] == ko[ok]
    return to[ok] - ts[idx[ok]]


def _reached(times: np.ndarray, appended: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Per boundary: when every partition (i % 2) had delivered an event with time >= it
    (the latest of the partitions' first such appends); -1 where some partition never does."""
    worst = np.zeros(len(bound), dtype=np.int64)
    for p in (0, 1):
        t, a = times[p::2], appended[p::2]
        first = np.searchsorted(t, bound, "left")  # times never decrease within a partition
        have = first < len(t)
        at = np.where(have, a[np.minimum(first, len(a) - 1)], -1)
        worst = np.where(have & (worst >= 0), np.maximum(worst, at), -1)
    return worst


def latencies(query: str, data: dict[str, dict[str, np.ndarray]],
              appended: dict[str, np.ndarray], stamps: np.ndarray, values: list[dict],
              boundary_fields: tuple[str, ...] | None = None) -> np.ndarray:
    """Latency in ms of every counted output (see the module docstring); `boundary_fields`:
    the columns of a per-boundary query's rows (q5, q7), each distinct row counted once."""

    if query in RECORD_KEYS:
        kind = "nexmark" if query.startswith("nexmark") else "bids"
        cols = data[kind]
        names = RECORD_KEYS[query]
        k_in = _key([cols[c] * 89 // 100 if (c == "price" and query == "nexmark-q1")
                     else cols[c] for c in names])
        k_out = _key([np.array([v[c] for v in values], dtype=np.int64) for c in names])
        return _match(k_in, appended[kind], k_out, stamps)
    if query == "join":
        bid = np.array([v["bid"] for v in values], dtype=np.int64)
        ask = np.array([v["ask"] for v in values], dtype=np.int64)
        return stamps - np.maximum(appended["bids"][bid], appended["asks"][ask])
    kind = "nexmark" if query.startswith("nexmark") else "bids"
    if boundary_fields:
        first: dict[tuple, int] = {}
        for s, v in zip(stamps.tolist(), values, strict=True):
            t0 = v["t0"] if "t0" in v else v["_ts"] // MINUTE_MS * MINUTE_MS
            first.setdefault((t0, *(v[f] for f in boundary_fields)), s)
        bound = np.array([k[0] for k in first], dtype=np.int64)
        out = np.array(list(first.values()), dtype=np.int64)
    else:
        bound = np.array([v.get("t0", v.get("_ts")) for v in values], dtype=np.int64)
        out = stamps
    reached = _reached(data[kind]["dateTime"], appended[kind], bound)
    return (out - reached)[reached >= 0]


# ---------------------------------------------------------------------------------------------
# One run


def measure(
    *, engine: str, query, data: dict[str, dict[str, np.ndarray]], rate: float, bootstrap: str,
    work: Path, engine_command, env: dict[str, str], timeout: float, grace: float = GRACE_S,
    boundary_fields: tuple[str, ...] | None = None, say=print,
) -> Latency:
    """The engine on `query` with its input produced at `rate` messages per second.

    `engine_command(topics, out, live)` is the engine's command line reading `topics` (kind -> topic)
    and writing `out`, following its input until `live` (kind -> messages) are read."""

    kinds = query.inputs
    run = uuid.uuid4().hex[:8]
    topics = {k: f"cqbench-lat-{k}-{engine}-{run}" for k in kinds}
    out = f"cqbench-lat-out-{engine}-{query.name}-{run}"
    for t in (*topics.values(), out):
        create_topic(bootstrap, t, 2, append_time=True)
    port = int(bootstrap.rsplit(":", 1)[1])
    log = work / f"latency-{engine}-{query.name}.log"
    try:
        live = {k: len(data[k]["id"]) for k in kinds}
        all_topics = {**{k: topics.get(k, f"cqbench-lat-unused-{run}") for k in
                         ("bids", "asks", "nexmark")}, **topics}
        with log.open("w") as sink:
            proc = subprocess.Popen(engine_command(all_topics, out, live), stdout=sink, stderr=sink,
                                    env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while not broker_connected(proc.pid, port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{engine} did not connect to the broker; see {log}")
                time.sleep(0.1)
            time.sleep(grace)
            kind_of, index = paced_order(data, kinds)
            values = [encode(data[k]) for k in kinds]
            achieved = produce_paced(bootstrap, [topics[k] for k in kinds], values, kind_of,
                                     index, rate)
            say(f"  produced at {achieved:,.0f} msg/s")
            try:
                code = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                tail = "\n".join(log.read_text().strip().splitlines()[-10:])
                raise RuntimeError(f"{engine} {'timed out' if code is None else f'exit {code}'}"
                                   f":\n{tail}")
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        appended = {k: _append_times(bootstrap, topics[k], len(data[k]["id"])) for k in kinds}
        stamps, outs = _outputs(bootstrap, out)
        lat = latencies(query.name, data, appended, stamps, outs, boundary_fields)
    finally:
        delete_topics(bootstrap, [*topics.values(), out])
    if len(lat) == 0:
        return Latency(achieved, None, None, 0, "no output counted")
    p50, p99 = np.percentile(lat, [50, 99])
    return Latency(achieved, float(p50), float(p99), len(lat))
