"""Generator sources: synthetic events made while the pipeline runs, instead of read from a file.

``source: {type: generator, generator: nexmark, table: bid, events: 1000000, seed: 0, rate: 10000}``
feeds the stream with the `table` events of the NEXMark generator (`io/nexmark.py`): the same
events, for the same seed and rate, as ``cq nexmark generate`` writes. Only the requested kind is
computed, so a bid stream does not pay for persons and auctions. The stream's schema picks
columns by name (and converts them to its types, as a file source does); given the `columns`
the pipeline uses, a column that is not used and is generated exactly as its Arrow type is
not converted and is NULL in every element. Record numbers are 1-based positions among the
generated events of that kind.

With ``pace: P`` the source replays in real time: event number k (counting every kind) becomes
available P events per wall-clock second after the first read of any paced source in the
process with the same seed, rate and pace; each read returns what is due (at most `batch_rows`),
sleeping until something is. A paced source generates all its events when it opens, so the
replay runs at its pace whatever the generator's own speed. `replay_time(...)` says when the
replay reached an event time.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator

import numpy as np
import pyarrow as pa

from cq_service.io.base import RawChunk, SourceError, SourceReader, register_source
from cq_service.io.nexmark import BASE_TIME_MS, GENERATE_CHUNK, SCHEMAS, generate_kind
from cq_service.io.records import RecordLayout
from cq_service.spec.model import StreamSpec

__all__ = ["NexmarkSource", "replay_start", "replay_time"]

_REPLAYS: dict[tuple[int, float, float], float] = {}  # (seed, rate, pace) -> wall start


def replay_start(seed: int, rate: float, pace: float) -> float:
    """The wall-clock start (time.perf_counter) of the paced replay, set by its first read."""
    return _REPLAYS.setdefault((seed, float(rate), float(pace)), time.perf_counter())


def replay_time(ts_ms: np.ndarray, seed: int, rate: float, pace: float) -> np.ndarray:
    """The wall-clock time (time.perf_counter) at which a paced replay made the events with
    timestamps `ts_ms` available."""
    start = replay_start(seed, rate, pace)
    return start + (np.asarray(ts_ms, dtype=np.float64) - BASE_TIME_MS) * (rate / 1000.0) / pace


@register_source("generator")
class NexmarkSource(SourceReader):
    """One kind of NEXMark events (person, auction or bid), `events` events in all."""

    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        super().__init__(stream, time_unit, batch_rows, columns)
        opts = stream.source.options
        span = stream.source.span
        if opts.get("generator") != "nexmark":
            raise SourceError(
                f"{stream.name}: unknown generator {opts.get('generator')!r} (known: nexmark)", span
            )
        kind = opts.get("table")
        if kind not in SCHEMAS:
            raise SourceError(
                f"{stream.name}: the nexmark generator has no table {kind!r} "
                f"(person, auction or bid)",
                span,
            )
        self.layout = RecordLayout(stream, time_unit, f"nexmark:{kind}")
        missing = [c for c in self.layout.required if c not in SCHEMAS[kind]]
        if missing:
            raise SourceError(
                f"{stream.name}: nexmark {kind} has no column(s) {', '.join(map(repr, missing))} "
                f"(it has: {', '.join(SCHEMAS[kind])})",
                span,
            )
        self.seed = int(opts.get("seed", 0))
        self.rate = float(opts.get("rate", 10_000))
        self.pace = float(opts["pace"]) if opts.get("pace") else None
        # Generated in the chunks `cq nexmark generate` uses (the events depend on them), handed
        # over in slices of at most `batch_rows`. A paced replay generates everything up front,
        # before the replay's clock starts: latency then measures the engine, not the generator.
        self._tables: Iterator[pa.Table] = generate_kind(
            kind, int(opts["events"]), seed=self.seed, rate=self.rate, chunk=GENERATE_CHUNK
        )
        if self.pace is not None:
            self._tables = iter(list(self._tables))
        self._pending: pa.Table | None = None
        self._next_row = 0
        self._read: list[str] | None = None  # the columns read: needed, and not left unread

    def _next_table(self) -> pa.Table | None:
        if self._pending is None or self._pending.num_rows == 0:
            self._pending = next(self._tables, None)
            if self._pending is None:
                return None
        if self.pace is None:
            out = self._pending.slice(0, self.batch_rows)
            self._pending = self._pending.slice(self.batch_rows)
            return out
        # Release what is due now (at least one event: wait for it).
        event_ts = self._pending.column("dateTime").to_numpy()
        due = replay_time(event_ts[:1], self.seed, self.rate, self.pace)[0]
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
            now = time.perf_counter()
        limit = min(len(event_ts), self.batch_rows)
        times = replay_time(event_ts[:limit], self.seed, self.rate, self.pace)
        n = max(1, int(np.searchsorted(times, now, side="right")))
        out, self._pending = self._pending.slice(0, n), self._pending.slice(n)
        return out

    def read(self) -> RawChunk | None:
        while (table := self._next_table()) is not None:
            n = table.num_rows
            if n == 0:
                continue
            first = self._next_row
            self._next_row += n
            positions = np.arange(first, first + n, dtype=np.int64)
            if self._read is None:  # every table of a kind has the same schema
                types = {f.name: f.type for f in table.schema}
                unread = self.layout.unread(self.columns_used, types)
                self._read = [c for c in self.layout.needed if c in types and c not in unread]
            values = {c: table.column(c) for c in self._read}
            return self.layout.assemble(
                values, n, positions + 1, positions, lambda i, t=table: str(t.slice(i, 1).to_pylist()[0])
            )
        return None
