"""Kafka sources and sinks (io/kafka.py) against a real Kafka 4.x broker: values and keys of
every type, the dead-letter topic, time per partition, the end of a `cq run`, the worker's
controls (positions, seek, commit, pause), and `cq run` from topic to topic agreeing with the
jsonl file sink element for element."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewPartitions, NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition

import cq_service.io.kafka as kafka_io
from cq_service.engine.operators.source import SourceOperator
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.io import SinkError, open_sink, open_source
from cq_service.io.base import RawChunk
from cq_service.io.confluent_client import ConfluentConsumer
from cq_service.io.kafka import API_VERSION, KafkaReader
from cq_service.io.kafka_client import ConsumerConfig
from cq_service.spec.model import FieldSpec, SinkSpec, SourceSpec, StreamSpec
from cq_service.types import DataType

ROOT = Path(__file__).resolve().parents[2]
INT, FLOAT, STRING, BOOL, TIMESTAMP = (
    DataType.INT,
    DataType.FLOAT,
    DataType.STRING,
    DataType.BOOL,
    DataType.TIMESTAMP,
)
Message = tuple[int, bytes | None, bytes | None]  # (partition, key, value)

# Every test here holds for both client libraries (tests/integration/conftest.py).
pytestmark = pytest.mark.usefixtures("kafka_client")


# -- helpers ----------------------------------------------------------------------------------


def produce(
    bootstrap: str, topic: str, messages: Sequence[Message], timestamps: Sequence[int] = ()
) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=API_VERSION, acks="all")
    try:
        for i, (partition, key, value) in enumerate(messages):
            stamp = timestamps[i] if timestamps else None
            producer.send(topic, value=value, key=key, partition=partition, timestamp_ms=stamp)
        producer.flush()
    finally:
        producer.close()


def consume_all(bootstrap: str, topic: str) -> list[Any]:
    """Every message of `topic` now, in partition then offset order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=API_VERSION)
    try:
        partitions = [
            TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))
        ]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(partitions)
        got: dict[int, list[Any]] = {tp.partition: [] for tp in partitions}
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, "topic not read to its end in 30 s"
            for tp, records in consumer.poll(timeout_ms=200).items():
                got[tp.partition].extend(records)
        return [r for p in sorted(got) for r in got[p]]
    finally:
        consumer.close()


def stream(
    topic: str,
    bootstrap: str,
    schema: dict[str, DataType],
    timestamp: str | None = "ts",
    max_delay: int = 0,
    is_relation: bool = False,
    **options: Any,
) -> StreamSpec:
    fields = tuple(FieldSpec(n, t) for n, t in schema.items())
    source = SourceSpec(
        "kafka", options={"topic": topic, "bootstrap_servers": bootstrap, **options}
    )
    return StreamSpec(
        "S", fields, source, timestamp=timestamp, is_relation=is_relation, max_delay=max_delay
    )


def read_all(reader: KafkaReader) -> list[RawChunk]:
    chunks = []
    while (chunk := reader.read()) is not None:
        chunks.append(chunk)
    return chunks


def rows(chunks: Sequence[RawChunk]) -> list[tuple]:
    return [
        tuple(c[i] for c in [col.to_pylist() for col in chunk.columns])
        for chunk in chunks
        for i in range(len(chunk))
    ]


def read_live(
    reader: KafkaReader, until: Callable[[list[RawChunk]], bool], seconds: float = 30
) -> list[RawChunk]:
    chunks: list[RawChunk] = []
    deadline = time.monotonic() + seconds
    while not until(chunks):
        assert time.monotonic() < deadline, "condition not met in time"
        chunk = reader.read()
        assert chunk is not None, "a live reader never ends"
        chunks.append(chunk)
    return chunks


def elements(chunks: Sequence[RawChunk]) -> int:
    return sum(len(c) for c in chunks)


def values(n: int, start: int = 0, partition: int = 0) -> list[Message]:
    return [(partition, None, json.dumps({"k": i, "ts": 10 * i}).encode()) for i in range(start, n)]


# -- values and keys --------------------------------------------------------------------------


