"""confluent-kafka (librdkafka) behind cq's client interface (`ConsumerClient`,
`ProducerClient`): the default client of Kafka sources and sinks. librdkafka fetches and
batches on its own threads; Python sees a batch of messages per `poll`.

Settings (`consumer:` / `producer:`) are librdkafka's configuration properties
(``linger.ms``); kafka-python's spelling (``linger_ms``) is read as the same name, since no
librdkafka property has an underscore. A property librdkafka does not know is refused when the
client is made.

Positions are kept here rather than asked of librdkafka: set by `seek` (a logical start —
beginning, end — is resolved to an offset with the partition's watermarks), and moved past
each message `poll` returns. A seek re-assigns the partitions at their positions, since
librdkafka seeks only partitions already being fetched; an assigned partition is fetched once
it has a position.
"""

from __future__ import annotations

import gc
import itertools
import logging
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from typing import Any

from cq_service.io.kafka_client import (
    CLIENT_DEFAULTS,
    ConsumerConfig,
    Failed,
    KafkaCallError,
    TopicMissing,
)
from cq_service.io.kafka_messages import Messages

__all__ = [
    "OWN_CONSUMER",
    "OWN_PRODUCER",
    "ConfluentConsumer",
    "ConfluentProducer",
    "librdkafka_names",
    "settings_reason",
]

# Properties the reader and the writers own: `consumer:` / `producer:` may not change them.
OWN_CONSUMER = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "auto.offset.reset",
        "enable.partition.eof",
        "allow.auto.create.topics",
    }
)
OWN_PRODUCER = frozenset(
    {
        "bootstrap.servers",
        "acks",
        "request.required.acks",
        "enable.idempotence",
        "delivery.report.only.error",
    }
)

# Defaults cq chooses (a setting wins): reconnect within a second after a broker comes back;
# give a message up after 120 s (as kafka-python does; librdkafka: 300 s); prefetch at most
# 32 MiB per consumer (librdkafka: 64 MiB), memory the engine's budget does not see.
DEFAULTS: dict[str, dict[str, Any]] = {
    "consumer": {
        "reconnect.backoff.max.ms": CLIENT_DEFAULTS["consumer"]["reconnect_backoff_max_ms"],
        "queued.max.messages.kbytes": 32768,
        # librdkafka waits this long (default 1 s) before fetching more for a partition whose
        # prefetched messages passed `queued.min.messages`: a consumer faster than that
        # threshold refills would sit idle (a pass-through read at half the rate).
        "fetch.queue.backoff.ms": 10,
    },
    "producer": {
        "reconnect.backoff.max.ms": CLIENT_DEFAULTS["producer"]["reconnect_backoff_max_ms"],
        "message.timeout.ms": 120_000,
        "linger.ms": 5,
    },
}
_QUEUE_FULL_S = CLIENT_DEFAULTS["producer"]["max_block_ms"] / 1000  # then: brokers away
_DESCRIBE_S = 30.0  # the longest opening waits for the topic's partitions
_SERVE_EVERY = 16384  # messages handed over per call (one by one: between serving reports)
_ABORT_S = 5.0  # the longest `abort` waits for the reports of the messages it purged

# librdkafka error codes that may go away by themselves (besides those it marks retriable).
_RETRIABLE = frozenset(
    {
        "_TRANSPORT",
        "_ALL_BROKERS_DOWN",
        "_TIMED_OUT",
        "_TIMED_OUT_QUEUE",
        "_MSG_TIMED_OUT",
        "_RESOLVE",
        "_WAIT_COORD",
        "_QUEUE_FULL",
        "_UNKNOWN_BROKER",
        "_NODE_UPDATE",
        "_UNKNOWN_PARTITION",  # metadata not refreshed yet, after a broker restart
        # a call in flight when librdkafka replaced the handle of a broker that went away (a
        # broker restart): asked again, it goes to the new handle (not `_DESTROY`: the client's)
        "_DESTROY_BROKER",
        "NETWORK_EXCEPTION",
        "REQUEST_TIMED_OUT",
        "LEADER_NOT_AVAILABLE",
        "NOT_LEADER_FOR_PARTITION",
        "NOT_COORDINATOR",
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
    }
)


class _Log:
    """librdkafka's log lines into Python logging (else it writes them to stderr): its
    connection failures repeat every second while brokers are away, and the reader and writers
    report outages themselves, so only critical lines are warnings; the rest are debug."""

    _logger = logging.getLogger("cq_service.io.librdkafka")

    def log(self, level: int, message: str, *args: Any, **_: Any) -> None:
        self._logger.log(logging.WARNING if level >= logging.CRITICAL else logging.DEBUG,
                         message, *args)  # fmt: skip


