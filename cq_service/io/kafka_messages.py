"""Kafka messages as a stream's elements: decoding them (`MessageDecoder`, also used by
`cq archive` and the Spark runner, so every reader sees the same elements) and the time of a
stream read from several partitions (`PartitionClock`). docs/kafka.md, "Decoding" and "Time".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.io.base import DeadRecord, RawChunk
from cq_service.io.records import NOT_UTF8, JsonObjects, RecordLayout
from cq_service.spec.model import TIME_UNITS, StreamSpec

__all__ = ["NONE", "MessageDecoder", "Messages", "PartitionClock"]

NONE = np.iinfo(np.int64).min


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

    def take(self, index: Sequence[int] | np.ndarray) -> Messages:
        """The messages at `index`, in that order."""
        rows = [int(i) for i in index]
        return Messages.of(
            [self.partition[i] for i in rows],
            [self.offset[i] for i in rows],
            [self.key[i] for i in rows],
            [self.value[i] for i in rows],
            [self.timestamp[i] for i in rows],
        )


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
        ok: list[int] | range = []
        keys: list[str | None] = [None] * n
        if self.key_field is None and None not in polled.value:  # the usual case, at C speed
            ok, texts = range(n), polled.value
        else:
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
                ok.append(i)  # type: ignore[union-attr]
            texts = [polled.value[i] for i in ok]
        values, rows, bad = self._parse(texts)
        ok_index = np.arange(n) if isinstance(ok, range) else np.asarray(ok, dtype=np.int64)
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

    def _parse(self, texts: Sequence[bytes]) -> tuple[dict[str, Any], np.ndarray, list]:
        """JSON values -> field values: all at once when they can be lines of one block."""
        if texts:
            data = b"\n".join([*texts, b""])
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
