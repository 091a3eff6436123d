"""`cq nexmark produce`: the NEXMark generator (cq_service.io.nexmark) writing persons, auctions
and bids to three Kafka topics at a steady rate, with occasional bursts, through the project's
Kafka writer (`KafkaWriter`: acks=all, nothing lost while the broker is away).

The pace is a pure function of the time since the start (`Schedule.due`): `rate` events per
second, and during each burst `factor` times that. Events keep the generator's order: event `e`
is a person, an auction or a bid by its place in its block of 50 (1 : 3 : 46), so the first `e`
events are `rows_before(kind, e)` rows of each kind. Event time advances 1/`rate` s per event
(from 2015-07-15, as `cq nexmark generate`): at the steady rate it keeps pace with the wall
clock, and a burst runs ahead of it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

from cq_service.io.nexmark import AUCTIONS, KINDS, PERSONS, PROPORTION, NexmarkChunk, generate

__all__ = [
    "DEFAULT_TOPICS",
    "Produced",
    "Schedule",
    "parse_bursts",
    "produce",
    "rows_before",
]

DEFAULT_TOPICS = {kind: f"nexmark-{kind}" for kind in KINDS}
CHUNK = 10_000  # events generated at a time (a multiple of the block of 50)
TICK_S = 0.02  # how often the pace is checked
FLUSH_S = 1.0  # how often the writer waits for the broker's acknowledgements


@dataclass(frozen=True)
class Schedule:
    """`rate` events per second; from `every` seconds on, every `every` seconds, a burst of
    `length` seconds at `factor` times the rate (`every` 0: no bursts)."""

    rate: float
    every: float = 0.0
    length: float = 0.0
    factor: float = 1.0

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("the rate must be positive")
        if self.every < 0 or self.length < 0 or self.factor < 1:
            raise ValueError("bursts: every and length ≥ 0, factor ≥ 1")
        if self.every and self.length > self.every:
            raise ValueError("a burst cannot last longer than the time between bursts")

    def burst_seconds(self, t: float) -> float:
        """Seconds of [0, t] spent in bursts."""
        if not self.every or t <= 0:
            return 0.0
        n = int(t // self.every)  # bursts started by t (the first at `every`)
        if n == 0:
            return 0.0
        return (n - 1) * self.length + min(t - n * self.every, self.length)

    def in_burst(self, t: float) -> bool:
        return bool(self.every) and t >= self.every and t % self.every < self.length

    def due(self, t: float) -> int:
        """Events to have been produced `t` seconds after the start."""
        if t <= 0:
            return 0
        return int(self.rate * (t + (self.factor - 1) * self.burst_seconds(t)))


def parse_bursts(text: str) -> tuple[float, float, float]:
    """`EVERY:LENGTH:FACTOR` (seconds, seconds, times the rate), or `off`."""
    if text.strip().lower() in ("off", "none", "0", ""):
        return 0.0, 0.0, 1.0
    parts = text.split(":")
    try:
        every, length, factor = (float(p) for p in parts)
    except ValueError:
        raise ValueError(
            f"--bursts wants EVERY:LENGTH:FACTOR (e.g. 60:5:4) or off, not {text!r}"
        ) from None
    return every, length, factor


def rows_before(kind: str, events: int) -> int:
    """Rows of `kind` among the first `events` events."""
    blocks, rest = divmod(events, PROPORTION)
    if kind == "person":
        return blocks * PERSONS + min(rest, PERSONS)
    if kind == "auction":
        return blocks * AUCTIONS + min(max(rest - PERSONS, 0), AUCTIONS)
    return blocks * (PROPORTION - PERSONS - AUCTIONS) + max(rest - PERSONS - AUCTIONS, 0)


class Writer(Protocol):
    """What `produce` needs of `KafkaWriter`."""

    def send_many(self, topic: str, values: list[bytes | None]) -> None: ...
    def flush(self, timeout: float | None = None) -> None: ...


@dataclass
class Produced:
    """What was produced: events in all, rows per kind, seconds."""

    events: int = 0
    rows: dict[str, int] | None = None
    seconds: float = 0.0
    bursting: bool = False

    def text(self) -> str:
        rows = ", ".join(f"{k} {n:,}" for k, n in (self.rows or {}).items())
        rate = self.events / self.seconds if self.seconds > 0 else 0.0
        return f"{self.events:,} events ({rows}) in {self.seconds:.1f} s ({rate:,.0f}/s)"


def _encode(table: pa.Table) -> list[bytes | None]:
    names = table.column_names
    columns = [c.to_pylist() for c in table.columns]
    return [
        json.dumps(dict(zip(names, row, strict=True))).encode()
        for row in zip(*columns, strict=True)
    ]


class _Events:
    """The generator's events, handed out by ranges of event numbers."""

    def __init__(self, seed: int, rate: float):
        self._chunks: Iterator[NexmarkChunk] = generate(1 << 62, seed=seed, rate=rate, chunk=CHUNK)
        self._chunk: NexmarkChunk | None = None
        self._start = self._stop = 0

    def take(self, a: int, b: int) -> Iterator[tuple[str, pa.Table]]:
        """The rows of each kind of events [a, b) (a: where the last `take` stopped)."""
        while a < b:
            if a >= self._stop:
                self._chunk = next(self._chunks)
                self._start, self._stop = self._stop, self._stop + CHUNK
            assert self._chunk is not None
            end = min(b, self._stop)
            for kind in KINDS:
                first = rows_before(kind, a) - rows_before(kind, self._start)
                last = rows_before(kind, end) - rows_before(kind, self._start)
                if last > first:
                    yield kind, self._chunk.table(kind).slice(first, last - first)
            a = end


def produce(
    writer: Writer,
    schedule: Schedule,
    *,
    topics: Mapping[str, str] = DEFAULT_TOPICS,
    seed: int = 0,
    limit: int | None = None,
    seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    report: Callable[[Produced], None] | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> Produced:
    """Produce events at `schedule`'s pace until `limit` events, `seconds` seconds or `stop()`
    (Ctrl-C raises KeyboardInterrupt: what was sent is flushed first). `report` is called
    about every second with what was produced so far; the writer is flushed as often."""
    events = _Events(seed, schedule.rate)
    done = Produced(rows=dict.fromkeys(KINDS, 0))
    start = clock()
    flushed = start

    def send(target: int) -> None:
        for kind, table in events.take(done.events, target):
            writer.send_many(topics[kind], _encode(table))
            assert done.rows is not None
            done.rows[kind] += table.num_rows
        done.events = target

    try:
        while not stop():
            t = clock() - start
            if seconds is not None and t >= seconds:
                t = seconds
            target = schedule.due(t)
            if limit is not None:
                target = min(target, limit)
            if target > done.events:
                send(target)
            done.seconds, done.bursting = t, schedule.in_burst(t)
            if (limit is not None and done.events >= limit) or (
                seconds is not None and t >= seconds
            ):
                break
            if clock() - flushed >= FLUSH_S:
                writer.flush()
                flushed = clock()
                if report is not None:
                    report(done)
            sleep(TICK_S)
    finally:
        writer.flush()
    return done
