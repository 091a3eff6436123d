"""Kafka sources and sinks: one JSON object per message, read and written with confluent-kafka
(librdkafka) or, on request (``client: kafka-python``), kafka-python.

This module is the reader and the package's Kafka face (the names below are re-exported): the
sink and its producer are in kafka_sink.py, decoding and time per partition in
kafka_messages.py, the source's dead-letter topic in kafka_dead_letter.py, the reader's broker
outages in kafka_outage.py, what every client shares in kafka_client.py, the two libraries
behind one interface in confluent_client.py and kafka_python_client.py (opened by
kafka_connect.py).

Source (``type: kafka``): every partition of `topic` is assigned to this one reader (manual
assignment; the consumer group is used only to commit offsets). Values are decoded and checked
against the stream's schema exactly as jsonl file lines are (`MessageDecoder`); `key: field`
fills that schema field from the message key, `time: record` fills the stream's `timestamp`
field from the message timestamp. A message that does not fit is sent, with its original key
and bytes and headers giving the reason and where it came from, to the dead-letter topic
(acknowledged before the reader moves on), and reported in the chunk's `dead` list.

Time is kept per partition (`PartitionClock`): each chunk says which partition each element
came from, and gives the stream's heartbeat, the minimum over the partitions still holding time
back. `live=False` reads up to the end offsets as of opening, then ends; `live=True` follows
the topic, returning empty chunks while nothing is new, and picks up partitions added later.

Under ``cq serve`` a broker outage is expected, not fatal: the reader and the writers tell
retriable errors (brokers that cannot be reached now) from permanent ones, raise `Unreachable`
for the first and report an `outage` until the brokers answer again.

Neither client library is imported with this module, so ``cq`` commands that do not touch
Kafka do not pay for it. docs/kafka.md is the user's guide.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from cq_service.errors import CQError, Outage, Unreachable
from cq_service.io.base import (
    RawChunk,
    SourceError,
    SourceReader,
    register_source,
)
from cq_service.io.kafka_client import (
    API_VERSION,
    BOOTSTRAP_ENV,
    DEFAULT_BOOTSTRAP,
    ConsumerConfig,
    KafkaCallError,
    TopicMissing,
    bootstrap_servers,
    client_choice,
    dependency_name,
    retrying,
)
from cq_service.io.kafka_connect import open_consumer, settings_reason
from cq_service.io.kafka_dead_letter import DeadLetterTopic
from cq_service.io.kafka_messages import MessageDecoder, Messages, PartitionClock
from cq_service.io.kafka_outage import BrokerWatch
from cq_service.io.kafka_sink import KafkaSink, KafkaWriter
from cq_service.spec.loader import KAFKA_SOURCE_OPTIONS
from cq_service.spec.model import StreamSpec

__all__ = [
    "API_VERSION",
    "BOOTSTRAP_ENV",
    "DEFAULT_BOOTSTRAP",
    "KafkaReader",
    "KafkaSink",
    "KafkaWriter",
    "MessageDecoder",
    "Messages",
    "PartitionClock",
    "bootstrap_servers",
]

STARTS = ("earliest", "latest", "committed")
TIMES = ("value", "record")
DEFAULT_IDLE_TIMEOUT = 5.0  # seconds

_IDLE_POLL_MS = 50  # live: how long one read waits for new records
_END_POLL_MS = 200  # not live: one poll while reading up to the end offsets
_STALL_S = 60.0  # not live: no record for this long although the end is not reached: error
_REFRESH_S = 5.0  # live: how often to look for partitions added to the topic
_CALL_MS = 2000  # live: the longest a call to the broker (positions, end offsets) may block
_RETRY_S = 30.0  # not live: how long a retriable failure (committed offsets, a poll) is retried
_Polled = Messages


# -- reading -----------------------------------------------------------------------------------


@register_source("kafka")
class KafkaReader(SourceReader):
    """A stream or relation read from every partition of a Kafka topic (see the module doc).

    Besides `read`, the worker uses it for at-least-once delivery: `positions`, `seek`,
    `commit`, `committed`, `pause`/`resume`/`paused`, `lag`. Positions are the next offset to
    read per partition, i.e. just after the last message a `read` returned.

    Live, it rides out a broker outage: every call to the brokers is bounded and its errors are
    told apart — retriable ones (the brokers cannot be reached, a request timed out) make the
    reader *away* (`outage`), others are SourceErrors. While away, reads return nothing and no
    partition counts as caught up (so none turns idle and time does not move on); a TCP probe
    tells when the brokers accept connections again, then the end offsets are asked afresh
    (spaced by a backoff) before reading resumes where it stopped. `positions` and `lag`
    answer from what was last known meanwhile; `commit` raises `Unreachable`."""

    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        super().__init__(stream, time_unit, batch_rows, columns)
        source = stream.source
        self._span = source.span
        opts = source.options
        self._check_options(opts)
        self.topic: str = opts["topic"]
        self.group: str | None = opts.get("group")
        self.start: str = opts.get("start", "earliest")
        self.dead_letter_topic: str = opts.get("dead_letter_topic") or f"{self.topic}.dlq"
        self.idle_timeout = float(opts.get("idle_timeout", DEFAULT_IDLE_TIMEOUT))
        self.servers = bootstrap_servers(opts.get("bootstrap_servers"))
        self.client = client_choice(opts.get("client"))
        self._decoder = MessageDecoder(stream, time_unit)
        self.layout = self._decoder.layout
        self._clock = PartitionClock(stream.max_delay, arrival=stream.timestamp is None)
        settings = dict(opts.get("consumer") or {})
        self._partitions: list[int] = []
        self._finished: set[int] = set()  # not live: partitions read up to their end
        self._end_at_open: dict[int, int] = {}
        self._paused = False
        self._read_limit: int | None = None  # the most records the next reads return
        self._closed = False
        self._next_position = 0  # arrival-order timestamps: records read so far
        self._refreshed = time.monotonic()
        self._dead_letters = DeadLetterTopic(
            self.dead_letter_topic, stream.name, self.topic, self.servers, self.client, settings,
            self._span,
        )  # fmt: skip
        # Outages (live): what the worker reads, and how the reader finds the brokers again.
        self.dependency = dependency_name(self.servers)
        self.role = f"source topic {self.topic}"
        self._watch = BrokerWatch(self.servers, self.role)
        self._known: dict[int, int] = {}  # partition -> next offset to read, as last known
        self._lag = 0
        self._delivering = False  # the last poll returned messages: the brokers answer
        refused = self._watch.refused_now()
        if refused is not None:
            raise Unreachable(refused, self._span)
        self._consumer, partitions = self._open_consumer(settings)
        try:
            self._assign(partitions, initial=True)
            self._end_at_open = self._end_offsets(self._partitions)
        except BaseException:
            self.close()
            raise

    @property
    def outage(self) -> Outage | None:
        """Why the brokers count as away (live); None while they answer."""
        return self._watch.outage

    @property
    def flush_timeout(self) -> float | None:
        """The dead-letter producer's (None: KafkaWriter's default); the worker sets it."""
        return self._dead_letters.flush_timeout

    @flush_timeout.setter
    def flush_timeout(self, seconds: float | None) -> None:
        self._dead_letters.flush_timeout = seconds

    # -- set-up

    def _check_options(self, opts: Mapping[str, Any]) -> None:
        name, span = self.stream.name, self._span
        unknown = sorted(set(opts) - set(KAFKA_SOURCE_OPTIONS))
        if unknown:
            raise SourceError(f"{name}: unknown kafka source option(s): {', '.join(unknown)}", span)
        if not isinstance(opts.get("topic"), str) or not opts["topic"]:
            raise SourceError(f"{name}: a kafka source needs a topic", span)
        if opts.get("start", "earliest") not in STARTS:
            raise SourceError(f"{name}: start must be one of {', '.join(STARTS)}", span)
        if opts.get("time", "value") not in TIMES:
            raise SourceError(f"{name}: time must be one of {', '.join(TIMES)}", span)
        if opts.get("time") == "record" and self.stream.timestamp is None:
            raise SourceError(
                f"{name}: time: record fills the stream's timestamp field, but it has none", span
            )
        key = opts.get("key")
        if key is not None and key not in {f.name for f in self.stream.schema}:
            raise SourceError(f"{name}: the key field {key!r} is not in the schema", span)
        if opts.get("start") == "committed" and not opts.get("group"):
            raise SourceError(f"{name}: start: committed needs a group", span)
        try:
            client = client_choice(opts.get("client"))
        except ValueError as e:
            raise SourceError(f"{name}: {e}", span) from None
        reason = settings_reason(client, opts.get("consumer") or {}, "consumer")
        if reason:
            raise SourceError(f"{name}: {reason}", span)

    def _open_consumer(self, settings: Mapping[str, Any]) -> tuple[Any, list[int]]:
        """The consumer, and the topic's partitions (it must exist: a reader never creates
        it)."""
        where = ",".join(self.servers)
        try:
            return open_consumer(
                self.client,
                ConsumerConfig(
                    self.servers,
                    self.topic,
                    self.group,
                    reset="latest" if self.start == "latest" else "earliest",
                    max_records=self.batch_rows,
                    refresh_ms=int(_REFRESH_S * 1000),
                    settings=settings,
                    timestamps=self._decoder.record_time,
                ),
            )
        except TopicMissing:
            raise SourceError(
                f"{self.stream.name}: Kafka topic {self.topic!r} does not exist (at {where})",
                self._span,
            ) from None
        except KafkaCallError as e:
            raise self._failure(e, f"cannot read Kafka topic {self.topic!r} at {where}") from None

    def _topic_partitions(self) -> list[int]:
        try:
            return self._consumer.partitions(self._call_ms())
        except KafkaCallError as e:
            raise self._failure(e, f"cannot list the partitions of {self.topic!r}") from None

    def _assign(self, new: Sequence[int], initial: bool = False) -> None:
        """Add partitions to the assignment; they start per `start` when the reader opens,
        from their beginning when found later (every message in them is new)."""
        self._partitions = sorted({*self._partitions, *new})
        self._consumer.assign(self._partitions)
        for p in new:
            if initial:
                self._seek_start(p)
            else:
                self._seek(p, None)
        for p in new:
            self._position(p)  # known from now on, for `positions` during an outage
        if self._paused and new:
            self._consumer.pause(list(new))

    def _seek_start(self, partition: int) -> None:
        if self.start == "latest":
            self._seek(partition, "end")
            return
        if self.start == "committed":
            offset = self._committed(partition)
            if offset is not None:
                self._consumer.seek(partition, offset)
                return
        self._seek(partition, None)

    def _seek(self, partition: int, where: str | None) -> None:
        """To the beginning of a partition (`where` None) or its end."""
        try:
            if where == "end":
                self._consumer.seek_to_end(partition, self._call_ms())
            else:
                self._consumer.seek_to_beginning(partition, self._call_ms())
        except KafkaCallError as e:
            raise self._failure(e, f"cannot find the offsets of {self.topic!r}") from None

    def _call_ms(self) -> int | None:
        """How long a call to the brokers may block: bounded live (the engine waits for it),
        as long as it takes for `cq run`."""
        return _CALL_MS if self.live else None

    def _end_offsets(self, partitions: Sequence[int]) -> dict[int, int]:
        if not partitions:
            return {}
        try:
            return self._consumer.end_offsets(partitions, self._call_ms())
        except KafkaCallError as e:
            raise self._failure(e, f"cannot ask the end offsets of {self.topic!r}") from None

    def _position(self, partition: int) -> int:
        try:
            position = self._consumer.position(partition, self._call_ms())
        except KafkaCallError as e:
            raise self._failure(e, f"cannot get the position in {self.topic!r}") from None
        if position is None:
            raise Unreachable(
                self._watch.went_away(f"no position in partition {partition} within {_CALL_MS} ms"),
                self._span,
            )
        self._known[partition] = int(position)
        return int(position)

    def _committed(self, partition: int) -> int | None:
        """The group's committed offset. Not live (`cq run`, the archive), a retriable failure
        (the group's coordinator moving) is retried for up to `_RETRY_S` first; live, the
        outage handling retries."""
        try:
            if self.live:
                return self._consumer.committed(partition, self._call_ms())
            return retrying(lambda: self._consumer.committed(partition, None), _RETRY_S)
        except KafkaCallError as e:
            raise self._failure(e, f"cannot read the committed offsets of {self.topic!r}") from None

    # -- outages

    def _failure(self, error: KafkaCallError, what: str) -> CQError:
        """The error to raise for a failed call while doing `what`: `Unreachable` for a
        retriable one (and the reader is away), else a SourceError."""
        if error.retriable:
            return Unreachable(self._watch.failed(error), self._span)
        return SourceError(f"{self.stream.name}: {what}: {error}", self._span)

    def _available(self) -> bool:
        """Live: whether the brokers can be read now (kafka_outage.py)."""
        return self._watch.available(self._delivering, lambda: self._end_offsets(self._partitions))

    # -- reading

    def read(self) -> RawChunk | None:
        if self._closed:
            raise SourceError(f"{self.stream.name}: read from a closed Kafka source", self._span)
        if not self.live:
            return self._read_to_end()
        nothing = {p: False for p in self._partitions}
        if not self._available():
            return self._with_heartbeat(self._chunk(_Polled({})), nothing, self.idle_timeout)
        try:
            self._refresh_partitions()
            chunk = self._chunk(self._poll(_IDLE_POLL_MS))
        except Unreachable:
            self._delivering = False
            return self._with_heartbeat(self._chunk(_Polled({})), nothing, self.idle_timeout)
        self._delivering = len(chunk) > 0 or bool(chunk.dead)
        try:
            caught_up = self._caught_up()
        except Unreachable:
            caught_up = nothing
        return self._with_heartbeat(chunk, caught_up, self.idle_timeout)

    def _read_to_end(self) -> RawChunk | None:
        """Not live: the next records below the end offsets as of opening; None after them."""
        deadline = time.monotonic() + _STALL_S
        while True:
            left = self._update_finished()
            if len(self._finished) == len(self._partitions):
                return None
            if self._paused:
                return self._with_heartbeat(self._chunk(_Polled({})), {}, 0.0)
            polled = self._poll(_END_POLL_MS, left)
            if len(polled):
                chunk = self._chunk(polled)
                self._update_finished()
                done = {p: p in self._finished for p in self._partitions}
                return self._with_heartbeat(chunk, done, 0.0)
            if time.monotonic() > deadline:
                behind = {
                    p: self._end_at_open[p] for p in self._partitions if p not in self._finished
                }
                raise SourceError(
                    f"{self.stream.name}: no message from Kafka topic {self.topic!r} for "
                    f"{_STALL_S:g} s, but partitions {behind} (partition: end offset) are not "
                    f"read to their end",
                    self._span,
                )

    def _update_finished(self) -> int:
        """Not live: note the partitions read up to their end offsets; the messages left."""
        left = 0
        for p in self._partitions:
            if p not in self._finished:
                end, position = self._end_at_open.get(p, 0), self._position(p)
                if position >= end:
                    self._finished.add(p)
                    self._consumer.pause([p])
                left += max(0, end - position)
        return left

    def _poll(self, timeout_ms: int, left: int | None = None) -> _Polled:
        """A poll of at most the read limit and `left` messages: a poll returns early only
        once it has as many as it may return (confluent-kafka), so asking no more than are
        left before the end spares the wait for messages that will not come. Not live, a
        retriable failure is retried for up to `_RETRY_S` first (as `_committed`)."""
        most = self.batch_rows if self._read_limit is None else max(1, self._read_limit)

        def poll() -> _Polled:
            return self._consumer.poll(
                timeout_ms, max(1, min(most, left or most)), prompt=self.live
            )

        try:
            polled = poll() if self.live else retrying(poll, _RETRY_S)
        except KafkaCallError as e:
            raise self._failure(e, f"cannot read Kafka topic {self.topic!r}") from None
        if not self.live:
            polled = self._below_end(polled)
        return polled

    def _below_end(self, polled: _Polled) -> _Polled:
        """Drop messages at or past the end offsets as of opening (and read them no more)."""
        if not len(polled):
            return polled
        parts = np.asarray(polled.partition)
        offsets = np.asarray(polled.offset, dtype=np.int64)
        ends = np.zeros(len(parts), np.int64)
        for p in np.unique(parts).tolist():
            ends[parts == p] = self._end_at_open.get(p, 0)
        past = offsets >= ends
        if not past.any():
            return polled
        for p in np.unique(parts[past]).tolist():
            self._consumer.seek(p, self._end_at_open.get(p, 0))
        return polled.take(np.flatnonzero(~past))

    def _refresh_partitions(self) -> None:
        now = time.monotonic()
        if now - self._refreshed < _REFRESH_S:
            return
        self._refreshed = now
        new = [p for p in self._topic_partitions() if p not in self._partitions]
        if new:
            self._assign(new)

    def _caught_up(self) -> dict[int, bool]:
        """Live: whether each partition is at its end offset (as far as the last fetch knows).
        A paused reader is not caught up anywhere: it is not looking."""
        if self._paused:
            return {p: False for p in self._partitions}
        out: dict[int, bool] = {}
        unknown = []
        for p in self._partitions:
            high = self._consumer.highwater(p)
            hint = self._watch.end_after_outage(p, high)
            ends = [e for e in (high, hint) if e is not None]
            if ends:
                out[p] = self._position(p) >= max(ends)
            else:
                unknown.append(p)
        for p, end in self._end_offsets(unknown).items():
            out[p] = self._position(p) >= end
        return out

    def _with_heartbeat(
        self, chunk: RawChunk, caught_up: Mapping[int, bool], idle: float
    ) -> RawChunk:
        beat = self._clock.update(caught_up, time.monotonic(), idle)
        return replace(chunk, heartbeat=beat)

    def _chunk(self, polled: _Polled) -> RawChunk:
        """Decode one poll's messages; send the malformed ones to the dead-letter topic. If the
        brokers cannot take them now, the poll is undone (Unreachable): its messages are read
        again later."""
        n = len(polled)
        positions = self._next_position + np.arange(n, dtype=np.int64)
        chunk, dead = self._decoder.decode(polled, positions)
        try:
            self._dead_letters.send(polled, dead)
        except Unreachable as e:
            self._undo(polled)
            self._watch.went_away(e.outage.reason)
            raise
        self._next_position += n
        assert chunk.partition is not None
        self._clock.observe(chunk.partition, chunk.ts)
        if n:
            parts = np.asarray(polled.partition)
            offsets = np.asarray(polled.offset, dtype=np.int64)
            for p in np.unique(parts).tolist():
                self._known[p] = max(self._known.get(p, 0), int(offsets[parts == p].max()) + 1)
        return chunk

    def _undo(self, polled: _Polled) -> None:
        """Seek back to the first message of a poll; forget its dead letters not acknowledged
        (they are sent again when it is read again)."""
        parts = np.asarray(polled.partition)
        offsets = np.asarray(polled.offset, dtype=np.int64)
        for p in np.unique(parts).tolist():
            self._consumer.seek(p, int(offsets[parts == p].min()))
        self._dead_letters.abandon()

    # -- the worker's controls

    def positions(self) -> dict[int, int]:
        """The next offset to read in each assigned partition (while the brokers are away: as
        last known, i.e. just after the last message read)."""
        if self.outage is None:
            try:
                return {p: self._position(p) for p in self._partitions}
            except Unreachable:
                pass
        return {p: self._known[p] for p in self._partitions if p in self._known}

    def seek(self, offsets: Mapping[int, int]) -> None:
        """Read on from these offsets; partitions not given start per `start`."""
        unknown = sorted(set(offsets) - set(self._partitions))
        if unknown:
            self._assign([p for p in self._topic_partitions() if p not in self._partitions])
            unknown = sorted(set(offsets) - set(self._partitions))
        if unknown:
            raise SourceError(
                f"{self.stream.name}: topic {self.topic!r} has no partition(s) "
                f"{', '.join(map(str, unknown))}",
                self._span,
            )
        for p in self._partitions:
            if p in offsets:
                self._consumer.seek(p, int(offsets[p]))
                self._known[p] = int(offsets[p])
            else:
                self._seek_start(p)
                self._position(p)
        self._finished.clear()
        if not self._paused:
            self._consumer.resume(self._partitions)

    def commit(self, offsets: Mapping[int, int], metadata: str = "") -> None:
        """Commit these offsets (the next offset to read, per partition) to the consumer
        group, synchronously."""
        if not self.group:
            raise SourceError(f"{self.stream.name}: commit needs a consumer group", self._span)
        if self.outage is not None:
            raise Unreachable(self.outage, self._span)
        try:
            self._consumer.commit(offsets, metadata, self._call_ms())
        except KafkaCallError as e:
            raise self._failure(e, f"cannot commit offsets of {self.topic!r}") from None

    def committed(self) -> dict[int, int]:
        """The group's committed offsets, for the partitions that have one."""
        if not self.group:
            return {}
        out = {}
        for p in self._partitions:
            offset = self._committed(p)
            if offset is not None:
                out[p] = int(offset)
        return out

    @property
    def paused(self) -> bool:
        return self._paused

    def pause(self) -> None:
        """Stop fetching (reads return empty chunks) until `resume`."""
        self._paused = True
        self._consumer.pause(self._partitions)

    def resume(self) -> None:
        self._paused = False
        active = [p for p in self._partitions if p not in self._finished]
        if active:
            self._consumer.resume(active)

    def limit_reads(self, records: int | None) -> None:
        """Return at most `records` messages a read from now on (None: `batch_rows`): the
        worker paces a source so a memory budget holds (service/pacing.py)."""
        self._read_limit = None if records is None else min(self.batch_rows, int(records))

    def known_lag(self) -> int:
        """Messages behind the end as the last fetch told (each partition's high-water mark
        less the next offset to read, as last known), without a call to the brokers; the last
        figure `lag` gave for a partition no fetch has told of yet."""
        if not self.live or self.outage is not None or self._closed:
            return self._lag
        total = 0
        for p in self._partitions:
            high = self._consumer.highwater(p)
            at = self._known.get(p)
            if high is None or at is None:
                return self._lag
            total += max(0, int(high) - at)
        self._lag = total
        return total

    def lag(self) -> int:
        """Messages behind the end: the end offsets now (not live: as of opening) minus the
        positions (while the brokers are away: as last known)."""
        if not self.live:
            ends = self._end_at_open
        elif self.outage is not None:
            return self._lag
        else:
            try:
                ends = self._end_offsets(self._partitions)
            except Unreachable:
                return self._lag
        self._lag = sum(max(0, ends.get(p, 0) - pos) for p, pos in self.positions().items())
        return self._lag

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._dead_letters.close()
        finally:
            self._watch.close()
            consumer = getattr(self, "_consumer", None)
            if consumer is not None:
                consumer.close()
