"""Reorderer and SourceOperator: ordering within max_delay, late elements, relation checks,
heartbeats, and following the pipeline clock after the end of input."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.engine.batch import Batch
from cq_service.engine.operators.source import SourceOperator
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.engine.reorder import Reorderer
from cq_service.types import DataType

INT = DataType.INT


@dataclass
class Chunk:
    columns: tuple[pa.Array, ...]
    ts: np.ndarray
    ops: np.ndarray
    record: np.ndarray
    dead: list[Any] = field(default_factory=list)


def chunk(elems: list[tuple[int, int]], ops: list[int] | None = None, dead=()) -> Chunk:
    """elems: (ts, value) in arrival order."""
    n = len(elems)
    return Chunk(
        (pa.array([v for _, v in elems], type=pa.int64()),),
        np.array([t for t, _ in elems], dtype=np.int64),
        np.array(ops if ops is not None else [1] * n, dtype=np.int8),
        np.arange(n, dtype=np.int64),
        list(dead),
    )


class FakeReader:
    def __init__(self, chunks: list[Chunk]):
        self.chunks = list(chunks)

    def read(self) -> Chunk | None:
        return self.chunks.pop(0) if self.chunks else None


class FakeDeadLetters:
    def __init__(self) -> None:
        self.records: list[Any] = []
        self.lates: list[tuple[str, tuple, int, str]] = []

    def dead(self, records: list[Any]) -> None:
        self.records.extend(records)

    def late(self, source: str, rows: list[tuple], ts: list[int], reason: list[str]) -> None:
        self.lates.extend(zip([source] * len(rows), rows, ts, reason))


@dataclass
class Output:
    elements: list[tuple[int, int, tuple]]  # (ts, weight, row)
    heartbeats: list[int]
    ticks: list[int]
    items: list[Any]


def read_all(reader) -> Output:
    out = Output([], [], [], [])
    while (item := reader.get()) is not None:
        out.items.append(item)
        if isinstance(item, Heartbeat):
            out.heartbeats.append(item.ts)
        else:
            out.elements.extend(zip(item.ts.tolist(), item.w.tolist(), item.rows()))
            out.ticks.extend(item.ticks.tolist())
    return out


def source(chunks, **kw) -> tuple[SourceOperator, Any]:
    q = Queue("out")
    r = q.reader()
    op = SourceOperator("S", q, FakeReader(chunks), column_names=["x"], **kw)
    op.out_types = [INT]
    return op, r


def run_to_end(op: SourceOperator) -> None:
    for _ in range(1000):
        if not op.runnable():
            return
        op.run(1 << 20)
    raise AssertionError("source never finished")


def stream_values(out: Output) -> list[tuple[int, int]]:
    return [(t, row[0]) for t, _, row in out.elements]


# -- Reorderer --------------------------------------------------------------------------------


def rbatch(elems: list[tuple[int, int]]) -> Batch:
    return Batch.from_rows([(v,) for _, v in elems], [t for t, _ in elems], [1] * len(elems), [INT])


def pairs(b: Batch | None) -> list[tuple[int, int]]:
    return [] if b is None else [(t, r[0]) for t, r in zip(b.ts.tolist(), b.rows())]


def test_reorderer_in_order_with_zero_delay_releases_all_but_the_last_instant():
    r = Reorderer(0)
    late, _, _ = r.late_mask(np.array([1, 2, 2, 3], dtype=np.int64))
    assert not late.any()
    out = r.push(rbatch([(1, 10), (2, 20), (2, 21), (3, 30)]))
    assert pairs(out) == [(1, 10), (2, 20), (2, 21)]
    assert r.watermark == 2
    assert pairs(r.flush()) == [(3, 30)]


def test_reorderer_sorts_within_max_delay_stably():
    r = Reorderer(3)
    elems = [(5, 1), (3, 2), (5, 3), (4, 4), (3, 5), (2, 6)]
    late, _, _ = r.late_mask(np.array([t for t, _ in elems], dtype=np.int64))
    assert not late.any()
    assert pairs(r.push(rbatch(elems))) == []  # watermark 5 - 3 - 1 = 1
    assert r.watermark == 1
    assert pairs(r.flush()) == [(2, 6), (3, 2), (3, 5), (4, 4), (5, 1), (5, 3)]


def test_reorderer_late_mask_uses_the_running_maximum():
    r = Reorderer(2)
    late, latest, _ = r.late_mask(np.array([10, 8, 7, 12, 9, 10], dtype=np.int64))
    # 7 < 10 - 2 is late; 9 < 12 - 2 is late; 8 and 10 are within the bound.
    assert late.tolist() == [False, False, True, False, True, False]
    assert latest.tolist()[1:] == [10, 10, 10, 12, 12]  # the latest before each element
    assert r.max_seen == 12
    # The maximum carries over to the next call.
    late, latest, _ = r.late_mask(np.array([9, 10], dtype=np.int64))
    assert late.tolist() == [True, False]
    assert latest.tolist() == [12, 12]


def test_reorderer_across_pushes():
    r = Reorderer(1)

    def push(elems):
        late, _, _ = r.late_mask(np.array([t for t, _ in elems], dtype=np.int64))
        assert not late.any()
        return pairs(r.push(rbatch(elems)))

    assert push([(3, 1)]) == []
    assert push([(2, 2), (5, 3)]) == [(2, 2), (3, 1)]
    assert push([(4, 4)]) == []
    assert pairs(r.flush()) == [(4, 4), (5, 3)]


# -- SourceOperator ---------------------------------------------------------------------------


def test_source_in_order_stream():
    op, r = source([chunk([(1, 10), (1, 11), (2, 20)]), chunk([(4, 40)])])
    run_to_end(op)
    out = read_all(r)
    assert stream_values(out) == [(1, 10), (1, 11), (2, 20), (4, 40)]
    assert all(w == 1 for _, w, _ in out.elements)
    assert sorted(set(out.ticks)) == [1, 2, 4]
    assert out.heartbeats == sorted(out.heartbeats)
    assert out.heartbeats[-1] == 4
    assert op.exhausted and op.late_count == 0 and op.rows_in == 4


def test_source_heartbeats_never_precede_their_elements():
    """A heartbeat at τ promises nothing ≤ τ follows on the queue."""
    op, r = source([chunk([(1, 1)]), chunk([(3, 3), (3, 4)]), chunk([(7, 7)])], max_delay=1)
    run_to_end(op)
    out = read_all(r)
    mark = None
    for item in out.items:
        if isinstance(item, Heartbeat):
            assert mark is None or item.ts > mark
            mark = item.ts
        elif mark is not None:
            assert int(item.ts.min()) > mark
        if not isinstance(item, Heartbeat):
            assert item.ts.tolist() == sorted(item.ts.tolist())
    assert stream_values(out) == [(1, 1), (3, 3), (3, 4), (7, 7)]


def test_source_reorders_within_max_delay_stably():
    op, r = source(
        [chunk([(5, 1), (3, 2), (5, 3)]), chunk([(4, 4), (3, 5), (6, 6)])], max_delay=2
    )
    run_to_end(op)
    out = read_all(r)
    assert stream_values(out) == [(3, 2), (3, 5), (4, 4), (5, 1), (5, 3), (6, 6)]
    assert op.late_count == 0


def test_source_late_elements_dropped_and_counted():
    dl = FakeDeadLetters()
    op, r = source(
        [chunk([(10, 1), (9, 2), (7, 3)]), chunk([(8, 4), (12, 5), (9, 6)])],
        max_delay=1,
        dead_letters=dl,
    )
    run_to_end(op)
    out = read_all(r)
    # 7 < 10 - 1 late; 8 < 10 - 1 late; 9 < 12 - 1 late.
    assert stream_values(out) == [(9, 2), (10, 1), (12, 5)]
    assert op.late_count == 3
    assert dl.lates == []  # policy drop: counted only


def test_source_late_elements_dead_lettered_with_reasons():
    dl = FakeDeadLetters()
    op, r = source(
        [chunk([(10, 1), (7, 2)]), chunk([(5, 3), (11, 4)])],
        max_delay=2,
        late_policy="dead_letter",
        dead_letters=dl,
    )
    run_to_end(op)
    out = read_all(r)
    assert stream_values(out) == [(10, 1), (11, 4)]
    assert op.late_count == 2
    assert [(s, row, t) for s, row, t, _ in dl.lates] == [("S", (2,), 7), ("S", (3,), 5)]
    for _, _, t, reason in dl.lates:
        assert reason.startswith("late")
        assert f"timestamp {t} " in reason and "max_delay 2" in reason
    # The latest timestamp seen when each late element arrived was 10 (11 came after 5).
    assert all("(10)" in reason for *_, reason in dl.lates), [r for *_, r in dl.lates]


def test_dead_letters_do_not_depend_on_chunking():
    elems = [(10, 1), (7, 2), (12, 3), (9, 4), (11, 5), (20, 6), (8, 7)]

    def run(chunks):
        dl = FakeDeadLetters()
        op, r = source(chunks, max_delay=2, late_policy="dead_letter", dead_letters=dl)
        run_to_end(op)
        return stream_values(read_all(r)), dl.lates

    whole = run([chunk(elems)])
    one_by_one = run([chunk([e]) for e in elems])
    assert whole[0] == one_by_one[0] == [(10, 1), (11, 5), (12, 3), (20, 6)]
    assert whole[1] == one_by_one[1]


def test_source_malformed_records_counted_and_forwarded():
    dl = FakeDeadLetters()
    op, r = source([chunk([(1, 1)], dead=["bad line 2", "bad line 3"])], dead_letters=dl)
    run_to_end(op)
    assert op.malformed_count == 2
    assert dl.records == ["bad line 2", "bad line 3"]
    assert stream_values(read_all(r)) == [(1, 1)]


def test_relation_updates_and_deletes_of_absent_tuples_rejected():
    dl = FakeDeadLetters()
    op, r = source(
        [
            chunk([(1, 5), (1, 5), (2, 5), (2, 6)], ops=[1, 1, -1, -1]),
            chunk([(3, 5), (3, 5), (4, 7)], ops=[-1, -1, 1]),
        ],
        is_relation=True,
        dead_letters=dl,
    )
    run_to_end(op)
    out = read_all(r)
    assert out.elements == [
        (1, 1, (5,)),
        (1, 1, (5,)),
        (2, -1, (5,)),
        (3, -1, (5,)),
        (4, 1, (7,)),
    ]
    assert op.malformed_count == 2
    assert [(row, t) for _, row, t, _ in dl.lates] == [((6,), 2), ((5,), 3)]
    assert all("not in the relation" in reason for *_, reason in dl.lates)


def test_relation_delete_after_insert_in_same_instant_is_accepted():
    op, r = source([chunk([(1, 5), (1, 5)], ops=[1, -1])], is_relation=True)
    run_to_end(op)
    assert op.malformed_count == 0
    assert read_all(r).elements == [(1, 1, (5,)), (1, -1, (5,))]


def test_source_heartbeat_at_watermark_after_each_chunk():
    op, r = source([chunk([(4, 1)]), chunk([(9, 2)])], max_delay=2)
    op.run(1 << 20)
    assert read_all(r).heartbeats == [1]  # 4 - 2 - 1
    op.run(1 << 20)
    out = read_all(r)
    assert out.heartbeats == [6]
    assert stream_values(out) == [(4, 1)]
    op.run(1 << 20)  # end of input: flush and heartbeat at the largest timestamp
    out = read_all(r)
    assert stream_values(out) == [(9, 2)]
    assert out.heartbeats == [9]
    assert op.exhausted and not op.runnable()


def test_empty_source_emits_nothing():
    closed = []
    q = Queue("out")
    r = q.reader()
    op = SourceOperator("S", q, FakeReader([]), on_close=lambda: closed.append(True))
    op.out_types = [INT]
    run_to_end(op)
    out = read_all(r)
    assert out.items == []
    assert closed == [True]
    op.follow_clock(5)  # an exhausted, empty source still follows the pipeline clock
    assert read_all(r).heartbeats == [5]


def test_follow_clock_only_after_exhaustion_and_never_backwards():
    op, r = source([chunk([(3, 1)])])
    op.follow_clock(10)
    assert read_all(r).heartbeats == []  # not exhausted: ignored
    run_to_end(op)
    assert read_all(r).heartbeats[-1] == 3
    op.follow_clock(8)
    op.follow_clock(6)
    op.follow_clock(1)
    assert read_all(r).heartbeats == [8]


def test_source_state_size_counts_held_back_elements():
    op, _ = source([chunk([(1, 1), (2, 2), (3, 3)])], max_delay=5)
    op.run(1 << 20)
    rows, nbytes = op.state_size()
    assert rows == 3 and nbytes > 0


# -- heartbeats carried by the records ----------------------------------------------------------


def test_reorderer_record_heartbeats_release_before_max_delay_and_mark_breakers_late():
    r = Reorderer(100)
    ts = np.array([12, 15, 13, 14], dtype=np.int64)
    promises = np.array([12, 13, 13, 11], dtype=np.int64)  # field + offset of each record
    late, _, promised = r.late_mask(ts, promises)
    assert not late.any()  # 13 is not below 13, the promise made before it
    assert promised.tolist()[1:] == [12, 13, 13]
    # Without the promise max_delay 100 would hold everything back; with it, up to 12.
    assert r.watermark == 12
    assert pairs(r.push(rbatch([(12, 1), (15, 2), (13, 3), (14, 4)]))) == [(12, 1)]
    late, _, promised = r.late_mask(np.array([12, 16], dtype=np.int64), None)
    assert late.tolist() == [True, False] and promised.tolist() == [13, 13]


def test_source_heartbeat_field_releases_early_and_dead_letters_breakers():
    dl = FakeDeadLetters()
    # x is the heartbeat field: each record promises no later timestamp below x + 2.
    op, r = source(
        [chunk([(12, 10), (15, 11), (13, 11)]), chunk([(12, 9), (16, 14)])],
        max_delay=100,
        late_policy="dead_letter",
        dead_letters=dl,
        heartbeat=(0, 2),
    )
    op.run(1 << 20)
    first = read_all(r)
    assert stream_values(first) == [(12, 10)]  # released by the promise, not by max_delay
    assert first.heartbeats == [12]
    run_to_end(op)
    rest = read_all(r)
    assert stream_values(rest) == [(13, 11), (15, 11), (16, 14)]
    assert op.late_count == 1
    [(_, row, t, reason)] = dl.lates
    assert (row, t) == ((9,), 12)
    assert "below 13" in reason and "heartbeat" in reason


def test_source_null_heartbeat_field_promises_nothing():
    q = Queue("out")
    reader = q.reader()
    c = Chunk(
        (pa.array([None, None], type=pa.int64()),),
        np.array([5, 3], dtype=np.int64),
        np.ones(2, dtype=np.int8),
        np.arange(2, dtype=np.int64),
    )
    op = SourceOperator("S", q, FakeReader([c]), column_names=["x"], max_delay=10, heartbeat=(0, 0))
    op.out_types = [INT]
    run_to_end(op)
    assert stream_values(read_all(reader)) == [(3, None), (5, None)]
    assert op.late_count == 0
