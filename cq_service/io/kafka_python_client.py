"""kafka-python behind cq's client interface (`ConsumerClient`, `ProducerClient`): the client a
source or sink chooses with ``client: kafka-python``. Pure Python: slower than confluent-kafka,
but with no native library. Its settings (`consumer:` / `producer:`) are KafkaConsumer's and
KafkaProducer's own names (``linger_ms``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from typing import Any

from cq_service.io.kafka_client import (
    API_VERSION,
    CLIENT_DEFAULTS,
    OWN_CONSUMER,
    OWN_PRODUCER,
    ConsumerConfig,
    Failed,
    KafkaCallError,
    TopicMissing,
    check_settings,
    describe_kafka_error,
    is_retriable,
)
from cq_service.io.kafka_messages import Messages

__all__ = ["PythonConsumer", "PythonProducer", "consumer_settings_reason", "producer_settings_reason"]


def _call_error(error: BaseException) -> KafkaCallError:
    return KafkaCallError(describe_kafka_error(error), is_retriable(error))


def consumer_settings_reason(settings: Mapping[str, Any]) -> str | None:
    """Why `consumer:` settings cannot be used (unknown to KafkaConsumer or set by cq)."""
    from kafka import KafkaConsumer

    return check_settings(settings, KafkaConsumer.DEFAULT_CONFIG, OWN_CONSUMER, "consumer")


def producer_settings_reason(settings: Mapping[str, Any]) -> str | None:
    """Why `producer:` settings cannot be used (unknown to KafkaProducer or set by cq)."""
    from kafka import KafkaProducer

    return check_settings(settings, KafkaProducer.DEFAULT_CONFIG, OWN_PRODUCER, "producer")


def producer_part(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The `consumer:` settings that apply to a producer too (for the dead-letter topic)."""
    from kafka import KafkaProducer

    return {k: v for k, v in settings.items() if k in KafkaProducer.DEFAULT_CONFIG}


