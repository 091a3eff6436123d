"""Stream and relation sources: read chunks, reorder within the skew bound, route bad input.

A source reads from a chunk reader (io supplies it) whose chunks carry typed columns,
timestamps, ``+1``/``−1`` ops and record numbers, plus the malformed records it found. Late
elements follow the stream's `late` policy; relations also refuse deletions of tuples that are
not there. Nothing is dropped without being counted. A partitioned source (Kafka) bounds skew
per partition and gives the stream's heartbeat itself (see `engine.reorder`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import unique_sorted
from cq_service.engine.operators.base import NEVER, Operator
from cq_service.engine.queues import Queue
from cq_service.engine.reorder import Reorderer

__all__ = ["ChunkReader", "DeadLetters", "SourceOperator"]


class ChunkReader(Protocol):
    def read(self) -> Any | None:
        """The next chunk (attributes columns, ts, ops, record, dead; optionally partition
        and heartbeat, see `Reorderer`) or None at the end."""


class DeadLetters(Protocol):
    def dead(self, records: list[Any]) -> None: ...

    def late(self, source: str, rows: list[tuple], ts: list[int], reason: list[str]) -> None: ...


class SourceOperator(Operator):
    is_source = True
    kind = "source"
    STRUCTURE = frozenset(
        {"reader", "dead_letters", "_on_close", "late_count", "malformed_count"}
    )

    def __init__(
        self,
        name: str,
        output: Queue,
        reader: ChunkReader,
        *,
        is_relation: bool = False,
        max_delay: int = 0,
        late_policy: str = "drop",
        dead_letters: DeadLetters | None = None,
        column_names: list[str] | None = None,
        heartbeat: tuple[int, int] | None = None,
        on_close: Callable[[], None] | None = None,
    ):
        """`heartbeat` (column index, offset): each element's column + offset is a heartbeat
        (no later element has a smaller timestamp); NULLs promise nothing."""
        super().__init__(name, [], output)
        self.reader = reader
        self.is_relation = is_relation
        self.late_policy = late_policy
        self.dead_letters = dead_letters
        self.column_names = column_names or []
        self.reorder = Reorderer(max_delay)
        self.first_seen = NEVER  # the smallest timestamp of the first chunk with elements
        self.heartbeat = heartbeat
        self.exhausted = False
        self.late_count = 0
        self.malformed_count = 0
        self._relation: Counter[tuple] | None = Counter() if is_relation else None
        self._on_close = on_close

    def describe(self) -> str:
        return f"{'relation' if self.is_relation else 'stream'} source {self.name}"

    def runnable(self) -> bool:
        return not self.exhausted and self.output.rows < self.high_water

    def state_size(self) -> tuple[int, int]:
        rows = self.reorder.rows + (len(self._relation) if self._relation is not None else 0)
        return rows, self.reorder.nbytes

    @property
    def max_seen(self) -> int:
        return int(self.reorder.max_seen)

    def run(self, budget: int) -> int:
        if self.exhausted:
            return 0
        chunk = self.reader.read()
        # Stamp: when the chunk arrived (RawChunk.arrived, when the reader knows), else now.
        self.stamp = getattr(chunk, "arrived", None) or time.perf_counter()
        if chunk is None:
            self.exhausted = True
            self._emit(self.reorder.flush())
            if self.reorder.max_seen != NEVER:
                self.emit_heartbeat(int(self.reorder.max_seen))
            if self._on_close is not None:
                self._on_close()
            return 1
        if chunk.dead:
            self.malformed_count += len(chunk.dead)
            if self.dead_letters is not None:
                self.dead_letters.dead(list(chunk.dead))
        ts = np.asarray(chunk.ts, dtype=np.int64)
        if self.first_seen == NEVER and len(ts):
            self.first_seen = int(ts.min())
        w = np.asarray(chunk.ops, dtype=np.int64)
        batch = Batch(tuple(chunk.columns), ts, w)
        self.rows_in += len(batch)
        partition = getattr(chunk, "partition", None)
        late, before, promised = self.reorder.late_mask(ts, self._promises(batch), partition)
        if late.any():
            parts = None if partition is None else np.asarray(partition)[late]
            self._late(batch.filter(late), before[late], promised[late], parts)
            batch = batch.filter(~late)
        heartbeat = getattr(chunk, "heartbeat", None)
        if heartbeat is not None:
            self.reorder.advance(heartbeat)
        self._emit(self.reorder.push(batch))
        wm = self.reorder.watermark
        if self.reorder.max_seen != NEVER or heartbeat is not None:
            self.emit_heartbeat(wm)
        return max(1, len(ts))

    def follow_clock(self, clock: int) -> None:
        """After the end of input: move this source's heartbeat along with the pipeline's
        clock (never past the end of the whole pipeline's input)."""
        if self.exhausted:
            self.stamp = time.perf_counter()
            self.emit_heartbeat(max(clock, self.max_seen))

    @property
    def follows_clock(self) -> bool:
        """A live source whose time moves with the other sources' (a stored relation)."""
        return bool(getattr(self.reader, "follows_clock", False))

    def follow_live(self, clock: int) -> None:
        """Move a live follower's time to `clock`: what it holds up to there is released, and
        an update it reads later at or below `clock` is late."""
        if clock == NEVER or clock <= self.watermark:
            return
        self.stamp = time.perf_counter()
        self.reorder.promised = max(int(self.reorder.promised), clock + 1)
        self._emit(self.reorder.push(self.empty()))
        self.emit_heartbeat(self.reorder.watermark)

    def relation_content(self) -> list[tuple[tuple, int]]:
        """A relation source's tuples with their multiplicities, as of its last heartbeat."""
        return list(self._relation.items()) if self._relation is not None else []

    def _promises(self, batch: Batch) -> np.ndarray | None:
        if self.heartbeat is None or len(batch) == 0:
            return None
        index, offset = self.heartbeat
        col = batch.columns[index]
        values = np.asarray(pc.fill_null(col.cast(pa.int64()), NEVER).to_numpy(), dtype=np.int64)
        return np.where(values == NEVER, NEVER, values + offset)

    def _late(
        self,
        late: Batch,
        latest: np.ndarray,
        promised: np.ndarray,
        partitions: np.ndarray | None = None,
    ) -> None:
        self.late_count += len(late)
        if self.late_policy == "dead_letter" and self.dead_letters is not None:
            bound = self.reorder.max_delay
            passed = self.reorder.passed
            reasons = []
            for i, (t, m, p) in enumerate(zip(late.ts, latest, promised)):
                if t < p:
                    reasons.append(
                        f"late: timestamp {int(t)} is below {int(p)}, the heartbeat an earlier "
                        f"record promised (heartbeat field + offset)"
                    )
                elif m != NEVER and t < m - bound:
                    where = "" if partitions is None else f" in partition {int(partitions[i])}"
                    reasons.append(
                        f"late: timestamp {int(t)} is more than max_delay {bound} before the "
                        f"latest timestamp seen{where} ({int(m)})"
                    )
                else:
                    reasons.append(
                        f"late: timestamp {int(t)} is at or below {int(passed)}, the stream's "
                        f"heartbeat already passed (its other partitions were ahead while this "
                        f"one was idle)"
                    )
            self.dead_letters.late(self.name, late.rows(), [int(t) for t in late.ts], reasons)

    def _emit(self, batch: Batch | None) -> None:
        if batch is None or len(batch) == 0:
            return
        if self._relation is not None:
            batch = self._check_relation(batch)
        self.emit(batch.with_ticks(unique_sorted(batch.ts)))

    def _check_relation(self, batch: Batch) -> Batch:
        """Apply updates to the relation's multiset; a deletion of an absent tuple is bad input."""
        state = self._relation
        assert state is not None
        rows = batch.rows()
        ok = np.ones(len(rows), dtype=bool)
        bad: list[int] = []
        for i, (row, w) in enumerate(zip(rows, batch.w.tolist())):
            if w > 0:
                state[row] += w
            elif state[row] >= -w:
                state[row] += w
                if state[row] == 0:
                    del state[row]
            else:
                ok[i] = False
                bad.append(i)
        if bad:
            self.malformed_count += len(bad)
            if self.dead_letters is not None:
                self.dead_letters.late(
                    self.name,
                    [rows[i] for i in bad],
                    [int(batch.ts[i]) for i in bad],
                    ["deletion of a tuple that is not in the relation"] * len(bad),
                )
            batch = batch.filter(ok)
        return batch
