"""Kafka sources and sinks: one JSON object per message, read and written with kafka-python.

Source (``type: kafka``): every partition of `topic` is assigned to this one reader (manual
assignment; the consumer group is used only to commit offsets). Values are decoded and checked
against the stream's schema exactly as jsonl file lines are (`records.JsonObjects`,
`records.RecordLayout`); `key: field` fills that schema field from the message key (UTF-8 text,
converted like a csv field), `time: record` fills the stream's `timestamp` field from the
message timestamp. A message that does not fit is sent, with its original key and bytes and
headers giving the reason and where it came from, to the dead-letter topic (acknowledged before
the reader moves on), and reported in the chunk's `dead` list.

Time is kept per partition (`PartitionClock`): each chunk says which partition each element
came from, and gives the stream's heartbeat, the minimum over the partitions still holding time
back. `live=False` reads up to the end offsets as of opening, then ends; `live=True` follows
the topic, returning empty chunks while nothing is new, and picks up partitions added later.

Sink (``type: kafka``): one message per element, the value the element's DESIGN §5 object
(`sinks.json_lines`, so byte for byte a jsonl line without its newline), the key optional;
acks=all, and `flush` returns only once every message sent so far is acknowledged.

kafka-python is imported when a client is made, not with this module, so ``cq`` commands that
do not touch Kafka do not pay for it. docs/kafka.md is the user's guide.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.errors import CQError, Span
from cq_service.io.base import (
    DeadRecord,
    RawChunk,
    Sink,
    SinkError,
    SourceError,
    SourceReader,
    json_safe,
    register_sink,
    register_source,
)
from cq_service.io.records import NOT_UTF8, JsonObjects, RecordLayout
from cq_service.io.sinks import json_lines
from cq_service.spec.loader import KAFKA_SINK_OPTIONS, KAFKA_SOURCE_OPTIONS
from cq_service.spec.model import TIME_UNITS, SinkSpec, StreamSpec
from cq_service.types import DataType

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

# Kafka 4 removed the oldest protocol versions (KIP-896), and kafka-python left to guess may
# still send one of them (dpkp/kafka-python#2679, DESIGN §9): every client pins this.
API_VERSION = (3, 9)
BOOTSTRAP_ENV = "CQ_KAFKA_BOOTSTRAP"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

STARTS = ("earliest", "latest", "committed")
TIMES = ("value", "record")
DEFAULT_IDLE_TIMEOUT = 5.0  # seconds

# Settings the reader and the writers own: `consumer:` / `producer:` may not change them.
_OWN_CONSUMER = frozenset(
    {
        "bootstrap_servers",
        "api_version",
        "group_id",
        "enable_auto_commit",
        "auto_offset_reset",
        "key_deserializer",
        "value_deserializer",
        "max_poll_records",
        "allow_auto_create_topics",
        "consumer_timeout_ms",
    }
)
_OWN_PRODUCER = frozenset(
    {"bootstrap_servers", "api_version", "acks", "key_serializer", "value_serializer"}
)

_IDLE_POLL_MS = 50  # live: how long one read waits for new records
_END_POLL_MS = 200  # not live: one poll while reading up to the end offsets
_STALL_S = 60.0  # not live: no record for this long although the end is not reached: error
_REFRESH_S = 5.0  # live: how often to look for partitions added to the topic
_FLUSH_S = 120.0  # how long a flush may wait for the broker's acknowledgements
_SLICE = 1 << 16
NONE = np.iinfo(np.int64).min


def bootstrap_servers(
    option: str | Sequence[str] | None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The brokers to contact: the `bootstrap_servers` option (``host:port``, several
    comma-separated or as a list), else $CQ_KAFKA_BOOTSTRAP, else 127.0.0.1:9092."""
    value: str | Sequence[str] | None = option
    if value is None:
        env = os.environ if environ is None else environ
        value = env.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
    items = value.split(",") if isinstance(value, str) else list(value)
    return [s.strip() for s in items if s.strip()]