_LOG = _Log()


def librdkafka_names(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` under librdkafka's names: ``linger_ms`` is ``linger.ms``."""
    return {str(k).replace("_", "."): v for k, v in settings.items()}


def _owned_reason(settings: Mapping[str, Any], what: str) -> str | None:
    if not isinstance(settings, Mapping):
        return f"{what} settings must be a mapping"
    own = OWN_CONSUMER if what == "consumer" else OWN_PRODUCER
    taken = sorted(str(k) for k in settings if str(k).replace("_", ".") in own)
    if taken:
        return f"{what} setting(s) {', '.join(taken)} are set by cq and cannot be changed"
    return None


def settings_reason(settings: Mapping[str, Any], what: str) -> str | None:
    """Why `consumer:` / `producer:` settings cannot be used (set by cq, unknown to
    librdkafka, a value it refuses), found without contacting a broker: a client made with
    them and no brokers never connects."""
    from confluent_kafka import Consumer, KafkaException, Producer

    reason = _owned_reason(settings, what)
    if reason:
        return reason
    config: dict[str, Any] = {**librdkafka_names(settings), "logger": _LOG}
    try:
        if what == "consumer":
            Consumer({**config, "group.id": "cq.check"}).close()
        else:
            Producer(config)
    except (KafkaException, ValueError, TypeError) as e:
        text = _describe(e).reason
        unknown = re.search(r'No such configuration property: "([^"]+)"', text)
        if unknown:
            given = [str(k) for k in settings if str(k).replace("_", ".") == unknown[1]]
            return (
                f"unknown {what} setting(s): {', '.join(given or [unknown[1]])} (librdkafka "
                "has no such property; see its CONFIGURATION.md)"
            )
        return f"{what} settings: {text}"
    return None


def _describe(error: Any) -> KafkaCallError:
    """A librdkafka KafkaError (or a KafkaException holding one) as a KafkaCallError."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if not isinstance(error, KafkaError):
        return KafkaCallError(f"{type(error).__name__}: {error}", isinstance(error, OSError))
    text = error.str() or error.name()
    if "Connection refused" in text:
        text = "connection refused"
    elif "No such configuration property" in text:
        text = f"{text} (see librdkafka's CONFIGURATION.md)"
    retriable = bool(error.retriable()) or error.name() in _RETRIABLE
    return KafkaCallError(text, retriable and not error.fatal())


def _seconds(timeout_ms: int | None) -> float:
    return -1.0 if timeout_ms is None else timeout_ms / 1000


class ConfluentConsumer:
    """A librdkafka consumer of one topic, assigned by hand (the group only commits)."""

    def __init__(self, config: ConsumerConfig):
        from confluent_kafka import Consumer, KafkaException

        self.topic = topic = config.topic
        properties = {
            "topic.metadata.refresh.interval.ms": config.refresh_ms,
            **DEFAULTS["consumer"],
            **librdkafka_names(config.settings),
            "bootstrap.servers": ",".join(config.servers),
            # librdkafka wants a group even for a consumer that never commits (no `group`).
            "group.id": config.group or f"cq.unused.{topic}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": config.reset,
            "enable.partition.eof": False,
            "allow.auto.create.topics": False,
            "logger": _LOG,
        }
        try:
            self._consumer = Consumer(properties)
        except (KafkaException, ValueError, TypeError) as e:
            raise KafkaCallError(_describe(e).reason, retriable=False) from None
        self._next: dict[int, int] = {}  # partition -> next offset to read
        self._assigned: list[int] = []
        self._paused: set[int] = set()
        self._error: KafkaCallError | None = None  # met by a poll that returned messages too
        self._timestamps = config.timestamps
        self._committer: ThreadPoolExecutor | None = None  # live commits: `commit`
        self._commit: Future[None] | None = None

    def _tp(self, partition: int, offset: int | None = None) -> Any:
        from confluent_kafka import TopicPartition

        if offset is None:
            return TopicPartition(self.topic, partition)
        return TopicPartition(self.topic, partition, offset)

    def describe(self) -> list[int]:
        return self.partitions(int(_DESCRIBE_S * 1000))

    def partitions(self, timeout_ms: int | None) -> list[int]:
        from confluent_kafka import KafkaException

        seconds = _DESCRIBE_S if timeout_ms is None else timeout_ms / 1000
        try:
            metadata = self._consumer.list_topics(self.topic, timeout=seconds)
        except KafkaException as e:
            raise _describe(e) from None
        found = metadata.topics.get(self.topic)
        if found is None:
            raise TopicMissing(self.topic)
        if found.error is not None:
            if found.error.name() in ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"):
                raise TopicMissing(self.topic)
            raise _describe(found.error)
        if not found.partitions:
            raise TopicMissing(self.topic)
        return sorted(int(p) for p in found.partitions)

    def _reassign(self) -> None:
        """Assign every partition that has a position, at it. One without waits for its
        `seek`: assigned at no offset, librdkafka would fetch the group's committed offset
        itself and report a coordinator still loading (``Not coordinator``) as an error of the
        next poll, although the reader seeks every partition it assigns."""
        placed = [p for p in self._assigned if p in self._next]
        self._consumer.assign([self._tp(p, self._next[p]) for p in placed])
        paused = [self._tp(p) for p in placed if p in self._paused]
        if paused:
            self._consumer.pause(paused)

    def assign(self, partitions: Sequence[int]) -> None:
        self._assigned = sorted(set(partitions))
        self._reassign()

    def seek(self, partition: int, offset: int) -> None:
        self._next[partition] = int(offset)
        self._reassign()

    def _watermarks(self, partition: int, timeout_ms: int | None) -> tuple[int, int]:
        from confluent_kafka import KafkaException

        try:
            marks = self._consumer.get_watermark_offsets(
                self._tp(partition), timeout=_seconds(timeout_ms)
            )
        except KafkaException as e:
            raise _describe(e) from None
        if marks is None:
            raise KafkaCallError(f"no offsets within {timeout_ms} ms", retriable=True)
        return int(marks[0]), int(marks[1])

    def seek_to_beginning(self, partition: int, timeout_ms: int | None) -> None:
        self.seek(partition, self._watermarks(partition, timeout_ms)[0])

    def seek_to_end(self, partition: int, timeout_ms: int | None) -> None:
        self.seek(partition, self._watermarks(partition, timeout_ms)[1])

    def position(self, partition: int, timeout_ms: int | None) -> int | None:
        return self._next.get(partition)

    def committed(self, partition: int, timeout_ms: int | None) -> int | None:
        from confluent_kafka import KafkaException

        try:
            if timeout_ms is None:
                [tp] = self._consumer.committed([self._tp(partition)])
            else:
                [tp] = self._consumer.committed([self._tp(partition)], timeout=timeout_ms / 1000)
        except KafkaException as e:
            raise _describe(e) from None
        if tp.error is not None:
            raise _describe(tp.error)
        return None if tp.offset < 0 else int(tp.offset)

    def end_offsets(self, partitions: Sequence[int], timeout_ms: int | None) -> dict[int, int]:
        return {p: self._watermarks(p, timeout_ms)[1] for p in partitions}

    def highwater(self, partition: int) -> int | None:
        try:
            marks = self._consumer.get_watermark_offsets(self._tp(partition), cached=True)
        except Exception:
            return None
        return None if marks is None or marks[1] < 0 else int(marks[1])

    def poll(self, timeout_ms: int, max_records: int, prompt: bool = False) -> Messages:
        from confluent_kafka import KafkaException

        if self._error is not None:
            error, self._error = self._error, None
            raise error
        with _collection_paused():  # the message objects are gone before it resumes
            most = max(1, min(max_records, 1_000_000))
            try:
                if prompt:
                    polled = self._prompt(most, timeout_ms / 1000)
                else:
                    polled = self._consumer.consume(most, timeout_ms / 1000)
            except KafkaException as e:
                raise _describe(e) from None
            good = [m for m in polled if m.error() is None]
            if len(good) < len(polled):
                for m in polled:
                    error = m.error()
                    if error is not None and error.name() != "_PARTITION_EOF":
                        self._error = self._error or _describe(error)
            if not good and self._error is not None:
                error, self._error = self._error, None
                raise error
            messages = _Polled(good, self._timestamps)
            del polled, good
        last = dict(zip(messages.partition, messages.offset, strict=True))  # each one's last
        self._next.update((p, o + 1) for p, o in last.items())
        return messages

    def _prompt(self, most: int, timeout_s: float) -> list:
        """What is fetched already (up to `most`); with nothing, the first message to come
        within `timeout_s` and what came with it. `consume(n, t)` alone waits out `t` unless
        `n` messages arrive: a live reader would add that wait to every result's latency."""
        polled = self._consumer.consume(most, 0)
        if polled or most == 1:
            return polled
        polled = self._consumer.consume(1, timeout_s)
        return polled + self._consumer.consume(most - 1, 0) if polled else polled

    def commit(self, offsets: Mapping[int, int], metadata: str, timeout_ms: int | None) -> None:
        """Commit synchronously. librdkafka's synchronous commit waits for the group's
        coordinator without a bound (while the brokers are away the calling thread would stop
        there: a worker's engine did), so with `timeout_ms` it runs on a thread of its own and
        is waited for that long, one commit at a time; not confirmed by then is retriable."""
        from confluent_kafka import KafkaException, TopicPartition

        wanted = [TopicPartition(self.topic, p, int(o), metadata) for p, o in offsets.items()]
        if not wanted:  # librdkafka would commit its stored offsets instead (there are none)
            return

        def commit() -> None:
            try:
                done = self._consumer.commit(offsets=wanted, asynchronous=False)
            except KafkaException as e:
                raise _describe(e) from None
            for tp in done or ():
                if tp.error is not None:
                    raise _describe(tp.error)

        if timeout_ms is None:
            commit()
            return
        if self._commit is not None and not self._commit.done():
            raise KafkaCallError("the previous offset commit is not confirmed yet", retriable=True)
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix=f"commit-{self.topic}")
        self._commit = self._committer.submit(commit)
        try:
            self._commit.result(timeout_ms / 1000)
        except FutureTimeout:
            raise KafkaCallError(f"offset commit not confirmed within {timeout_ms} ms",
                                 retriable=True) from None

    def pause(self, partitions: Sequence[int]) -> None:
        self._paused.update(partitions)
        placed = [self._tp(p) for p in partitions if p in self._next]  # the rest: at assignment
        if placed:
            self._consumer.pause(placed)

    def resume(self, partitions: Sequence[int]) -> None:
        self._paused.difference_update(partitions)
        placed = [self._tp(p) for p in partitions if p in self._next]
        if placed:
            self._consumer.resume(placed)

    def close(self) -> None:
        if self._committer is not None:
            self._committer.shutdown(wait=False)
        self._consumer.close()


class _Polled(Messages):
    """A poll's messages as columns, grouped by partition (each partition's in offset order),
    as kafka-python's poll gives them (librdkafka interleaves partitions). Nothing refers to
    the message objects afterwards; timestamps are taken only if `timestamps` (else -1)."""

    def __init__(self, polled: list[Any], timestamps: bool):
        from confluent_kafka import Message

        super().__init__({})
        partition = list(map(Message.partition, polled))
        if len(partition) > 1 and any(a > b for a, b in itertools.pairwise(partition)):
            polled = sorted(polled, key=Message.partition)  # stable: offsets stay in order
            partition = list(map(Message.partition, polled))
        self.partition = partition
        self.offset = list(map(Message.offset, polled))
        self.value = list(map(Message.value, polled))
        self.key = list(map(Message.key, polled))
        if timestamps:
            self.timestamp = [ms for _, ms in map(Message.timestamp, polled)]
        else:
            self.timestamp = [-1] * len(polled)


@contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused (if it runs). A poll makes tens of thousands
    of message objects, none in a cycle: traced while they live, they reach the collector's
    oldest generation and make its full collections (which trace every object) frequent —
    a quarter of a pass-through's time. Made and dropped while it is paused, they are freed by
    reference counting alone."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Refused(Exception):
    """librdkafka refused a message when handed it: `error`, after `taken` were taken."""

    def __init__(self, error: KafkaCallError, taken: int):
        super().__init__(error.reason)
        self.error, self.taken = error, taken


class ConfluentProducer:
    """A librdkafka producer (acks=all, idempotent). Only failed deliveries are reported
    (``delivery.report.only.error``): an acknowledgement costs Python nothing, and
    `unsettled` is librdkafka's count of messages not acknowledged yet. A failed one is kept,
    with its bytes, for `failures`; reports are served inside `send_many`, `unsettled`,
    `flush` and `abort`."""

    def __init__(self, servers: Sequence[str], settings: Mapping[str, Any]):
        from confluent_kafka import KafkaException, Producer

        config = {
            **DEFAULTS["producer"],
            **librdkafka_names(settings),
            "bootstrap.servers": ",".join(servers),
            "acks": "all",
            "enable.idempotence": True,
            "delivery.report.only.error": True,
            "on_delivery": self._report,
            "logger": _LOG,
        }
        self._failed: list[Failed] = []
        try:
            self._producer = Producer(config)
        except (KafkaException, ValueError, TypeError) as e:
            raise KafkaCallError(_describe(e).reason, retriable=False) from None

    def _report(self, error: Any, message: Any) -> None:
        if error is not None:
            self._failed.append(
                Failed(_describe(error), message.topic(), message.value(), message.key(),
                       message.headers())
            )  # fmt: skip

    def send_many(
        self,
        topic: str,
        values: Sequence[bytes | None],
        keys: Sequence[bytes | None] | None,
        headers: Sequence[list[tuple[str, bytes]] | None] | None,
    ) -> None:
        i, full_since = 0, 0.0
        batch = getattr(self._producer, "produce_batch", None)  # confluent-kafka >= 2.12
        try:
            while i < len(values):
                if headers is None and batch is not None:
                    i += self._produce_batch(topic, values, keys, i)
                else:
                    i += self._produce(topic, values, keys, headers, i)
                if i < len(values):  # librdkafka's queue is full: let it drain
                    now = time.monotonic()
                    full_since = full_since or now
                    if now - full_since > _QUEUE_FULL_S:
                        raise KafkaCallError(
                            f"producer queue full for {_QUEUE_FULL_S:g} s", retriable=True
                        )
                    self._producer.poll(0.05)
        except _Refused as e:
            e.error.handed = i + e.taken  # type: ignore[attr-defined]
            raise e.error from None
        except KafkaCallError as e:
            e.handed = i  # type: ignore[attr-defined]
            raise
        self._producer.poll(0)

    def _produce_batch(
        self, topic: str, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None,
        start: int,
    ) -> int:
        """Hand values[start:] over, `_SERVE_EVERY` at a time (only failures are reported, so
        `send_many` serves them once at its end); how many were taken before the queue was full. A message refused on its own (the queue
        had room) counts as taken and failed; one refused with all after it: `_Refused`."""
        taken = 0
        for at in range(start, len(values), _SERVE_EVERY):
            stop = min(at + _SERVE_EVERY, len(values))
            if keys is None:
                messages = [{"value": v} for v in values[at:stop]]
            else:
                messages = [{"value": v, "key": k} for v, k in zip(values[at:stop], keys[at:stop])]
            queued = self._producer.produce_batch(topic, messages)
            if queued < len(messages):
                errors = [m.get("_error") for m in messages]
                first = next(j for j, e in enumerate(errors) if e is not None)
                if all(e is not None for e in errors[first:]):  # librdkafka stops at queue full
                    if errors[first].name() != "_QUEUE_FULL":
                        raise _Refused(_describe(errors[first]), taken + first)
                    return taken + first
                for j, e in enumerate(errors):  # refused one by one, others taken after them
                    if e is not None:
                        self._failed.append(
                            Failed(_describe(e), topic, messages[j]["value"],
                                   messages[j].get("key"), None)
                        )  # fmt: skip
            taken += len(messages)
        return taken

    def _produce(
        self, topic: str, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None,
        headers: Sequence[list[tuple[str, bytes]] | None] | None, start: int,
    ) -> int:
        """Hand values[start:] over one by one; how many were taken before the queue was
        full (`_Refused` if librdkafka refuses one)."""
        from confluent_kafka import KafkaException

        produce = self._producer.produce
        for i in range(start, len(values)):
            header = headers[i] if headers is not None else None
            key = keys[i] if keys is not None else None
            try:
                if header:
                    produce(topic, values[i], key, headers=header)
                else:
                    produce(topic, values[i], key)
            except BufferError:
                return i - start
            except KafkaException as e:
                raise _Refused(_describe(e), i - start) from None
            if (i + 1) % _SERVE_EVERY == 0:
                self._producer.poll(0)
        return len(values) - start

    def unsettled(self) -> int:
        self._producer.poll(0)
        return len(self._producer)

    def failures(self) -> list[Failed]:
        failed, self._failed = self._failed, []
        return failed

    def flush(self, timeout: float) -> None:
        self._producer.flush(timeout)

    def abort(self) -> list[Failed]:
        """Purge every message not acknowledged (librdkafka reports each as failed) and
        close; the failures not taken yet, in the order reported."""
        self._producer.purge(in_queue=True, in_flight=True, blocking=True)
        deadline = time.monotonic() + _ABORT_S
        while len(self._producer) and time.monotonic() < deadline:
            self._producer.poll(0.01)
        self._producer.poll(0)
        return self.failures()

    def close(self, timeout: float) -> None:
        if timeout <= 0:
            self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        self._producer.flush(max(timeout, 0.0))
