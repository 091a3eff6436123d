"""Queues: several readers, items freed only once every reader has passed them, memory counters."""

from __future__ import annotations

from cq_service.engine.batch import Batch
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType

INT = DataType.INT


def batch(*values: int, t: int = 0) -> Batch:
    return Batch.from_rows([(v,) for v in values], [t] * len(values), [1] * len(values), [INT])


def drain(reader) -> list:
    out = []
    while (item := reader.get()) is not None:
        out.append(item)
    return out


def test_single_reader_fifo_with_heartbeats():
    q = Queue("q")
    r = q.reader()
    b1, b2 = batch(1, 2), batch(3, t=5)
    for item in (b1, Heartbeat(4), b2, Heartbeat(5)):
        q.push(item)
    assert r.pending() == 4
    assert drain(r) == [b1, Heartbeat(4), b2, Heartbeat(5)]
    assert r.pending() == 0
    assert r.get() is None
    assert len(q) == 0 and q.rows == 0 and q.bytes == 0


def test_push_without_readers_is_dropped():
    q = Queue("q")
    q.push(batch(1, 2, 3))
    assert len(q) == 0
    assert q.rows == 0 and q.total_rows == 0


def test_reader_sees_only_items_pushed_after_it_joined():
    q = Queue("q")
    first = q.reader()
    q.push(batch(1))
    late = q.reader()
    q.push(batch(2))
    assert [b.rows() for b in drain(first)] == [[(1,)], [(2,)]]
    assert [b.rows() for b in drain(late)] == [[(2,)]]


def test_every_reader_sees_every_item_in_order():
    q = Queue("q")
    readers = [q.reader() for _ in range(3)]
    items = [batch(1), Heartbeat(0), batch(2, t=1), Heartbeat(1)]
    for item in items:
        q.push(item)
    for r in readers:
        assert drain(r) == items


def test_items_freed_only_when_all_readers_passed():
    q = Queue("q")
    a, b = q.reader(), q.reader()
    b1, b2 = batch(1, 2), batch(3, 4, 5, t=1)
    q.push(b1)
    q.push(b2)
    assert (len(q), q.rows) == (2, 5)
    assert a.get() is b1
    assert (len(q), q.rows) == (2, 5)  # b has not read b1 yet
    assert a.get() is b2
    assert (len(q), q.rows) == (2, 5)
    assert b.get() is b1
    assert (len(q), q.rows) == (1, 3)
    assert b.pending() == 1 and a.pending() == 0
    assert b.get() is b2
    assert (len(q), q.rows, q.bytes) == (0, 0, 0)


def test_slow_reader_holds_items_for_everyone():
    q = Queue("q")
    fast, slow = q.reader(), q.reader()
    for k in range(10):
        q.push(batch(k, t=k))
        assert fast.get() is not None
    assert len(q) == 10 and q.rows == 10
    drain(slow)
    assert len(q) == 0 and q.rows == 0


def test_memory_counters_and_peaks():
    q = Queue("q")
    r = q.reader()
    b1, b2, b3 = batch(1, 2), batch(3, 4, 5), batch(6)
    q.push(b1)
    q.push(Heartbeat(0))
    q.push(b2)
    assert q.rows == 5
    assert q.bytes == b1.nbytes() + b2.nbytes()
    peak_bytes = q.bytes
    drain(r)
    assert q.rows == 0 and q.bytes == 0
    q.push(b3)
    assert q.rows == 1 and q.bytes == b3.nbytes()
    assert q.peak_rows == 5
    assert q.peak_bytes == peak_bytes
    assert q.total_rows == 6


def test_memory_counted_once_however_many_readers():
    q = Queue("q")
    readers = [q.reader() for _ in range(4)]
    b = batch(1, 2, 3)
    q.push(b)
    assert q.rows == 3 and q.bytes == b.nbytes()
    for r in readers[:3]:
        r.get()
    assert q.rows == 3
    readers[3].get()
    assert q.rows == 0 and q.peak_rows == 3


def test_heartbeats_count_no_rows():
    q = Queue("q")
    r = q.reader()
    q.push(Heartbeat(1))
    q.push(Heartbeat(2))
    assert q.rows == 0 and q.bytes == 0 and q.total_rows == 0
    assert len(q) == 2
    assert drain(r) == [Heartbeat(1), Heartbeat(2)]
