"""Writing to Kafka: a producer that keeps every message until the broker acknowledged it
(`KafkaWriter`), and query results as messages (`KafkaSink`, ``type: kafka``).

`KafkaWriter.send` hands a message to the client's producer (acks=all; confluent-kafka's is
idempotent) and keeps it; `flush` waits until every message kept is acknowledged and forgets them. While the brokers
cannot be reached, nothing is lost and the engine is not held up:

- a flush waits at most `flush_timeout` seconds *without any acknowledgement* (a healthy broker
  working through a backlog keeps acknowledging, so it is waited for), then raises
  `Unreachable` naming the brokers and why (``connection refused`` when they do not accept
  connections) and the writer counts as away (`outage`);
- while away, `send` only keeps messages (in order), and each later flush first probes the
  brokers (a TCP connect, answered at once when refused) and raises `Unreachable` again until
  they answer; then it hands the kept messages to the producer and waits for them;
- a message the producer gave up on (a delivery timeout while the broker was away) is sent
  again, with every later message not acknowledged yet, by a new producer and in the original
  order; a message the broker refuses for good (too large, not authorised) is an `error` and
  every later flush raises it too.

`pending` is what is kept (messages and bytes): the caller bounds it (the worker pauses its
sources when its sinks hold too much).
"""

from __future__ import annotations

import itertools
import json
import time
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.errors import CQError, Outage, Span, Unreachable
from cq_service.io.base import Sink, SinkError, json_safe, register_sink
from cq_service.io.kafka_client import (
    Failed,
    KafkaCallError,
    ProducerClient,
    bootstrap_servers,
    client_choice,
    dependency_name,
    outage_of,
)
from cq_service.io.kafka_connect import open_producer, settings_reason
from cq_service.io.reachability import Probe
from cq_service.io.sinks import json_lines
from cq_service.spec.loader import KAFKA_SINK_OPTIONS
from cq_service.spec.model import SinkSpec
from cq_service.types import DataType

__all__ = ["FLUSH_TIMEOUT_S", "KafkaSink", "KafkaWriter"]

FLUSH_TIMEOUT_S = 120.0  # default: how long a flush waits without any acknowledgement
_SLICE_S = 0.05  # a flush looks at the acknowledgements this often
_SLICE = 1 << 16  # results encoded at a time


Headers = list[tuple[str, bytes]]


def _size(values: Sequence[bytes | None], keys: Sequence[bytes | None] | None) -> int:
    """Bytes of values and keys."""
    return sum(map(len, filter(None, values))) + (sum(map(len, filter(None, keys))) if keys else 0)


class _Batch:
    """Messages to one topic, handed to the producer together."""

    __slots__ = ("headers", "keys", "size", "topic", "values")

    def __init__(
        self,
        topic: str,
        values: list[bytes | None],
        keys: list[bytes | None] | None,
        headers: list[Headers | None] | None,
    ):
        self.topic, self.values, self.keys, self.headers = topic, values, keys, headers
        self.size = _size(values, keys)

    def __len__(self) -> int:
        return len(self.values)

    def part(self, rows: Sequence[int]) -> _Batch:
        """A new batch of these messages (in this order)."""
        return _Batch(
            self.topic,
            [self.values[i] for i in rows],
            None if self.keys is None else [self.keys[i] for i in rows],
            None if self.headers is None else [self.headers[i] for i in rows],
        )

    @staticmethod
    def of(failed: Sequence[Failed]) -> list[_Batch]:
        """Messages a producer gave up on, as batches (one per run of the same topic)."""
        batches = []
        for topic, run in itertools.groupby(failed, key=lambda f: f.topic):
            messages = list(run)
            headers = [f.headers for f in messages]
            batches.append(_Batch(
                topic, [f.value for f in messages], [f.key for f in messages],
                headers if any(headers) else None,
            ))  # fmt: skip
        return batches


