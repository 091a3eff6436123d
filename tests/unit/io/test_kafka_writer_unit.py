"""KafkaWriter's accounting against a producer of the test's own (no broker): what the producer
has not settled is pending, what it gave up on comes back with its bytes and is sent again by a
new producer in order, before what was kept meanwhile; a refusal for good is an error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest

from cq_service.errors import Unreachable
from cq_service.io import SinkError, kafka_sink
from cq_service.io.kafka_client import Failed, KafkaCallError
from cq_service.io.kafka_sink import KafkaWriter

AWAY = KafkaCallError("timed out", retriable=True)


class FakeProducer:
    """Holds what it is handed until the test acknowledges or fails it."""

    made: ClassVar[list[FakeProducer]] = []

    def __init__(self) -> None:
        self.open: list[Failed] = []  # handed, not settled
        self.acked: list[bytes | None] = []
        self.failed: list[Failed] = []
        self.aborted = False
        FakeProducer.made.append(self)

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None,
        headers: Sequence[list[tuple[str, bytes]] | None] | None,
    ) -> None:
        for i, value in enumerate(values):
            key = keys[i] if keys is not None else None
            header = headers[i] if headers is not None else None
            self.open.append(Failed(AWAY, topic, value, key, header))

    def ack(self, n: int) -> None:
        self.acked += [m.value for m in self.open[:n]]
        del self.open[:n]

    def give_up(self, n: int, error: KafkaCallError = AWAY) -> None:
        self.failed += [Failed(error, m.topic, m.value, m.key, m.headers) for m in self.open[:n]]
        del self.open[:n]

    def unsettled(self) -> int:
        return len(self.open)

    def failures(self) -> list[Failed]:
        failed, self.failed = self.failed, []
        return failed

    def flush(self, timeout: float) -> None:
        pass

    def abort(self) -> list[Failed]:
        self.aborted = True
        dropped, self.open = self.failed + self.open, []
        self.failed = []
        return dropped

    def close(self, timeout: float) -> None:
        pass


@pytest.fixture
def writer(monkeypatch: pytest.MonkeyPatch) -> KafkaWriter:
    FakeProducer.made = []
    monkeypatch.setattr(kafka_sink, "open_producer", lambda *_: FakeProducer())
    monkeypatch.setattr(kafka_sink.Probe, "check_now", lambda self, wait=1.0: True)
    w = KafkaWriter(["127.0.0.1:1"], role="sink topic out")
    w.flush_timeout = 0.2
    return w


def test_pending_is_what_the_producer_has_not_settled(writer: KafkaWriter) -> None:
    writer.send_many("out", [b"a", b"bb"], [b"k", None])
    writer.send_many("out", [b"ccc"])
    producer = FakeProducer.made[-1]
    assert writer.pending == (3, 7)
    producer.ack(2)  # the first batch
    assert writer.pending == (1, 3)
    producer.ack(1)
    writer.flush()
    assert writer.pending == (0, 0)


def test_given_up_messages_are_sent_again_in_order_before_the_kept_ones(
    writer: KafkaWriter,
) -> None:
    writer.send_many("out", [b"1", b"2", b"3", b"4"], [b"k1", b"k2", b"k3", b"k4"])
    first = FakeProducer.made[-1]
    first.ack(1)
    first.give_up(2)  # 2 and 3; 4 is still in flight
    with pytest.raises(Unreachable):  # sent again at once, by a new producer: not acknowledged
        writer.flush()
    second = FakeProducer.made[-1]
    assert first.aborted and second is not first
    assert writer.outage is not None
    writer.send_many("out", [b"5"])  # kept while away
    assert writer.pending == (4, 3 * (1 + 2) + 1)
    with pytest.raises(Unreachable):
        writer.flush()
    assert [m.value for m in second.open] == [b"2", b"3", b"4", b"5"]
    assert [m.key for m in second.open] == [b"k2", b"k3", b"k4", None]
    second.ack(4)
    writer.flush()
    assert writer.outage is None and writer.pending == (0, 0)


def test_a_message_refused_for_good_fails_every_flush(writer: KafkaWriter) -> None:
    writer.send_many("out", [b"big"])
    FakeProducer.made[-1].give_up(1, KafkaCallError("message too large", retriable=False))
    for _ in range(2):
        with pytest.raises(SinkError, match="message too large"):
            writer.flush()


def test_abandon_forgets_what_was_not_acknowledged(writer: KafkaWriter) -> None:
    writer.send_many("dead", [b"x"], None, [[("cq.reason", b"r")]])
    first = FakeProducer.made[-1]
    writer.abandon()
    assert first.aborted and writer.pending == (0, 0)
    writer.flush()
