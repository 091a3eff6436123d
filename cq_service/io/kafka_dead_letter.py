"""A Kafka source's dead-letter topic (`dead_letter_topic`, ``<topic>.dlq`` by default): each
message that does not fit the stream's schema goes there with its original key and bytes, and
headers giving the reason and where it came from (docs/kafka.md). The reader (kafka.py) waits for
the broker's acknowledgement before it moves on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cq_service.errors import Span
from cq_service.io.base import DeadRecord, SourceError
from cq_service.io.kafka_connect import dead_letter_settings
from cq_service.io.kafka_messages import Messages
from cq_service.io.kafka_sink import KafkaWriter

__all__ = ["DeadLetterTopic"]


class DeadLetterTopic:
    """The dead-letter topic of stream `stream` read from `source_topic`. Its producer is made at
    the first message sent (with the consumer's `settings` that apply to it, and
    `flush_timeout` if set by then)."""

    def __init__(
        self,
        topic: str,
        stream: str,
        source_topic: str,
        servers: Sequence[str],
        client: str,
        settings: Mapping[str, Any],
        span: Span | None,
    ):
        self.topic = topic
        self.stream = stream
        self.source_topic = source_topic
        self.servers = servers
        self.client = client
        self.settings = settings
        self.span = span
        self.flush_timeout: float | None = None  # the producer's (None: KafkaWriter's default)
        self._writer: KafkaWriter | None = None

    def send(self, polled: Messages, dead: Sequence[DeadRecord]) -> None:
        """Send malformed messages and wait for the broker's acknowledgement
        (`DeadRecord.record` is still the index in `polled`)."""
        if not dead:
            return
        if self._writer is None:
            self._writer = KafkaWriter(
                self.servers, dead_letter_settings(self.client, self.settings),
                error=SourceError, span=self.span,
                role=f"dead-letter topic {self.topic}", client=self.client,
            )  # fmt: skip
            if self.flush_timeout is not None:
                self._writer.flush_timeout = self.flush_timeout
        for d in dead:
            i = d.record
            headers = [
                ("cq.reason", d.reason.encode("utf-8")),
                ("cq.stream", self.stream.encode("utf-8")),
                ("cq.source.topic", self.source_topic.encode("utf-8")),
                ("cq.source.partition", str(polled.partition[i]).encode()),
                ("cq.source.offset", str(polled.offset[i]).encode()),
            ]
            self._writer.send(self.topic, polled.value[i], polled.key[i], headers)
        self._writer.flush()

    def abandon(self) -> None:
        """Forget the messages not acknowledged (their poll is read again, and sends them
        again)."""
        if self._writer is not None:
            self._writer.abandon()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