def test_api_version_pin_talks_to_the_broker(kafka_bootstrap, new_topic):
    """The pinned protocol version works for the admin client, the producer (acks=all) and the
    consumer's ListOffsets (dpkp/kafka-python#2679)."""
    topic = new_topic(2)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, api_version=API_VERSION)
    try:
        assert topic in admin.list_topics()
    finally:
        admin.close()
    produce(kafka_bootstrap, topic, values(3))
    with KafkaReader(stream(topic, kafka_bootstrap, {"k": INT}), "ms") as reader:
        assert reader.lag() == 3
        assert elements(read_all(reader)) == 3


def test_every_type_round_trips_through_sink_and_source(kafka_bootstrap, new_topic, tmp_path):
    topic = new_topic()
    names = ["i", "f", "s", "b", "t"]
    types = [INT, FLOAT, STRING, BOOL, TIMESTAMP]
    columns = [
        pa.array([1, -(2**63), 2**63 - 1, None, 0], pa.int64()),
        pa.array([1.5, 0.1, 1e20, None, -0.0], pa.float64()),
        pa.array(["a", 'é ü\n"q"\\ \t\x01', "", None, "日本"], pa.string()),
        pa.array([True, False, None, True, False], pa.bool_()),
        pa.array([0, 1714567890123, -5, None, 7], pa.int64()),
    ]
    ts = np.array([1, 2, 3, 3, 4], dtype=np.int64)
    ops = np.array([1, 1, 1, -1, 1], dtype=np.int8)

    spec = SinkSpec("kafka", options={"topic": topic, "bootstrap_servers": kafka_bootstrap})
    with open_sink(spec, names, types) as sink:
        sink.write(ts, ops, columns)
        sink.flush()
    jsonl = tmp_path / "out.jsonl"
    with open_sink(SinkSpec("file", str(jsonl), "jsonl"), names, types) as sink:
        sink.write(ts, ops, columns)
    messages = consume_all(kafka_bootstrap, topic)
    assert [m.value + b"\n" for m in messages] == jsonl.read_bytes().splitlines(keepends=True)
    assert all(m.key is None for m in messages)

    relation = stream(
        topic, kafka_bootstrap, dict(zip(names, types)), timestamp="_ts", is_relation=True
    )
    with open_source(relation, "ms") as reader:
        chunks = read_all(reader)
    assert np.concatenate([c.ts for c in chunks]).tolist() == ts.tolist()
    assert np.concatenate([c.ops for c in chunks]).tolist() == ops.tolist()
    back = list(zip(*rows(chunks)))
    assert [list(col) for col in back] == [c.to_pylist() for c in columns]
    assert math.copysign(1.0, back[1][4]) == -1.0


def test_nan_is_written_as_null_and_read_back_as_null(kafka_bootstrap, new_topic):
    topic = new_topic()
    spec = SinkSpec("kafka", options={"topic": topic, "bootstrap_servers": kafka_bootstrap})
    with open_sink(spec, ["f"], [FLOAT]) as sink:
        sink.write(np.array([1, 2]), np.array([1, 1]), [pa.array([math.nan, math.inf])])
    assert [m.value for m in consume_all(kafka_bootstrap, topic)] == [
        b'{"_ts":1,"_op":"+","f":null}',
        b'{"_ts":2,"_op":"+","f":null}',
    ]


