"""io/kafka.py without a broker: the partition clock, the brokers' address, and the option
checks made before any connection."""

from __future__ import annotations

import numpy as np
import pytest

from cq_service.io import SINKS, SOURCES, SinkError, SourceError, open_sink, open_source
from cq_service.io.kafka import (
    API_VERSION,
    DEFAULT_BOOTSTRAP,
    KafkaReader,
    KafkaSink,
    PartitionClock,
    bootstrap_servers,
)
from cq_service.spec.model import FieldSpec, SinkSpec, SourceSpec, StreamSpec
from cq_service.types import DataType


def observe(clock: PartitionClock, partition: int, *ts: int) -> None:
    clock.observe(np.full(len(ts), partition, dtype=np.int32), np.array(ts, dtype=np.int64))


def test_api_version_is_pinned_to_a_protocol_kafka_4_speaks():
    assert API_VERSION == (3, 9)


def test_registered_as_kafka():
    assert SOURCES["kafka"] is KafkaReader
    assert SINKS["kafka"] is KafkaSink


def test_bootstrap_servers_option_then_environment_then_default():
    assert bootstrap_servers("a:1, b:2") == ["a:1", "b:2"]
    assert bootstrap_servers(["a:1"]) == ["a:1"]
    assert bootstrap_servers(None, {"CQ_KAFKA_BOOTSTRAP": "env:9"}) == ["env:9"]
    assert bootstrap_servers(None, {}) == [DEFAULT_BOOTSTRAP] == ["127.0.0.1:9092"]


def test_heartbeat_is_the_minimum_over_partitions():
    clock = PartitionClock(max_delay=5)
    observe(clock, 0, 100)
    observe(clock, 1, 40, 50)
    up = {0: False, 1: False}
    assert clock.update(up, now=0.0, idle=1.0) == 44  # min(94, 44)


def test_a_partition_that_delivered_nothing_holds_time_back_until_idle():
    clock = PartitionClock(max_delay=0)
    observe(clock, 0, 100)
    assert clock.update({0: False, 1: True}, now=0.0, idle=2.0) is None
    assert clock.update({0: False, 1: True}, now=1.9, idle=2.0) is None
    assert clock.update({0: False, 1: True}, now=2.0, idle=2.0) == 99


def test_idle_partitions_stop_holding_until_they_deliver_again():
    clock = PartitionClock(max_delay=0)
    observe(clock, 0, 100)
    observe(clock, 1, 10)
    assert clock.update({0: False, 1: True}, now=0.0, idle=1.0) == 9
    assert clock.update({0: False, 1: True}, now=1.0, idle=1.0) == 99
    observe(clock, 1, 20)  # delivers again: holds time back again, from its own bound
    observe(clock, 0, 200)
    assert clock.update({0: False, 1: True}, now=1.5, idle=1.0) == 99  # never goes down
    assert clock.update({0: False, 1: True}, now=2.5, idle=1.0) == 199


def test_when_every_partition_is_idle_the_largest_bound_counts():
    clock = PartitionClock(max_delay=3)
    observe(clock, 0, 100)
    observe(clock, 1, 50)
    assert clock.update({0: True, 1: True}, now=0.0, idle=0.0) == 96


def test_caught_up_again_restarts_the_idle_timer():
    clock = PartitionClock(max_delay=0)
    observe(clock, 0, 100)
    observe(clock, 1, 10)
    clock.update({0: False, 1: True}, now=0.0, idle=1.0)
    clock.update({0: False, 1: False}, now=0.5, idle=1.0)  # behind its end again
    assert clock.update({0: False, 1: True}, now=1.2, idle=1.0) == 9
    assert clock.update({0: False, 1: True}, now=2.2, idle=1.0) == 99


def test_arrival_order_heartbeat_ignores_partitions():
    clock = PartitionClock(max_delay=0, arrival=True)
    observe(clock, 0, 0, 1, 2)
    assert clock.update({0: False, 1: False}, now=0.0, idle=60.0) == 1


