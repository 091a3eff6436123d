"""Kafka I/O through a broker restart (a broker of the test's own, stopped and started again):
the producer keeps every message until acknowledged and sends again what the broker never got;
the reader reads nothing meanwhile, lets no partition turn idle, and goes on where it stopped."""

from __future__ import annotations

import json
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import TopicPartition

from cq_service.errors import Unreachable
from cq_service.io import open_source
from cq_service.io.kafka_sink import KafkaWriter
from cq_service.spec.model import FieldSpec, SourceSpec, StreamSpec
from cq_service.types import DataType
from tests.services.kafka import KAFKA_API_VERSION
from tests.services.own import OwnKafka

# Every test here holds for both client libraries (tests/integration/conftest.py).
pytestmark = pytest.mark.usefixtures("kafka_client")


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def topic_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """Everything on partition 0 of `topic` (waiting until at least `expected` arrived)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION,
        auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=1000,
    )
    consumer.assign([TopicPartition(topic, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < expected and time.monotonic() < deadline:
        values.extend(m.value for m in consumer)
    values.extend(m.value for m in consumer)  # and nothing more
    consumer.close()
    return values


def flush_when_back(writer: KafkaWriter, seconds: float = 60) -> int:
    """Flush until the broker takes everything; the number of Unreachable on the way."""
    deadline = time.monotonic() + seconds
    failures = 0
    while True:
        try:
            writer.flush()
            return failures
        except Unreachable:
            failures += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_writer_keeps_and_sends_again_across_a_broker_restart(own_kafka: OwnKafka) -> None:
    bootstrap = own_kafka.bootstrap
    create_topic(bootstrap, "out")
    # The producer gives up on a message after 2 s (default: 120 s), so the messages it held
    # while the broker was away must be sent again by the writer.
    writer = KafkaWriter(
        [bootstrap], {"request_timeout_ms": 1000, "delivery_timeout_ms": 2000},
        role="sink topic out",
    )
    writer.flush_timeout = 1.0
    sent = [json.dumps({"i": i}).encode() for i in range(300)]
    for value in sent[:100]:
        writer.send("out", value)
    writer.flush(timeout=30.0)  # an idempotent producer's first send waits for its id
    assert writer.pending == (0, 0)

    own_kafka.stop()
    for value in sent[100:200]:  # handed to the producer: the writer does not know yet
        writer.send("out", value)
    with pytest.raises(Unreachable) as away:
        writer.flush()
    outage = away.value.outage
    assert (outage.dependency, outage.role, outage.reason) == (
        f"kafka {bootstrap}", "sink topic out", "connection refused"
    )
    assert writer.outage == outage
    assert writer.pending == (100, sum(len(v) for v in sent[100:200]))
    time.sleep(3)  # past the delivery timeout: the producer gives these up
    for value in sent[200:]:  # kept, not handed over while the broker is away
        writer.send("out", value)
    with pytest.raises(Unreachable):
        writer.flush()
    assert writer.pending[0] == 200
    assert writer.outage is not None and writer.outage.since == outage.since  # the same one

    own_kafka.start()
    flush_when_back(writer)
    assert writer.outage is None
    assert writer.pending == (0, 0)
    writer.close()
    assert topic_values(bootstrap, "out", len(sent)) == sent  # all, once, in order


IDLE_S = 5.0  # a partition caught up for this long stops holding time back


def stream(topic: str, bootstrap: str) -> StreamSpec:
    return StreamSpec(
        "S",
        (FieldSpec("k", DataType.INT), FieldSpec("ts", DataType.INT)),
        SourceSpec("kafka", options={
            "topic": topic, "bootstrap_servers": bootstrap, "group": "cq-outage",
            "idle_timeout": IDLE_S,
        }),
        timestamp="ts",
    )


def produce(bootstrap: str, topic: str, records: list[tuple[int, int]]) -> None:
    """(partition, ts) records."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=KAFKA_API_VERSION)
    for partition, ts in records:
        producer.send(topic, json.dumps({"k": partition, "ts": ts}).encode(), partition=partition)
    producer.flush()
    producer.close()


def test_reader_waits_out_a_broker_restart_without_moving_time(own_kafka: OwnKafka) -> None:
    bootstrap = own_kafka.bootstrap
    create_topic(bootstrap, "in", partitions=2)
    # Partition 0 is far ahead of partition 1: only an idle partition 1 would let time
    # (the heartbeat) move past 100 - 1.
    produce(bootstrap, "in", [(0, t) for t in range(0, 1000, 10)] + [(1, t) for t in range(0, 101, 10)])
    reader = open_source(stream("in", bootstrap), "ms", live=True)
    try:
        got, beat = 0, None
        deadline = time.monotonic() + 30
        while got < 111 and time.monotonic() < deadline:
            chunk = reader.read()
            got, beat = got + len(chunk), chunk.heartbeat
        assert got == 111
        assert beat == 99  # read within IDLE_S: partition 1 (at 100) holds time back
        positions = reader.positions()
        assert positions == {0: 100, 1: 11}

        own_kafka.stop()
        beats = set()
        deadline = time.monotonic() + IDLE_S + 1  # longer than partitions take to turn idle
        while time.monotonic() < deadline:
            chunk = reader.read()
            assert len(chunk) == 0
            beats.add(chunk.heartbeat)
        assert beats == {99}  # no partition turned idle while the broker was away
        assert reader.outage is not None
        assert reader.outage.describe().startswith(
            f"kafka {bootstrap}: source topic in: connection refused since "
        )
        assert reader.positions() == positions  # as last known
        with pytest.raises(Unreachable):
            reader.commit(positions)

        own_kafka.start()
        produce(bootstrap, "in", [(1, t) for t in range(110, 300, 10)])
        later = []
        deadline = time.monotonic() + 30
        while len(later) < 19 and time.monotonic() < deadline:
            chunk = reader.read()
            later.extend(chunk.ts.tolist())
        assert later == list(range(110, 300, 10))  # on from where it stopped, once each
        assert reader.outage is None
        assert reader.positions() == {0: 100, 1: 30}
        reader.commit(reader.positions())
    finally:
        reader.close()