def test_keyed_records_on_three_partitions(kafka_bootstrap, new_topic):
    topic = new_topic(3)
    n = 60
    k = pa.array([i % 9 for i in range(n)], pa.int64())
    v = pa.array([f"v{i}" for i in range(n)], pa.string())
    spec = SinkSpec(
        "kafka", options={"topic": topic, "bootstrap_servers": kafka_bootstrap, "key": ["k"]}
    )
    with open_sink(spec, ["k", "v"], [INT, STRING]) as sink:
        sink.write(np.arange(n), np.ones(n, dtype=np.int8), [k, v])
    messages = consume_all(kafka_bootstrap, topic)
    assert sorted(m.key for m in messages) == sorted(str(i % 9).encode() for i in range(n))
    partition_of_key: dict[bytes, set[int]] = {}
    for m in messages:
        partition_of_key.setdefault(m.key, set()).add(m.partition)
    assert all(len(ps) == 1 for ps in partition_of_key.values())
    assert len({m.partition for m in messages}) > 1

    # The key fills a schema field that the value does not carry.
    source = stream(topic, kafka_bootstrap, {"kk": INT, "v": STRING, "_ts": INT}, "_ts", key="kk")
    with open_source(source, "ms") as reader:
        chunks = read_all(reader)
    got = rows(chunks)
    assert sorted(got) == sorted((i % 9, f"v{i}", i) for i in range(n))
    where = {(m.partition, m.offset): m.key for m in messages}
    for chunk in chunks:
        assert chunk.partition is not None and chunk.partition.dtype == np.int32
        for (kk, _, _), p, offset in zip(rows([chunk]), chunk.partition, chunk.record):
            assert where[(int(p), int(offset))] == str(kk).encode()


def test_a_key_of_several_columns_is_a_json_array(kafka_bootstrap, new_topic):
    topic = new_topic()
    options = {"topic": topic, "bootstrap_servers": kafka_bootstrap, "key": ["a", "b"]}
    with open_sink(SinkSpec("kafka", options=options), ["a", "b"], [INT, STRING]) as sink:
        sink.write(np.array([1, 1]), np.array([1, -1]), [pa.array([1, None]), pa.array(["x", "é"])])
    assert [m.key for m in consume_all(kafka_bootstrap, topic)] == [
        b'[1,"x"]',
        '[null,"é"]'.encode(),
    ]


def test_record_time_fills_the_timestamp_field(kafka_bootstrap, new_topic):
    topic = new_topic()
    produce(
        kafka_bootstrap,
        topic,
        [(0, None, b'{"k": 1, "ts": 5}'), (0, None, b'{"k": 2}')],
        timestamps=[1_700_000_000_999, 1_700_000_001_000],
    )
    spec = stream(topic, kafka_bootstrap, {"k": INT, "ts": TIMESTAMP}, time="record")
    with open_source(spec, "s") as reader:
        chunks = read_all(reader)
    assert rows(chunks) == [(1, 1_700_000_000), (2, 1_700_000_001)]


# -- the dead-letter topic --------------------------------------------------------------------


def test_malformed_messages_go_to_the_dead_letter_topic(kafka_bootstrap, new_topic):
    topic = new_topic(2)
    sent: list[Message] = [
        (0, b"a", b'{"k": "x1", "ts": 1}'),
        (0, b"b", b"{bad json"),
        (0, None, b"[1, 2]"),
        (1, b"c", b'{"k": "x2", "ts": "soon"}'),
        (1, b"d", None),
        (1, None, b"\xff\xfe{}"),
        (1, b"\xc3", b'{"k": "x3", "ts": 3}'),
        (0, None, b'{\n  "k": "x4",\n  "ts": 4\n}'),
        (0, None, b""),
    ]
    produce(kafka_bootstrap, topic, sent)
    spec = stream(topic, kafka_bootstrap, {"k": STRING, "ts": INT}, key="k")
    with open_source(spec, "ms") as reader:
        chunks = read_all(reader)
    assert sorted(rows(chunks), key=repr) == [("a", 1), (None, 4)]
    dead = sorted((d for c in chunks for d in c.dead), key=lambda d: (d.file, d.record))
    assert [(d.file, d.record, d.raw) for d in dead] == [
        (f"kafka:{topic}/0", 1, "{bad json"),
        (f"kafka:{topic}/0", 2, "[1, 2]"),
        (f"kafka:{topic}/0", 4, ""),
        (f"kafka:{topic}/1", 0, '{"k": "x2", "ts": "soon"}'),
        (f"kafka:{topic}/1", 1, ""),
        (f"kafka:{topic}/1", 2, "\ufffd\ufffd{}"),
        (f"kafka:{topic}/1", 3, '{"k": "x3", "ts": 3}'),
    ]
    reasons = [d.reason for d in dead]
    assert reasons[0].startswith("invalid JSON")
    assert reasons[1] == "not a JSON object: list"
    assert reasons[2].startswith("invalid JSON")
    assert reasons[3] == "timestamp 'ts': 'soon' is not a timestamp"
    assert reasons[4] == "no value (a tombstone)"
    assert reasons[5] == "not valid UTF-8"
    assert reasons[6] == "key: not valid UTF-8"
    assert all(d.source == "S" for d in dead)

    letters = consume_all(kafka_bootstrap, f"{topic}.dlq")
    assert len(letters) == len(dead)
    by_origin = {}
    for m in letters:
        headers = dict(m.headers)
        assert headers["cq.source.topic"] == topic.encode()
        assert headers["cq.stream"] == b"S"
        origin = (int(headers["cq.source.partition"]), int(headers["cq.source.offset"]))
        by_origin[origin] = (m.key, m.value, headers["cq.reason"].decode())
    originals = {}
    counters = {0: 0, 1: 0}
    for partition, key, value in sent:
        originals[(partition, counters[partition])] = (key, value)
        counters[partition] += 1
    for d in dead:
        origin = (int(d.file.rsplit("/", 1)[1]), d.record)
        assert by_origin[origin] == (*originals[origin], d.reason)