class KafkaWriter:
    """A producer (acks=all) that keeps what it sent until acknowledged (see the module doc).

    `role` says what it writes (``sink topic out``) in outage reports; `error` is the class of
    the errors it raises for messages refused for good; `client` the library (default: as
    `client_choice` says).

    The producer counts the messages not acknowledged yet and hands back, bytes and all, those
    it gave up on: the writer keeps no copy of a message once handed over, only the size of
    each batch, to count the bytes `pending` (the oldest batches are taken as the ones
    acknowledged first, as they are within a partition)."""

    def __init__(
        self,
        servers: Sequence[str],
        settings: Mapping[str, Any] | None = None,
        *,
        error: type[CQError] = SinkError,
        span: Span | None = None,
        role: str = "producer",
        client: str | None = None,
    ):
        self._error, self._span = error, span
        self.servers = list(servers)
        self.role = role
        self.dependency = dependency_name(self.servers)
        self.flush_timeout = FLUSH_TIMEOUT_S
        try:
            self.client = client_choice(client)
        except ValueError as e:
            raise error(str(e), span) from None
        reason = settings_reason(self.client, settings or {}, "producer")
        if reason:
            raise error(reason, span)
        self._settings = dict(settings or {})
        self._probe = Probe(self.servers)
        self._handed: deque[tuple[int, int]] = deque()  # (messages, bytes) handed, oldest first
        self._sent = 0  # messages handed to this producer
        self._forgotten = 0  # of them, in batches counted as acknowledged (`_trim`)
        self._kept: deque[_Batch] = deque()  # not given yet (the brokers were away)
        self._failed: list[Failed] = []  # what the producer gave up on: sent again
        self._bytes = 0
        self._refused: KafkaCallError | None = None  # a message refused for good
        self.outage: Outage | None = None
        self._closed = False
        self._producer: ProducerClient | None = None
        self._producer = self._new_producer()

    def _new_producer(self) -> ProducerClient:
        self._handed.clear()
        self._sent = self._forgotten = 0
        try:
            return open_producer(self.client, self.servers, self._settings)
        except KafkaCallError as e:
            if e.retriable:
                raise Unreachable(self._away(e.reason), self._span) from None
            raise self._error(
                f"cannot connect to Kafka at {','.join(self.servers)}: {e.reason}", self._span
            ) from None

    # -- sending --------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Keep one message and hand it to the producer (see `send_many`)."""
        self.send_many(topic, [value], [key], None if headers is None else [headers])

    def send_many(
        self,
        topic: str,
        values: list[bytes | None],
        keys: list[bytes | None] | None = None,
        headers: list[Headers | None] | None = None,
    ) -> None:
        """Keep messages (`keys` and `headers`, if given, one per value) and hand them to the
        producer, in order (only keep them while the brokers are away: a later `flush` hands
        them over)."""
        if not values:
            return
        batch = _Batch(topic, values, keys, headers)
        self._bytes += batch.size
        if self.outage is not None or self._kept:
            self._kept.append(batch)
            return
        rest = self._hand(batch)
        if rest is not None:
            self._kept.append(rest)

    def _hand(self, batch: _Batch) -> _Batch | None:
        """Give `batch` to the producer; what it could not take if the brokers cannot take
        messages now (the writer is away then), else None."""
        try:
            if self._producer is None:  # a replacement that could not be made yet
                self._producer = self._new_producer()
        except Unreachable:
            return batch
        try:
            self._producer.send_many(batch.topic, batch.values, batch.keys, batch.headers)
        except KafkaCallError as e:
            handed = getattr(e, "handed", 0)
            rest = batch.part(range(handed, len(batch)))
            if handed:
                self._handed.append((handed, batch.size - rest.size))
                self._sent += handed
            if e.retriable:
                self._away(e.reason)
                return rest
            self._bytes -= rest.size
            raise self._error(
                f"cannot send to Kafka topic {batch.topic!r}: {e.reason}", self._span
            ) from None
        self._handed.append((len(batch), batch.size))
        self._sent += len(batch)
        return None

    # -- flushing -------------------------------------------------------------------------------

    @property
    def pending(self) -> tuple[int, int]:
        """Messages not acknowledged yet, and their bytes (keys and values; of those handed
        over, counted by batch)."""
        unsettled = self._trim()
        return unsettled + len(self._failed) + sum(len(b) for b in self._kept), self._bytes

    def flush(self, timeout: float | None = None) -> None:
        """Return once every message sent so far is acknowledged. Raises `Unreachable` when
        the brokers are away or acknowledge nothing for `timeout` seconds (default
        `flush_timeout`), the writer's `error` for a message refused for good."""
        timeout = self.flush_timeout if timeout is None else timeout
        self._trim()
        self._check_refused()
        if self.outage is not None or self._kept or self._failed:
            self._resume()
        progress, left = time.monotonic(), None
        while True:
            unsettled = self._trim()
            self._check_failures()
            if not unsettled:
                break
            assert self._producer is not None
            if left is None or unsettled < left:
                progress, left = time.monotonic(), unsettled
            elif time.monotonic() - progress >= timeout:
                reason = f"{unsettled} messages not acknowledged for {timeout:g} s"
                raise Unreachable(self._away(reason), self._span)
            self._producer.flush(_SLICE_S)
        self.outage = None

    def _resume(self) -> None:
        """After an outage: once the brokers accept connections, send again what the producer
        gave up on and hand over what was kept, in order. Unreachable while they do not."""
        if not self._probe.check_now():
            raise Unreachable(self._away(self._probe.reason, probe=False), self._span)
        if self._failed:
            self._replace_producer()
        while self._kept:
            rest = self._hand(self._kept.popleft())
            if rest is not None:
                self._kept.appendleft(rest)
                assert self.outage is not None
                raise Unreachable(self.outage, self._span)

    def _replace_producer(self) -> None:
        """A new producer; what the old one gave up on, and every message it had not settled,
        back in front of the kept ones (the old producer's acknowledgements no longer
        count)."""
        old, self._producer = self._producer, None
        failed = self._failed + (old.abort() if old is not None else [])
        self._failed = []
        self._kept.extendleft(reversed(_Batch.of(failed)))
        self._bytes = sum(b.size for b in self._kept)
        self._producer = self._new_producer()  # Unreachable: made later, when handing over

    def _trim(self) -> int:
        """Take what the producer gave up on; forget the batches at the front that the
        messages it settled account for. The messages it has not settled."""
        if self._producer is None:
            return 0
        failed = self._producer.failures()
        if failed:
            self._failed.extend(failed)
            self._bytes += sum(_size([f.value], [f.key]) for f in failed)
        unsettled = self._producer.unsettled()
        settled = self._sent - unsettled
        handed = self._handed
        while handed and self._forgotten + handed[0][0] <= settled:
            n, size = handed.popleft()
            self._forgotten += n
            self._bytes -= size
        return unsettled

    def _check_refused(self) -> None:
        """Raise the writer's `error` for a message refused for good (now and for ever after)."""
        if self._refused is None:
            self._refused = next((f.error for f in self._failed if not f.error.retriable), None)
        if self._refused is not None:
            raise self._error(f"Kafka rejected a message: {self._refused.reason}", self._span)

    def _check_failures(self) -> None:
        """`_check_refused`, and `Unreachable` for a message the producer gave up on (it is
        sent again once the brokers answer)."""
        self._check_refused()
        if self._failed:
            raise Unreachable(self._away(self._failed[0].error.reason), self._span)

    def _away(self, reason: str, probe: bool = True) -> Outage:
        """Count the brokers as away, for `reason`; the outage."""
        self.outage = outage_of(
            reason, self.servers, self.role, self._probe if probe else None, self.outage
        )
        return self.outage

    # -- closing --------------------------------------------------------------------------------

    def abandon(self) -> None:
        """Forget every message not acknowledged yet (whoever sent them sends them again):
        the producer is replaced; the writer stays away until a flush succeeds."""
        old, self._producer = self._producer, None
        self._failed = []
        self._kept.clear()
        self._bytes = 0
        if old is not None:
            with suppress(KafkaCallError, OSError):
                old.abort()
        with suppress(Unreachable):  # else made when the next message is handed over
            self._producer = self._new_producer()
        self._handed.clear()
        self._sent = self._forgotten = 0

    def close(self) -> None:
        """Close the producer (without flushing: call `flush` first to know the outcome;
        what is not acknowledged by then is dropped)."""
        if self._closed:
            return
        self._closed = True
        self._probe.close()
        if self._producer is not None:
            waiting = self._producer.unsettled() > 0 and self.outage is None
            self._producer.close(self.flush_timeout if waiting else 0)


