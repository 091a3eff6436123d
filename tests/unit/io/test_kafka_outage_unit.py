"""Kafka I/O when no broker answers (a closed local port): errors are classified at the
boundary, the producer keeps what it was given, opening a source says the brokers are away."""

from __future__ import annotations

import socket

import pytest
from kafka.errors import KafkaConnectionError, KafkaTimeoutError, MessageSizeTooLargeError

from cq_service.errors import Unreachable
from cq_service.io import DeadRecord, SourceError, open_source
from cq_service.io.dead_letter import DeadLetterSink
from cq_service.io.kafka_client import describe_kafka_error, is_retriable
from cq_service.io.kafka_sink import KafkaWriter
from cq_service.spec.model import FieldSpec, SinkSpec, SourceSpec, StreamSpec
from cq_service.types import DataType


@pytest.fixture
def closed() -> str:
    """``host:port`` nothing listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_retriable_errors_are_told_from_refusals() -> None:
    assert is_retriable(KafkaConnectionError("111 ECONNREFUSED"))
    assert is_retriable(KafkaTimeoutError("Expiring 3 record(s)"))
    assert is_retriable(ConnectionRefusedError())
    assert not is_retriable(MessageSizeTooLargeError())
    assert describe_kafka_error(KafkaConnectionError("111 ECONNREFUSED")) == "connection refused"
    assert describe_kafka_error(KafkaTimeoutError("no answer")) == "KafkaTimeoutError: no answer"


def test_a_writer_keeps_what_no_broker_acknowledged(closed: str) -> None:
    writer = KafkaWriter([closed], role="sink topic out")
    writer.flush_timeout = 0.5
    for i in range(3):
        writer.send("out", b"v%d" % i, b"k")
    with pytest.raises(Unreachable) as away:
        writer.flush()
    outage = away.value.outage
    assert (outage.dependency, outage.role, outage.reason) == (
        f"kafka {closed}", "sink topic out", "connection refused"
    )
    assert away.value.message.startswith(f"kafka {closed}: sink topic out: connection refused since ")
    assert writer.outage == outage
    assert writer.pending == (3, 9)
    for i in range(3, 5):  # while away: kept, in order, for a later flush
        writer.send("out", b"v%d" % i)
    assert writer.pending == (5, 13)
    with pytest.raises(Unreachable) as again:
        writer.flush()
    assert again.value.outage.since == outage.since  # the same outage goes on
    writer.close()


def test_a_kafka_dead_letter_sink_reports_its_outage(closed: str) -> None:
    sink = DeadLetterSink(
        SinkSpec("kafka", options={"topic": "dead", "bootstrap_servers": closed})
    )
    assert sink.outage is None and sink.dependency == f"kafka {closed}"
    sink.flush_timeout = 0.5
    sink.write([DeadRecord("S", "in.jsonl", 7, "not JSON", "{")])
    with pytest.raises(Unreachable):
        sink.flush()
    assert sink.outage is not None
    assert (sink.outage.role, sink.outage.reason) == ("dead-letter topic dead", "connection refused")
    assert sink.pending[0] == 1  # kept for a later flush
    with pytest.raises(Unreachable):  # closing says what was not delivered
        sink.close()


def test_opening_a_source_without_a_broker_is_unreachable_not_wrong(closed: str) -> None:
    stream = StreamSpec(
        "S", (FieldSpec("k", DataType.INT),),
        SourceSpec("kafka", options={"topic": "in", "bootstrap_servers": closed}),
    )
    with pytest.raises(Unreachable) as away:
        open_source(stream, "ms", live=True)
    assert not isinstance(away.value, SourceError)
    assert away.value.outage.describe().startswith(
        f"kafka {closed}: source topic in: connection refused since "
    )