def test_a_custom_dead_letter_topic(kafka_bootstrap, new_topic):
    topic, letters = new_topic(), new_topic()
    produce(kafka_bootstrap, topic, [(0, None, b"nope")])
    spec = stream(topic, kafka_bootstrap, {"k": INT}, dead_letter_topic=letters)
    with open_source(spec, "ms") as reader:
        assert [len(c.dead) for c in read_all(reader)] == [1]
    assert [m.value for m in consume_all(kafka_bootstrap, letters)] == [b"nope"]


# -- time per partition -----------------------------------------------------------------------


class Lates:
    """The engine's dead-letter seam, keeping late elements (timestamp, reason)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, str]] = []

    def dead(self, records: list[Any]) -> None:
        pass

    def late(self, source: str, rows: list[tuple], ts: list[int], reason: list[str]) -> None:
        self.items.extend(zip(ts, reason))


def source_operator(reader: Any, max_delay: int) -> tuple[SourceOperator, Any, Lates]:
    q = Queue("out")
    out = q.reader()
    lates = Lates()
    op = SourceOperator(
        "S",
        q,
        reader,
        max_delay=max_delay,
        late_policy="dead_letter",
        dead_letters=lates,
        column_names=["k", "ts"],
    )
    op.out_types = [INT, INT]
    return op, out, lates


def drain(out: Any) -> tuple[list[int], list[int]]:
    released, beats = [], []
    while (item := out.get()) is not None:
        if isinstance(item, Heartbeat):
            beats.append(item.ts)
        else:
            released.extend(item.ts.tolist())
    return released, beats


def test_a_lagging_partition_does_not_make_the_others_records_late(kafka_bootstrap, new_topic):
    topic = new_topic(2)
    ahead = [(0, None, json.dumps({"k": 0, "ts": 1000 + i}).encode()) for i in range(10)]
    behind = [(1, None, json.dumps({"k": 1, "ts": i}).encode()) for i in range(10)]
    produce(kafka_bootstrap, topic, ahead)  # partition 0 first, far ahead in time
    produce(kafka_bootstrap, topic, behind)
    reader = open_source(stream(topic, kafka_bootstrap, {"k": INT, "ts": INT}), "ms")
    op, out, lates = source_operator(reader, max_delay=5)
    try:
        while op.runnable():
            op.run(1 << 20)
    finally:
        reader.close()
    released, beats = drain(out)
    assert lates.items == []
    assert released == sorted([1000 + i for i in range(10)] + list(range(10)))
    assert beats == sorted(beats) and beats[-1] == 1009


def test_heartbeat_is_the_minimum_over_partitions(kafka_bootstrap, new_topic):
    topic = new_topic(2)
    produce(kafka_bootstrap, topic, [(0, None, b'{"ts": 100}'), (1, None, b'{"ts": 50}')])
    spec = stream(topic, kafka_bootstrap, {"ts": INT}, max_delay=3, idle_timeout=60.0)
    with open_source(spec, "ms", live=True) as reader:
        chunks = read_live(reader, lambda cs: elements(cs) == 2)
        assert chunks[-1].heartbeat == 46  # min(100, 50) - 3 - 1
        produce(kafka_bootstrap, topic, [(1, None, b'{"ts": 80}')])
        chunks = read_live(reader, lambda cs: elements(cs) == 1)
        assert chunks[-1].heartbeat == 76


def test_a_partition_that_delivered_nothing_holds_time_back_until_idle(kafka_bootstrap, new_topic):
    topic = new_topic(2)
    produce(kafka_bootstrap, topic, [(0, None, b'{"ts": 100}')])
    spec = stream(topic, kafka_bootstrap, {"ts": INT}, idle_timeout=1.0)
    with open_source(spec, "ms", live=True) as reader:
        start = time.monotonic()
        chunks = read_live(reader, lambda cs: elements(cs) == 1)
        assert all(c.heartbeat is None for c in chunks)
        chunks = read_live(reader, lambda cs: bool(cs) and cs[-1].heartbeat is not None)
        assert time.monotonic() - start >= 1.0
        assert chunks[-1].heartbeat == 99
        assert all(len(c) == 0 for c in chunks)  # empty chunks while nothing is new


def test_an_idle_partition_that_delivers_again_is_late_only_below_the_passed_heartbeat(
    kafka_bootstrap, new_topic
):
    topic = new_topic(2)
    produce(kafka_bootstrap, topic, [(0, None, b'{"k": 0, "ts": 100}')])
    produce(kafka_bootstrap, topic, [(1, None, b'{"k": 1, "ts": 10}')])
    spec = stream(topic, kafka_bootstrap, {"k": INT, "ts": INT}, idle_timeout=0.5)
    reader = open_source(spec, "ms", live=True)
    op, _out, lates = source_operator(reader, max_delay=0)
    try:
        deadline = time.monotonic() + 30
        while op.watermark < 99:  # both partitions idle: the largest bound
            assert time.monotonic() < deadline
            op.run(1 << 20)
        produce(kafka_bootstrap, topic, [(1, None, b'{"k": 1, "ts": 60}')])
        produce(kafka_bootstrap, topic, [(1, None, b'{"k": 1, "ts": 120}')])
        while not lates.items or op.reorder.partition_max(1) < 120:
            assert time.monotonic() < deadline
            op.run(1 << 20)
    finally:
        reader.close()
    [(ts, reason)] = lates.items
    assert ts == 60 and "heartbeat already passed" in reason


# -- reading up to the end; the worker's controls ---------------------------------------------


def test_not_live_reads_up_to_the_end_offsets_as_of_opening(kafka_bootstrap, new_topic):
    topic = new_topic()
    produce(kafka_bootstrap, topic, values(5))
    with open_source(stream(topic, kafka_bootstrap, {"k": INT}), "ms") as reader:
        produce(kafka_bootstrap, topic, values(8, start=5))
        chunks = read_all(reader)
        assert [r[0] for r in rows(chunks)] == [0, 1, 2, 3, 4]
        assert reader.read() is None
        assert reader.positions() == {0: 5}
        assert reader.lag() == 0


def test_positions_seek_commit_and_committed(kafka_bootstrap, new_topic):
    topic = new_topic(2)
    group = f"g-{topic}"
    produce(kafka_bootstrap, topic, values(4) + values(4, partition=1))
    spec = stream(topic, kafka_bootstrap, {"k": INT}, group=group)
    with open_source(spec, "ms") as reader:
        assert reader.positions() == {0: 0, 1: 0}
        assert reader.committed() == {}
        assert elements(read_all(reader)) == 8
        assert reader.positions() == {0: 4, 1: 4}
        reader.commit({0: 3, 1: 4}, metadata="worker-1")
        assert reader.committed() == {0: 3, 1: 4}
    check = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap, api_version=API_VERSION, group_id=group
    )
    try:
        meta = check.committed(TopicPartition(topic, 0), metadata=True)
        # confluent-kafka commits the metadata with C's NUL terminator (librdkafka#4649 and
        # confluent-kafka-python#1410 discuss it): the text before it is what was committed.
        assert (meta.offset, meta.metadata.rstrip("\x00")) == (3, "worker-1")
    finally:
        check.close()

    committed = stream(topic, kafka_bootstrap, {"k": INT}, group=group, start="committed")
    with open_source(committed, "ms") as reader:
        chunks = read_all(reader)
        assert [(int(c.partition[i]), int(c.record[i])) for c in chunks for i in range(len(c))] == [
            (0, 3)
        ]

    with open_source(spec, "ms") as reader:
        reader.seek({1: 2})  # partition 0 starts per `start` (earliest)
        assert reader.positions() == {0: 0, 1: 2}
        chunks = read_all(reader)
        got = sorted((int(c.partition[i]), int(c.record[i])) for c in chunks for i in range(len(c)))
        assert got == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 2), (1, 3)]

    latest = stream(topic, kafka_bootstrap, {"k": INT}, start="latest")
    with open_source(latest, "ms") as reader:
        assert reader.positions() == {0: 4, 1: 4}
        assert read_all(reader) == []


def test_librdkafka_never_fetches_the_group_offsets_itself(kafka_bootstrap, new_topic):
    """A partition assigned but not sought is not read: librdkafka, left to start it at the
    group's committed offset, fetched that itself and made a coordinator still loading (``Not
    coordinator``) an error of the next poll, which failed `cq run` (CI, 2026-11-29)."""
    topic = new_topic(1)
    group = f"g-{topic}"
    produce(kafka_bootstrap, topic, values(4))
    committer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap, api_version=API_VERSION, group_id=group
    )
    try:
        committer.commit({TopicPartition(topic, 0): OffsetAndMetadata(2, "", -1)})
    finally:
        committer.close()
    consumer = ConfluentConsumer(
        ConsumerConfig([kafka_bootstrap], topic, group, "earliest", 100, 5000)
    )
    try:
        consumer.assign([0])
        assert len(consumer.poll(2000, 100)) == 0  # not from the committed offset 2
        assert consumer.position(0, None) is None
        consumer.seek(0, 1)
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < 3:
            assert time.monotonic() < deadline, "the sought partition was not read in 30 s"
            got.extend(int(o) for o in consumer.poll(500, 100).offset)
        assert got == [1, 2, 3]
    finally:
        consumer.close()


def test_pause_and_resume(kafka_bootstrap, new_topic):
    topic = new_topic()
    produce(kafka_bootstrap, topic, values(3))
    with open_source(stream(topic, kafka_bootstrap, {"k": INT}), "ms", live=True) as reader:
        reader.pause()
        assert reader.paused
        for _ in range(5):
            assert len(reader.read()) == 0
        assert reader.lag() == 3
        reader.resume()
        assert not reader.paused
        read_live(reader, lambda cs: elements(cs) == 3)
        assert reader.lag() == 0


def test_live_reader_picks_up_added_partitions(
    kafka_bootstrap, new_topic, kafka_admin, monkeypatch
):
    monkeypatch.setattr(kafka_io, "_REFRESH_S", 0.2)
    topic = new_topic(1)
    spec = stream(topic, kafka_bootstrap, {"k": INT}, consumer={"metadata_max_age_ms": 200})
    with open_source(spec, "ms", live=True) as reader:
        assert reader.positions() == {0: 0}
        kafka_admin.create_partitions({topic: NewPartitions(total_count=2)})
        deadline = time.monotonic() + 30
        while 1 not in reader.positions():
            assert time.monotonic() < deadline, "partition 1 was not picked up"
            reader.read()
        produce(kafka_bootstrap, topic, values(2, partition=1))
        chunks = read_live(reader, lambda cs: elements(cs) == 2)
        assert {int(p) for c in chunks for p in c.partition} == {1}


def test_sink_flush_raises_when_the_broker_refuses(kafka_bootstrap, kafka_admin):
    topic = f"cq-test-small-{time.time_ns()}"
    kafka_admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": "200"})])
    try:
        spec = SinkSpec("kafka", options={"topic": topic, "bootstrap_servers": kafka_bootstrap})
        sink = open_sink(spec, ["s"], [STRING])
        sink.write(np.array([1]), np.array([1]), [pa.array(["x" * 1000])])
        with pytest.raises(SinkError, match="Kafka rejected a message"):
            sink.flush()
        with pytest.raises(SinkError):
            sink.close()
    finally:
        kafka_admin.delete_topics([topic])


# -- cq run: topic to topic, as the jsonl file sink writes it ---------------------------------

QUERIES = {
    "all": "SELECT * FROM S",
    "big": "SELECT Istream(k, v) FROM S [Range 50] WHERE v > 20",
    "counts": "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range 100 Slide 50] GROUP BY k",
    "latest": "SELECT k, v FROM S [Partition By k Rows 2]",
}


def pipeline(name: str, source: str, sinks: dict[str, str], dead_letter: str) -> str:
    lines = [
        "version: 1",
        f"name: {name}",
        "streams:",
        "  S:",
        "    schema: {k: int, v: int, ts: int}",
        "    timestamp: ts",
        f"    source: {source}",
        "queries:",
    ]
    for q, cql in QUERIES.items():
        lines += [f"  {q}:", f"    cql: {json.dumps(cql)}", f"    sink: {sinks[q]}"]
    lines.append(f"dead_letter: {dead_letter}")
    return "\n".join(lines) + "\n"


def cq_run(path: Path, bootstrap: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CQ_KAFKA_BOOTSTRAP": bootstrap}
    return subprocess.run(
        [sys.executable, "-m", "cq_service.cli", "run", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )


@pytest.mark.parametrize("partitions", [1, 3])
def test_cq_run_topic_to_topic_equals_the_jsonl_file_sink(
    kafka_bootstrap, new_topic, tmp_path, partitions
):
    data = [{"k": i % 5, "v": (i * 37) % 100, "ts": 3 * i} for i in range(400)]
    lines = [json.dumps(r).encode() for r in data]
    lines.insert(100, b'{"k": 1, "v": "many", "ts": 300}')  # malformed: dead-lettered
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    topic = new_topic(partitions)
    produce(kafka_bootstrap, topic, [(i % partitions, None, line) for i, line in enumerate(lines)])
    outs = {q: new_topic() for q in QUERIES}
    dead = new_topic()

    file_pipeline = tmp_path / "file.yaml"
    file_pipeline.write_text(
        pipeline(
            "as-files",
            "{type: file, path: in.jsonl}",
            {q: f"{{type: file, path: out/{q}.jsonl}}" for q in QUERIES},
            "{type: file, path: out/dead.jsonl}",
        )
    )
    kafka_pipeline = tmp_path / "kafka.yaml"
    kafka_pipeline.write_text(
        pipeline(
            "as-topics",
            f"{{type: kafka, topic: {topic}}}",  # brokers from CQ_KAFKA_BOOTSTRAP
            {q: f"{{type: kafka, topic: {outs[q]}}}" for q in QUERIES},
            f"{{type: kafka, topic: {dead}}}",
        )
    )
    for path in (file_pipeline, kafka_pipeline):
        done = cq_run(path, kafka_bootstrap)
        assert done.returncode == 0, done.stderr

    for q in QUERIES:
        expected = (tmp_path / "out" / f"{q}.jsonl").read_bytes().splitlines()
        got = [m.value for m in consume_all(kafka_bootstrap, outs[q])]
        assert expected and got == expected, q
    [letter] = consume_all(kafka_bootstrap, dead)
    entry = json.loads(letter.value)
    assert entry["file"] == f"kafka:{topic}/{100 % partitions}"
    assert entry["reason"] == "column 'v': 'many' is not an int"
    [source_letter] = consume_all(kafka_bootstrap, f"{topic}.dlq")
    assert source_letter.value == lines[100]
