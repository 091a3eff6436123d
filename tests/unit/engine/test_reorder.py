"""Partitioned sources (Kafka): skew bounded per partition, the source's own heartbeats, and
lateness against a heartbeat already released."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.engine.batch import Batch
from cq_service.engine.operators.source import SourceOperator
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.engine.reorder import NONE, Reorderer
from cq_service.types import DataType


@dataclass
class Chunk:
    columns: tuple[pa.Array, ...]
    ts: np.ndarray
    ops: np.ndarray
    record: np.ndarray
    dead: list[Any] = field(default_factory=list)
    partition: np.ndarray | None = None
    heartbeat: int | None = None


def chunk(elems: list[tuple[int, int]], heartbeat: int | None = None) -> Chunk:
    """elems: (partition, ts) in arrival order; the value is the timestamp."""
    ts = np.array([t for _, t in elems], dtype=np.int64)
    return Chunk(
        (pa.array(ts, type=pa.int64()),),
        ts,
        np.ones(len(elems), dtype=np.int8),
        np.arange(len(elems), dtype=np.int64),
        partition=np.array([p for p, _ in elems], dtype=np.int32),
        heartbeat=heartbeat,
    )


class Reader:
    def __init__(self, chunks: list[Chunk]):
        self.chunks = list(chunks)

    def read(self) -> Chunk | None:
        return self.chunks.pop(0) if self.chunks else None


class Lates:
    def __init__(self) -> None:
        self.items: list[tuple[int, str]] = []

    def dead(self, records: list[Any]) -> None:
        pass

    def late(self, source: str, rows: list[tuple], ts: list[int], reason: list[str]) -> None:
        self.items.extend(zip(ts, reason))


def run(chunks: list[Chunk], max_delay: int) -> tuple[list[int], list[int], Lates]:
    """Released timestamps, heartbeats, and the late elements with their reasons."""
    q = Queue("out")
    reader = q.reader()
    lates = Lates()
    op = SourceOperator(
        "S",
        q,
        Reader(chunks),
        max_delay=max_delay,
        late_policy="dead_letter",
        dead_letters=lates,
        column_names=["t"],
    )
    op.out_types = [DataType.INT]
    while op.runnable():
        op.run(1 << 20)
    released, beats = [], []
    while (item := reader.get()) is not None:
        if isinstance(item, Heartbeat):
            beats.append(item.ts)
        else:
            released.extend(item.ts.tolist())
    return released, beats, lates


def test_skew_is_bounded_per_partition():
    r = Reorderer(5)
    ts = np.array([100, 10, 101, 12, 4], dtype=np.int64)
    parts = np.array([0, 1, 0, 1, 1], dtype=np.int32)
    late, before, _ = r.late_mask(ts, None, parts)
    # 10 is not late although 100 came before it: another partition's; 4 < 12 - 5 is.
    assert late.tolist() == [False, False, False, False, True]
    assert before.tolist() == [NONE, NONE, 100, 10, 12]
    assert r.partitioned and r.partition_max(0) == 101 and r.partition_max(1) == 12
    assert r.max_seen == 101


def test_partitioned_watermark_is_the_sources_heartbeat():
    r = Reorderer(5)
    r.late_mask(np.array([100, 10], dtype=np.int64), None, np.array([0, 1]))
    assert r.watermark == NONE  # no stream-wide skew bound: only the source knows its partitions
    r.advance(4)
    r.advance(2)  # never goes back
    assert r.watermark == 4


def test_at_or_below_a_released_heartbeat_is_late():
    r = Reorderer(100)
    parts = np.array([0], dtype=np.int32)
    r.late_mask(np.array([50], dtype=np.int64), None, parts)
    r.advance(40)
    released = r.push(Batch((pa.array([50]),), np.array([50]), np.array([1])))
    assert released is None and r.passed == 40
    late, _, _ = r.late_mask(np.array([40, 41], dtype=np.int64), None, np.array([1, 1]))
    assert late.tolist() == [True, False]


def test_unpartitioned_behaviour_is_unchanged():
    r = Reorderer(3)
    late, before, _ = r.late_mask(np.array([10, 8, 6, 12, 8], dtype=np.int64))
    assert late.tolist() == [False, False, True, False, True]
    assert before.tolist() == [NONE, 10, 10, 10, 12]
    assert not r.partitioned and r.watermark == 8


def test_source_operator_with_partitions_and_heartbeats():
    chunks = [
        chunk([(0, 100), (0, 101)]),  # partition 1 has not delivered yet: nothing released
        chunk([(1, 10), (1, 12), (1, 5)], heartbeat=6),  # 5 is within partition 1's bound
        chunk([(1, 15), (1, 6)]),  # 6 is within its partition's bound, but 6 was released
    ]
    released, beats, lates = run(chunks, max_delay=10)
    assert released == [5, 10, 12, 15, 100, 101]
    assert beats == [6, 101]
    assert [t for t, _ in lates.items] == [6]
    assert "heartbeat already passed" in lates.items[0][1]


def test_source_operator_reason_names_the_partition():
    _, _, lates = run([chunk([(3, 50), (3, 30)])], max_delay=10)
    assert lates.items == [
        (
            30,
            "late: timestamp 30 is more than max_delay 10 before the latest timestamp seen in "
            "partition 3 (50)",
        )
    ]


def test_in_order_batches_take_the_short_path_with_the_same_answers() -> None:
    """A batch in timestamp order from at least every bound skips the general computation;
    whatever path a batch takes, its late elements, `before`, `promised` and the state after
    are the general computation's."""
    rng = np.random.default_rng(5)
    took: list[bool] = []
    for _ in range(300):
        delay = int(rng.integers(0, 4))
        fast, slow = Reorderer(delay), Reorderer(delay)
        seen = NONE if rng.random() < 0.2 else int(rng.integers(0, 20))
        promised = NONE if rng.random() < 0.5 else int(rng.integers(0, 20))
        passed = NONE if rng.random() < 0.5 else int(rng.integers(0, 20))
        for r in (fast, slow):
            r.max_seen, r.promised, r.passed = seen, promised, passed
        short = fast._in_order
        fast._in_order = lambda ts, short=short: (got := short(ts), took.append(got is not None))[0]
        for _ in range(3):
            ts = rng.integers(0, 30, int(rng.integers(1, 8))).astype(np.int64)
            if rng.random() < 0.7:
                ts.sort()
            got = fast.late_mask(ts)
            want = slow._late_mask(ts, None, None)
            late = want[0]
            assert got[0].tolist() == late.tolist()
            assert got[1].tolist() == want[1].tolist()
            assert got[2].tolist() == want[2].tolist()
            assert fast.max_seen == slow.max_seen and fast.promised == slow.promised
    assert sum(took) > 100 and not all(took)  # both paths taken