# -- results as messages -----------------------------------------------------------------------


def _without_newline(lines: pa.Array) -> list[bytes]:
    """The bytes of each line of a string array of newline-terminated lines, without it."""
    return pc.utf8_slice_codeunits(lines, 0, -1).cast(pa.binary()).to_pylist()


def _key_text(value: Any) -> bytes | None:
    value = json_safe(value)
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value).encode("utf-8")


@register_sink("kafka")
class KafkaSink(Sink):
    """Each element as one message: the value its DESIGN §5 JSON object (``_ts``, ``_op``,
    the columns), the key the `key` columns' values (one column: its value as text, a string
    as it is; several: a JSON array; no `key`: no key). Options: ``topic``,
    ``bootstrap_servers``, ``key``, ``client``, ``producer`` (the client's producer settings)."""

    def __init__(self, spec: SinkSpec, names: Sequence[str], types: Sequence[DataType]):
        super().__init__(spec, names, types)
        opts = spec.options
        unknown = sorted(set(opts) - set(KAFKA_SINK_OPTIONS))
        if unknown:
            raise SinkError(f"unknown kafka sink option(s): {', '.join(unknown)}", spec.span)
        topic = opts.get("topic")
        if not isinstance(topic, str) or not topic:
            raise SinkError("a kafka sink needs a topic", spec.span)
        self.topic = topic
        key = opts.get("key") or []
        key = [key] if isinstance(key, str) else list(key)
        missing = [k for k in key if k not in self.names]
        if missing:
            raise SinkError(
                f"kafka sink key column(s) {', '.join(map(repr, missing))} are not in the "
                f"query's result (its columns: {', '.join(self.names)})",
                spec.span,
            )
        self._key_index = [self.names.index(k) for k in key]
        self._writer = KafkaWriter(
            bootstrap_servers(opts.get("bootstrap_servers")),
            opts.get("producer"),
            error=SinkError,
            span=spec.span,
            role=f"sink topic {topic}",
            client=opts.get("client"),
        )

    def _write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        for start in range(0, len(ts), _SLICE):
            stop = start + _SLICE
            cols = [c.slice(start, _SLICE) for c in columns]
            values = _without_newline(json_lines(ts[start:stop], ops[start:stop], cols, self.names))
            self._writer.send_many(self.topic, values, self._keys(cols, len(values)))

    def _keys(self, columns: Sequence[pa.Array], n: int) -> list[bytes | None] | None:
        if not self._key_index:
            return None
        picked = [columns[i].to_pylist() for i in self._key_index]
        if len(picked) == 1:
            return [_key_text(v) for v in picked[0]]
        return [
            json.dumps(json_safe(list(row)), ensure_ascii=False, separators=(",", ":")).encode()
            for row in zip(*picked)
        ]

    def flush(self) -> None:
        """Block until the broker has acknowledged every element written: `Unreachable` when
        it cannot be reached or acknowledges nothing for `flush_timeout` seconds (the elements
        are kept and a later flush sends them), SinkError if it refused one for good."""
        self._writer.flush()

    # What the worker watches (docs/service.md, "When Kafka or the catalog is away").

    @property
    def flush_timeout(self) -> float:
        """How long a flush waits without any acknowledgement (120 s unless set)."""
        return self._writer.flush_timeout

    @flush_timeout.setter
    def flush_timeout(self, seconds: float) -> None:
        self._writer.flush_timeout = seconds

    @property
    def dependency(self) -> str:
        return self._writer.dependency

    @property
    def outage(self) -> Outage | None:
        """Why the brokers cannot take this sink's elements now (None: they can)."""
        return self._writer.outage

    @property
    def pending(self) -> tuple[int, int]:
        """Elements (and bytes) written but not acknowledged by the broker yet."""
        return self._writer.pending

    def _close(self) -> None:
        try:
            self._writer.flush()
        finally:
            self._writer.close()