# -- option checks before connecting


def stream(**options) -> StreamSpec:
    schema = (FieldSpec("k", DataType.INT), FieldSpec("ts", DataType.INT))
    return StreamSpec("S", schema, SourceSpec("kafka", options=options), timestamp="ts")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "a kafka source needs a topic"),
        ({"topic": "t", "path": "x"}, "unknown kafka source option"),
        ({"topic": "t", "key": "nope"}, "the key field 'nope' is not in the schema"),
        ({"topic": "t", "start": "middle"}, "start must be one of earliest, latest, committed"),
        ({"topic": "t", "time": "wall"}, "time must be one of value, record"),
        ({"topic": "t", "start": "committed"}, "start: committed needs a group"),
        (
            {"topic": "t", "bootstrap_servers": "127.0.0.1:1", "consumer": {"group_id": "x"}},
            "group_id are set by cq",
        ),
        (
            {"topic": "t", "bootstrap_servers": "127.0.0.1:1", "consumer": {"fetch_bytes": 1}},
            "unknown consumer setting(s): fetch_bytes",
        ),
    ],
)
def test_source_option_errors(options, message):
    with pytest.raises(SourceError) as caught:
        open_source(stream(**options), "ms")
    assert message in str(caught.value)


def test_time_record_needs_a_timestamp_field():
    source = SourceSpec("kafka", options={"topic": "t", "time": "record"})
    spec = StreamSpec("S", (FieldSpec("k", DataType.INT),), source)
    with pytest.raises(SourceError, match="time: record fills the stream's timestamp field"):
        open_source(spec, "ms")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "a kafka sink needs a topic"),
        ({"topic": "t", "path": "x"}, "unknown kafka sink option(s): path"),
        ({"topic": "t", "key": ["a", "zz"]}, "key column(s) 'zz' are not in the query's result"),
        (
            {"topic": "t", "bootstrap_servers": "127.0.0.1:1", "producer": {"acks": 0}},
            "acks are set by cq",
        ),
    ],
)
def test_sink_option_errors(options, message):
    with pytest.raises(SinkError) as caught:
        open_sink(SinkSpec("kafka", options=options), ["a", "b"], [DataType.INT, DataType.INT])
    assert message in str(caught.value)


def test_retrying_calls_again_after_retriable_failures_only() -> None:
    from cq_service.io.kafka_client import KafkaCallError, retrying

    calls = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise KafkaCallError("Broker: Not coordinator", retriable=True)
        return 42

    assert retrying(flaky, seconds=5, pause=0.001) == 42
    assert len(calls) == 3

    def refused() -> int:
        calls.append(1)
        raise KafkaCallError("Broker: Group authorization failed", retriable=False)

    calls.clear()
    with pytest.raises(KafkaCallError, match="authorization"):
        retrying(refused, seconds=5, pause=0.001)
    assert len(calls) == 1  # not retried

    def away() -> int:
        calls.append(1)
        raise KafkaCallError("Broker: Not coordinator", retriable=True)

    calls.clear()
    with pytest.raises(KafkaCallError, match="Not coordinator"):
        retrying(away, seconds=0.05, pause=0.01)
    assert 2 <= len(calls) <= 10  # retried until the time was up, then raised


@pytest.mark.parametrize(
    ("code", "retriable"),
    [("_DESTROY_BROKER", True), ("_TRANSPORT", True), ("_DESTROY", False), ("_INVALID_ARG", False)],
)
def test_librdkafka_errors_that_go_away_by_themselves_are_retriable(code: str, retriable: bool):
    """A broker restart can fail a call in flight with _DESTROY_BROKER (the old broker handle
    destroyed): an outage to ride out, not a source error that stops the worker (it did, in a
    clean-clone make test of the broker-restart test); _DESTROY is the client's own end."""
    from confluent_kafka import KafkaError, KafkaException

    from cq_service.io.confluent_client import _describe

    error = _describe(KafkaException(KafkaError(getattr(KafkaError, code))))
    assert error.retriable is retriable, error