class PythonConsumer:
    """A KafkaConsumer of one topic, assigned by hand (the group only commits offsets)."""

    def __init__(self, config: ConsumerConfig):
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        self.servers, self.topic = list(config.servers), config.topic
        self._settings = dict(config.settings)
        chosen = {
            "metadata_max_age_ms": config.refresh_ms,
            **CLIENT_DEFAULTS["consumer"],
            **config.settings,
        }
        try:
            self._consumer = KafkaConsumer(
                bootstrap_servers=self.servers,
                api_version=API_VERSION,
                group_id=config.group,
                enable_auto_commit=False,
                auto_offset_reset=config.reset,
                max_poll_records=config.max_records,
                allow_auto_create_topics=False,
                **chosen,
            )
        except KafkaError as e:
            raise _call_error(e) from None

    def _tp(self, partition: int) -> Any:
        from kafka import TopicPartition

        return TopicPartition(self.topic, partition)

    def describe(self) -> list[int]:
        """The topic's partitions, asked with an admin client: it gives up on an unreachable
        broker after `bootstrap_timeout_ms` (30 s unless set under `consumer:`), where the
        consumer would wait for ever, and never creates the topic."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError, for_code

        shared = {k: v for k, v in self._settings.items() if k in KafkaAdminClient.DEFAULT_CONFIG}
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.servers, api_version=API_VERSION,
                **{**CLIENT_DEFAULTS["admin"], **shared},
            )  # fmt: skip
        except KafkaError as e:
            raise _call_error(e) from None
        try:
            [info] = admin.describe_topics([self.topic])
        except KafkaError as e:
            raise _call_error(e) from None
        finally:
            admin.close()
        code = info.get("error_code", 0)
        if code == 3 or (not code and not info.get("partitions")):
            raise TopicMissing(self.topic)
        if code:
            raise KafkaCallError(for_code(code).__name__, retriable=False)
        return sorted(int(p["partition_index"]) for p in info["partitions"])

    def partitions(self, timeout_ms: int | None) -> list[int]:
        from kafka.errors import KafkaError

        try:
            return sorted(self._consumer.partitions_for_topic(self.topic) or ())
        except KafkaError as e:
            raise _call_error(e) from None

    def assign(self, partitions: Sequence[int]) -> None:
        self._consumer.assign([self._tp(p) for p in partitions])

    def seek(self, partition: int, offset: int) -> None:
        self._consumer.seek(self._tp(partition), offset)

    def seek_to_beginning(self, partition: int, timeout_ms: int | None) -> None:
        self._consumer.seek_to_beginning(self._tp(partition))

    def seek_to_end(self, partition: int, timeout_ms: int | None) -> None:
        self._consumer.seek_to_end(self._tp(partition))

    def position(self, partition: int, timeout_ms: int | None) -> int | None:
        from kafka.errors import KafkaError

        try:
            position = self._consumer.position(self._tp(partition), timeout_ms=timeout_ms)
        except KafkaError as e:
            raise _call_error(e) from None
        return None if position is None else int(position)

    def committed(self, partition: int, timeout_ms: int | None) -> int | None:
        from kafka.errors import KafkaError

        try:
            offset = self._consumer.committed(self._tp(partition), timeout_ms=timeout_ms)
        except KafkaError as e:
            raise _call_error(e) from None
        return None if offset is None else int(offset)

    def end_offsets(self, partitions: Sequence[int], timeout_ms: int | None) -> dict[int, int]:
        from kafka.errors import KafkaError

        try:
            ends = self._consumer.end_offsets(
                [self._tp(p) for p in partitions], timeout_ms=timeout_ms
            )
        except KafkaError as e:
            raise _call_error(e) from None
        return {tp.partition: int(off) for tp, off in ends.items()}

    def highwater(self, partition: int) -> int | None:
        high = self._consumer.highwater(self._tp(partition))
        return None if high is None else int(high)

    def poll(self, timeout_ms: int, max_records: int, prompt: bool = False) -> Messages:
        # kafka-python's poll returns as soon as records are there: prompt either way
        from kafka.errors import KafkaError

        try:
            records = self._consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        except KafkaError as e:
            raise _call_error(e) from None
        return Messages(records)

    def commit(self, offsets: Mapping[int, int], metadata: str, timeout_ms: int | None) -> None:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        try:
            self._consumer.commit(
                {self._tp(p): OffsetAndMetadata(int(o), metadata, -1) for p, o in offsets.items()},
                timeout_ms=timeout_ms,
            )
        except KafkaError as e:
            raise _call_error(e) from None

    def pause(self, partitions: Sequence[int]) -> None:
        if partitions:
            self._consumer.pause(*[self._tp(p) for p in partitions])

    def resume(self, partitions: Sequence[int]) -> None:
        if partitions:
            self._consumer.resume(*[self._tp(p) for p in partitions])

    def close(self) -> None:
        self._consumer.close(autocommit=False, timeout_ms=2000)


class PythonProducer:
    """A KafkaProducer (acks=all). Each message's future settles on its I/O thread: the
    messages not settled yet are kept (in the order sent), so those given up on and those
    dropped by `abort` can be handed back with their bytes."""

    def __init__(self, servers: Sequence[str], settings: Mapping[str, Any]):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self._lock = threading.Lock()
        self._open: dict[int, Failed] = {}  # sent, not settled: by number, in the order sent
        self._failed: list[Failed] = []
        self._sent = 0
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=list(servers), api_version=API_VERSION, acks="all",
                **{**CLIENT_DEFAULTS["producer"], **settings},
            )  # fmt: skip
        except KafkaError as e:
            raise _call_error(e) from None

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None,
        headers: Sequence[list[tuple[str, bytes]] | None] | None,
    ) -> None:
        from kafka.errors import KafkaError

        send = self._producer.send
        for i, value in enumerate(values):
            key = keys[i] if keys is not None else None
            header = headers[i] if headers is not None else None
            with self._lock:
                number = self._sent
                self._sent += 1
                self._open[number] = Failed(_UNSETTLED, topic, value, key, header)
            try:
                future = send(topic, value=value, key=key, headers=header)
            except KafkaError as e:
                with self._lock:
                    del self._open[number]
                error = _call_error(e)
                error.handed = i  # type: ignore[attr-defined]
                raise error from None
            future.add_both(self._settle, number)

    def _settle(self, number: int, result: Any) -> None:
        with self._lock:
            message = self._open.pop(number, None)
            if message is not None and isinstance(result, BaseException):
                self._failed.append(replace(message, error=_call_error(result)))

    def unsettled(self) -> int:
        with self._lock:
            return len(self._open)

    def failures(self) -> list[Failed]:
        with self._lock:
            failed, self._failed = self._failed, []
        return failed

    def flush(self, timeout: float) -> None:
        from kafka.errors import KafkaError

        with suppress(KafkaError):  # KafkaTimeoutError: not all acknowledged yet
            self._producer.flush(timeout=timeout)

    def abort(self) -> list[Failed]:
        """Close at once; the failures not taken yet, then every message not settled (in the
        order sent): their acknowledgements no longer count."""
        with self._lock:
            failed = self._failed + list(self._open.values())
            self._failed, self._open = [], {}
        self.close(0)
        return failed

    def close(self, timeout: float) -> None:
        from kafka.errors import KafkaError

        with suppress(KafkaError, OSError):
            self._producer.close(timeout=timeout)


_UNSETTLED = KafkaCallError("dropped before the broker acknowledged it", retriable=True)