def _check_settings(
    settings: Mapping[str, Any], known: Collection[str], own: Collection[str], what: str
) -> str | None:
    """A reason if `settings` (a `consumer:`/`producer:` mapping) has keys kafka-python does
    not know or that cq sets itself."""
    if not isinstance(settings, Mapping):
        return f"{what} settings must be a mapping"
    taken = sorted(k for k in settings if k in own)
    if taken:
        return f"{what} setting(s) {', '.join(taken)} are set by cq and cannot be changed"
    unknown = sorted(k for k in settings if k not in known)
    if unknown:
        return (
            f"unknown {what} setting(s): {', '.join(unknown)} (see kafka-python's K{what.title()})"
        )
    return None


# -- writing --------------------------------------------------------------------------------------


class KafkaWriter:
    """A producer (acks=all) that knows whether everything it sent was acknowledged.

    `send` hands a message to the producer's batches; `flush` blocks until the broker has
    acknowledged every message sent so far and raises `error` if any failed (then every later
    flush fails too: the caller must not go on as if they had been written)."""

    def __init__(
        self,
        servers: Sequence[str],
        settings: Mapping[str, Any] | None = None,
        *,
        error: type[CQError] = SinkError,
        span: Span | None = None,
    ):
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        self._error, self._span = error, span
        settings = dict(settings or {})
        reason = _check_settings(settings, KafkaProducer.DEFAULT_CONFIG, _OWN_PRODUCER, "producer")
        if reason:
            raise error(reason, span)
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=list(servers), api_version=API_VERSION, acks="all", **settings
            )
        except KafkaError as e:
            raise error(f"cannot connect to Kafka at {','.join(servers)}: {e}", span) from None
        self._done = threading.Condition()
        self._sent = 0
        self._acked = 0
        self._failure: BaseException | None = None
        self._closed = False

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        from kafka.errors import KafkaError

        try:
            future = self._producer.send(topic, value=value, key=key, headers=headers)
        except KafkaError as e:
            raise self._error(f"cannot send to Kafka topic {topic!r}: {e}", self._span) from None
        self._sent += 1
        future.add_both(self._completed)

    def _completed(self, result: Any) -> None:
        with self._done:
            self._acked += 1
            if isinstance(result, BaseException) and self._failure is None:
                self._failure = result
            self._done.notify_all()

    def flush(self) -> None:
        """Block until every message sent so far is acknowledged; raise if any was not."""
        from kafka.errors import KafkaError

        try:
            self._producer.flush(timeout=_FLUSH_S)
        except KafkaError as e:
            raise self._error(f"Kafka did not acknowledge messages: {e}", self._span) from None
        with self._done:
            complete = self._done.wait_for(lambda: self._acked >= self._sent, timeout=_FLUSH_S)
            failure = self._failure
        if failure is not None:
            raise self._error(f"Kafka rejected a message: {failure}", self._span)
        if not complete:
            raise self._error(
                f"Kafka acknowledged {self._acked} of {self._sent} messages within {_FLUSH_S:g} s",
                self._span,
            )

    def close(self) -> None:
        """Close the producer (without flushing: call `flush` first to know the outcome)."""
        if not self._closed:
            self._closed = True
            self._producer.close(timeout=_FLUSH_S)


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
    ``bootstrap_servers``, ``key``, ``producer`` (kafka-python KafkaProducer settings)."""

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
        )

    def _write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        for start in range(0, len(ts), _SLICE):
            stop = start + _SLICE
            cols = [c.slice(start, _SLICE) for c in columns]
            values = _without_newline(json_lines(ts[start:stop], ops[start:stop], cols, self.names))
            for value, key in zip(values, self._keys(cols, len(values))):
                self._writer.send(self.topic, value, key)

    def _keys(self, columns: Sequence[pa.Array], n: int) -> list[bytes | None]:
        if not self._key_index:
            return [None] * n
        picked = [columns[i].to_pylist() for i in self._key_index]
        if len(picked) == 1:
            return [_key_text(v) for v in picked[0]]
        return [
            json.dumps(json_safe(list(row)), ensure_ascii=False, separators=(",", ":")).encode()
            for row in zip(*picked)
        ]

    def flush(self) -> None:
        """Block until the broker has acknowledged every element written; SinkError if not."""
        self._writer.flush()

    def _close(self) -> None:
        try:
            self._writer.flush()
        finally:
            self._writer.close()


# -- time per partition ---------------------------------------------------------------------------


class PartitionClock:
    """The heartbeat of a source read from several partitions (docs/kafka.md, "Time").

    A partition's bound is its latest timestamp − max_delay − 1 (nothing before it has
    delivered). The heartbeat is the smallest bound among the partitions that hold time back,
    and never goes down. A partition stops holding time back once it has been caught up (at
    its end offset) for `idle` seconds without delivering, and holds it again as soon as it
    delivers; when no partition holds time back, the heartbeat is the largest bound. With
    arrival-order timestamps (`arrival`) every later element is later anyway: the heartbeat is
    the latest timestamp − max_delay − 1."""

    def __init__(self, max_delay: int, arrival: bool = False):
        self.max_delay = max_delay
        self.arrival = arrival
        self.latest: dict[int, int] = {}
        self._caught_up_since: dict[int, float] = {}
        self._heartbeat = NONE

    def observe(self, partition: np.ndarray, ts: np.ndarray) -> None:
        """Elements delivered: their partitions and timestamps."""
        if len(ts) == 0:
            return
        for p in np.unique(partition).tolist():
            top = int(ts[partition == p].max())
            self.latest[p] = max(self.latest.get(p, NONE), top)
            self._caught_up_since.pop(p, None)

    def update(self, caught_up: Mapping[int, bool], now: float, idle: float) -> int | None:
        """The heartbeat, given which partitions are caught up now (None: none yet)."""
        bounds = {p: m - self.max_delay - 1 for p, m in self.latest.items()}
        if self.arrival:
            beat = max(bounds.values(), default=NONE)
        else:
            holding = []
            for p, up in caught_up.items():
                if up:
                    since = self._caught_up_since.setdefault(p, now)
                    if now - since >= idle:
                        continue
                else:
                    self._caught_up_since.pop(p, None)
                holding.append(bounds.get(p, NONE))
            beat = min(holding) if holding else max(bounds.values(), default=NONE)
        self._heartbeat = max(self._heartbeat, beat)
        return None if self._heartbeat == NONE else self._heartbeat


# -- reading --------------------------------------------------------------------------------------


def _text(value: bytes | None) -> str:
    return "" if value is None else value.decode("utf-8", errors="replace")


class Messages:
    """Kafka messages as columns: partition, offset, key, value and timestamp (ms since the
    epoch, -1 if none) of each. A poll's are flattened in partition order (each partition's in
    offset order); `of` takes messages read some other way (e.g. Spark's Kafka connector)."""

    def __init__(self, records: Mapping[Any, Sequence[Any]]):
        self.partition: list[int] = []
        self.offset: list[int] = []
        self.key: list[bytes | None] = []
        self.value: list[bytes | None] = []
        self.timestamp: list[int] = []
        for tp in sorted(records, key=lambda t: t.partition):
            for r in records[tp]:
                self.partition.append(tp.partition)
                self.offset.append(r.offset)
                self.key.append(r.key)
                self.value.append(r.value)
                self.timestamp.append(r.timestamp)

    @classmethod
    def of(
        cls,
        partition: Sequence[int],
        offset: Sequence[int],
        key: Sequence[bytes | None],
        value: Sequence[bytes | None],
        timestamp: Sequence[int],
    ) -> Messages:
        messages = cls({})
        messages.partition, messages.offset = list(partition), list(offset)
        messages.key, messages.value = list(key), list(value)
        messages.timestamp = list(timestamp)
        return messages

    def __len__(self) -> int:
        return len(self.value)


_Polled = Messages


class MessageDecoder:
    """Kafka messages -> a stream's elements, exactly as `KafkaReader` decodes them (values as
    jsonl lines are, `key` and `time: record` as documented above). `cq archive` decodes with it
    too, so the archive holds the elements the engine sees."""

    def __init__(self, stream: StreamSpec, time_unit: str):
        opts = stream.source.options
        self.stream = stream
        self.topic: str = opts["topic"]
        self.key_field: str | None = opts.get("key")
        self.record_time = opts.get("time", "value") == "record"
        self.layout = RecordLayout(stream, time_unit, f"kafka:{self.topic}")
        self._json = JsonObjects(self.layout)
        self._unit_ns = TIME_UNITS[time_unit]

    def decode(
        self, polled: Messages, positions: np.ndarray
    ) -> tuple[RawChunk, list[DeadRecord]]:
        """The elements of `polled` (`positions`: each message's arrival-order timestamp), with
        `record` the offset and `partition` set, and its dead records located as
        ``kafka:<topic>/<partition>`` at their offset; also those dead records with `record` the
        message's index in `polled` (for the dead-letter topic)."""
        n = len(polled)
        dead: list[tuple[int, str]] = []
        ok: list[int] = []
        keys: list[str | None] = [None] * n
        for i, value in enumerate(polled.value):
            if value is None:
                dead.append((i, "no value (a tombstone)"))
                continue
            key = polled.key[i]
            if self.key_field is not None and key is not None:
                try:
                    keys[i] = key.decode("utf-8")
                except UnicodeDecodeError:
                    dead.append((i, f"key: {NOT_UTF8}"))
                    continue
            ok.append(i)
        texts = [polled.value[i] for i in ok]
        values, rows, bad = self._parse(texts)
        ok_index = np.asarray(ok, dtype=np.int64)
        parsed = ok_index[rows]
        if self.key_field is not None:
            values[self.key_field] = pa.array([keys[i] for i in parsed.tolist()], pa.string())
        if self.record_time:
            assert self.stream.timestamp is not None
            values[self.stream.timestamp] = self._record_times(polled, parsed)
        dead.extend((int(ok_index[k]), reason) for k, reason in bad)
        chunk = self.layout.assemble(
            values,
            len(parsed),
            parsed,
            np.asarray(positions, dtype=np.int64)[parsed],
            lambda j: _text(polled.value[int(parsed[j])]),
            [(i, reason, _text(polled.value[i])) for i, reason in dead],
        )
        index = chunk.record
        located = RawChunk(
            chunk.columns,
            chunk.ts,
            chunk.ops,
            np.asarray(polled.offset, dtype=np.int64)[index],
            [
                replace(
                    d,
                    file=f"kafka:{self.topic}/{polled.partition[d.record]}",
                    record=polled.offset[d.record],
                )
                for d in chunk.dead
            ],
            partition=np.asarray(polled.partition, dtype=np.int32)[index],
        )
        return located, chunk.dead

    def _parse(self, texts: list[bytes]) -> tuple[dict[str, Any], np.ndarray, list]:
        """JSON values -> field values: all at once when they can be lines of one block."""
        if texts:
            data = b"\n".join(texts) + b"\n"
            if data.count(b"\n") == len(texts) and b"\r" not in data:
                values = self._json.fast(data, len(texts))
                if values is not None:
                    return values, np.arange(len(texts), dtype=np.int64), []
        # json.loads would take bytes in UTF-16 or UTF-32 too: a value must be UTF-8.
        utf8, bad = [], []
        for k, text in enumerate(texts):
            try:
                text.decode("utf-8")
            except UnicodeDecodeError:
                bad.append((k, NOT_UTF8))
            else:
                utf8.append(k)
        values, rows, more = self._json.slow([texts[k] for k in utf8])
        index = np.asarray(utf8, dtype=np.int64)
        return values, index[rows], bad + [(int(index[k]), reason) for k, reason in more]

    def _record_times(self, polled: Messages, rows: np.ndarray) -> pa.Array:
        """Message timestamps (ms since the epoch) of `rows` in time_unit, rounded down."""
        ms = np.asarray(polled.timestamp, dtype=np.int64)[rows]
        missing = ms < 0
        ns = ms * 1_000_000
        values = ns // self._unit_ns
        return pa.array(values, pa.int64(), mask=missing if missing.any() else None)


@register_source("kafka")
class KafkaReader(SourceReader):
    """A stream or relation read from every partition of a Kafka topic (see the module doc).

    Besides `read`, the worker uses it for at-least-once delivery: `positions`, `seek`,
    `commit`, `committed`, `pause`/`resume`/`paused`, `lag`. Positions are the next offset to
    read per partition, i.e. just after the last message a `read` returned."""

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
        self._decoder = MessageDecoder(stream, time_unit)
        self.layout = self._decoder.layout
        self._clock = PartitionClock(stream.max_delay, arrival=stream.timestamp is None)
        settings = dict(opts.get("consumer") or {})
        self._settings = settings
        self._partitions: list[int] = []
        self._finished: set[int] = set()  # not live: partitions read up to their end
        self._end_at_open: dict[int, int] = {}
        self._paused = False
        self._closed = False
        self._next_position = 0  # arrival-order timestamps: records read so far
        self._refreshed = time.monotonic()
        self._dead_writer: KafkaWriter | None = None
        partitions = self._describe_topic(settings)
        self._consumer = self._open_consumer(settings)
        try:
            self._assign(partitions, initial=True)
            self._end_at_open = self._end_offsets(self._partitions)
        except BaseException:
            self.close()
            raise

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
        from kafka import KafkaConsumer

        settings = opts.get("consumer") or {}
        reason = _check_settings(settings, KafkaConsumer.DEFAULT_CONFIG, _OWN_CONSUMER, "consumer")
        if reason:
            raise SourceError(f"{name}: {reason}", span)

    def _open_consumer(self, settings: Mapping[str, Any]) -> Any:
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError

        config = {"metadata_max_age_ms": int(_REFRESH_S * 1000), **settings}
        try:
            return KafkaConsumer(
                bootstrap_servers=self.servers,
                api_version=API_VERSION,
                group_id=self.group,
                enable_auto_commit=False,
                auto_offset_reset="latest" if self.start == "latest" else "earliest",
                max_poll_records=self.batch_rows,
                allow_auto_create_topics=False,
                **config,
            )
        except KafkaError as e:
            raise SourceError(
                f"{self.stream.name}: cannot connect to Kafka at {','.join(self.servers)}: {e}",
                self._span,
            ) from None

    def _describe_topic(self, settings: Mapping[str, Any]) -> list[int]:
        """The topic's partitions, asked with an admin client: it gives up on an unreachable
        broker after `bootstrap_timeout_ms` (30 s unless set under `consumer:`), where the
        consumer would wait for ever, and never creates the topic."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError, for_code

        shared = {k: v for k, v in settings.items() if k in KafkaAdminClient.DEFAULT_CONFIG}
        where = ",".join(self.servers)
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.servers, api_version=API_VERSION, **shared
            )
        except KafkaError as e:
            raise SourceError(
                f"{self.stream.name}: cannot reach Kafka at {where}: {e}", self._span
            ) from None
        try:
            [info] = admin.describe_topics([self.topic])
        except KafkaError as e:
            raise SourceError(
                f"{self.stream.name}: cannot describe Kafka topic {self.topic!r}: {e}", self._span
            ) from None
        finally:
            admin.close()
        code = info.get("error_code", 0)
        if code == 3 or (not code and not info.get("partitions")):
            raise SourceError(
                f"{self.stream.name}: Kafka topic {self.topic!r} does not exist (at {where})",
                self._span,
            )
        if code:
            raise SourceError(
                f"{self.stream.name}: cannot read Kafka topic {self.topic!r}: "
                f"{for_code(code).__name__}",
                self._span,
            )
        return sorted(int(p["partition_index"]) for p in info["partitions"])

    def _tp(self, partition: int) -> Any:
        from kafka import TopicPartition

        return TopicPartition(self.topic, partition)

    def _topic_partitions(self) -> list[int]:
        return sorted(self._consumer.partitions_for_topic(self.topic) or ())

    def _assign(self, new: Sequence[int], initial: bool = False) -> None:
        """Add partitions to the assignment; they start per `start` when the reader opens,
        from their beginning when found later (every message in them is new)."""
        self._partitions = sorted({*self._partitions, *new})
        self._consumer.assign([self._tp(p) for p in self._partitions])
        for p in new:
            if initial:
                self._seek_start(p)
            else:
                self._consumer.seek_to_beginning(self._tp(p))
        if self._paused and new:
            self._consumer.pause(*[self._tp(p) for p in new])

    def _seek_start(self, partition: int) -> None:
        tp = self._tp(partition)
        if self.start == "latest":
            self._consumer.seek_to_end(tp)
            return
        if self.start == "committed":
            offset = self._consumer.committed(tp)
            if offset is not None:
                self._consumer.seek(tp, offset)
                return
        self._consumer.seek_to_beginning(tp)

    def _end_offsets(self, partitions: Sequence[int]) -> dict[int, int]:
        if not partitions:
            return {}
        ends = self._consumer.end_offsets([self._tp(p) for p in partitions])
        return {tp.partition: int(off) for tp, off in ends.items()}

    def _position(self, partition: int) -> int:
        return int(self._consumer.position(self._tp(partition)))

    # -- reading

    def read(self) -> RawChunk | None:
        if self._closed:
            raise SourceError(f"{self.stream.name}: read from a closed Kafka source", self._span)
        if not self.live:
            return self._read_to_end()
        self._refresh_partitions()
        chunk = self._chunk(self._poll(_IDLE_POLL_MS))
        return self._with_heartbeat(chunk, self._caught_up(), self.idle_timeout)

    def _read_to_end(self) -> RawChunk | None:
        """Not live: the next records below the end offsets as of opening; None after them."""
        deadline = time.monotonic() + _STALL_S
        while True:
            self._update_finished()
            if len(self._finished) == len(self._partitions):
                return None
            if self._paused:
                return self._with_heartbeat(self._chunk(_Polled({})), {}, 0.0)
            polled = self._poll(_END_POLL_MS)
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

    def _update_finished(self) -> None:
        for p in self._partitions:
            if p not in self._finished and self._position(p) >= self._end_at_open.get(p, 0):
                self._finished.add(p)
                self._consumer.pause(self._tp(p))

    def _poll(self, timeout_ms: int) -> _Polled:
        from kafka.errors import KafkaError

        try:
            records = self._consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_rows)
        except KafkaError as e:
            raise SourceError(
                f"{self.stream.name}: cannot read Kafka topic {self.topic!r}: {e}", self._span
            ) from None
        if not self.live:
            records = self._below_end(records)
        return _Polled(records)

    def _below_end(self, records: Mapping[Any, Sequence[Any]]) -> dict[Any, Sequence[Any]]:
        """Drop messages at or past the end offsets as of opening (and read them no more)."""
        kept = {}
        for tp, recs in records.items():
            end = self._end_at_open.get(tp.partition, 0)
            below = [r for r in recs if r.offset < end]
            if len(below) < len(recs):
                self._consumer.seek(tp, end)
            if below:
                kept[tp] = below
        return kept

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
            high = self._consumer.highwater(self._tp(p))
            if high is None:
                unknown.append(p)
            else:
                out[p] = self._position(p) >= high
        for p, end in self._end_offsets(unknown).items():
            out[p] = self._position(p) >= end
        return out

    def _with_heartbeat(
        self, chunk: RawChunk, caught_up: Mapping[int, bool], idle: float
    ) -> RawChunk:
        beat = self._clock.update(caught_up, time.monotonic(), idle)
        return replace(chunk, heartbeat=beat)

    def _chunk(self, polled: _Polled) -> RawChunk:
        """Decode one poll's messages; send the malformed ones to the dead-letter topic."""
        n = len(polled)
        positions = self._next_position + np.arange(n, dtype=np.int64)
        self._next_position += n
        chunk, dead = self._decoder.decode(polled, positions)
        self._dead_letter(polled, dead)
        assert chunk.partition is not None
        self._clock.observe(chunk.partition, chunk.ts)
        return chunk

    def _dead_letter(self, polled: _Polled, dead: Sequence[DeadRecord]) -> None:
        """Send malformed messages to the dead-letter topic and wait for the broker's
        acknowledgement (`DeadRecord.record` is still the index in `polled`)."""
        if not dead:
            return
        if self._dead_writer is None:
            from kafka import KafkaProducer

            shared = {k: v for k, v in self._settings.items() if k in KafkaProducer.DEFAULT_CONFIG}
            self._dead_writer = KafkaWriter(
                self.servers, shared, error=SourceError, span=self._span
            )
        for d in dead:
            i = d.record
            headers = [
                ("cq.reason", d.reason.encode("utf-8")),
                ("cq.stream", self.stream.name.encode("utf-8")),
                ("cq.source.topic", self.topic.encode("utf-8")),
                ("cq.source.partition", str(polled.partition[i]).encode()),
                ("cq.source.offset", str(polled.offset[i]).encode()),
            ]
            self._dead_writer.send(self.dead_letter_topic, polled.value[i], polled.key[i], headers)
        self._dead_writer.flush()

    # -- the worker's controls

    def positions(self) -> dict[int, int]:
        """The next offset to read in each assigned partition."""
        return {p: self._position(p) for p in self._partitions}

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
                self._consumer.seek(self._tp(p), int(offsets[p]))
            else:
                self._seek_start(p)
        self._finished.clear()
        if not self._paused:
            self._consumer.resume(*[self._tp(p) for p in self._partitions])

    def commit(self, offsets: Mapping[int, int], metadata: str = "") -> None:
        """Commit these offsets (the next offset to read, per partition) to the consumer
        group, synchronously."""
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata

        if not self.group:
            raise SourceError(f"{self.stream.name}: commit needs a consumer group", self._span)
        try:
            self._consumer.commit(
                {self._tp(p): OffsetAndMetadata(int(o), metadata, -1) for p, o in offsets.items()}
            )
        except KafkaError as e:
            raise SourceError(
                f"{self.stream.name}: cannot commit offsets of {self.topic!r}: {e}", self._span
            ) from None

    def committed(self) -> dict[int, int]:
        """The group's committed offsets, for the partitions that have one."""
        if not self.group:
            return {}
        out = {}
        for p in self._partitions:
            offset = self._consumer.committed(self._tp(p))
            if offset is not None:
                out[p] = int(offset)
        return out

    @property
    def paused(self) -> bool:
        return self._paused

    def pause(self) -> None:
        """Stop fetching (reads return empty chunks) until `resume`."""
        self._paused = True
        self._consumer.pause(*[self._tp(p) for p in self._partitions])

    def resume(self) -> None:
        self._paused = False
        active = [self._tp(p) for p in self._partitions if p not in self._finished]
        if active:
            self._consumer.resume(*active)

    def lag(self) -> int:
        """Messages behind the end: the end offsets now (not live: as of opening) minus the
        positions."""
        ends = self._end_at_open if not self.live else self._end_offsets(self._partitions)
        return sum(max(0, ends.get(p, 0) - pos) for p, pos in self.positions().items())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._dead_writer is not None:
                self._dead_writer.close()
        finally:
            consumer = getattr(self, "_consumer", None)
            if consumer is not None:
                consumer.close(autocommit=False)
