"""Distinct, SetOperation (all six variants), Istream / Dstream / Rstream, ViewBoundary and
SinkOperator (with a fake writer)."""

from __future__ import annotations

from collections import Counter
from itertools import product

import numpy as np
import pytest

from cq_service.engine.batch import Batch
from cq_service.engine.operators.distinct import Distinct
from cq_service.engine.operators.dstream import Dstream
from cq_service.engine.operators.istream import Istream
from cq_service.engine.operators.rstream import Rstream
from cq_service.engine.operators.set_operation import SetOperation
from cq_service.engine.operators.sink import SinkOperator
from cq_service.engine.operators.view import ViewBoundary
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch, relation_at

INT, STR = DataType.INT, DataType.STRING
TYPES = [INT, STR]
A, Bb, C, N = (1, "a"), (2, "b"), (3, "c"), (None, None)


def B(*elems: tuple, ticks: tuple[int, ...] = ()) -> Batch:
    return make_batch(TYPES, elems, ticks)


class Run:
    """An operator with its input queues; `feed(port, items)` pushes, `go()` runs and reads."""

    def __init__(self, make, ports: int = 1):
        self.queues = [Queue(f"in{p}") for p in range(ports)]
        out = Queue("out")
        self.reader = out.reader()
        self.op = make("op", [q.reader() for q in self.queues], out)
        self.op.out_types = list(TYPES)
        self.elements: list[tuple[int, tuple, int]] = []
        self.batches: list[Batch] = []
        self.ticks: set[int] = set()
        self.heartbeats: list[int] = []

    def feed(self, *items, port: int = 0) -> Run:
        for it in items:
            self.queues[port].push(Heartbeat(it) if isinstance(it, int) else it)
        return self

    def go(self) -> Run:
        while self.op.runnable():
            self.op.run(1 << 20)
        while (item := self.reader.get()) is not None:
            if isinstance(item, Heartbeat):
                self.heartbeats.append(item.ts)
            else:
                self.batches.append(item)
                self.elements.extend(zip(item.ts.tolist(), item.rows(), item.w.tolist()))
                self.ticks.update(item.ticks.tolist())
        ts = [e[0] for e in self.elements]
        assert ts == sorted(ts)
        return self

    def at(self, t: int) -> Counter:
        return relation_at(self.elements, t)


# -- Distinct ---------------------------------------------------------------------------------


def test_distinct_each_row_once_while_present():
    r = Run(lambda n, i, o: Distinct(n, i, o))
    r.feed(B((1, A), (1, A), (1, N), (1, N), (2, A, -1), (3, A, -1), (3, Bb)), 3).go()
    assert r.at(1) == Counter({A: 1, N: 1})
    assert r.at(2) == Counter({A: 1, N: 1})
    assert r.at(3) == Counter({N: 1, Bb: 1})
    assert r.ticks == {1, 2, 3}
    assert r.heartbeats == [3]


def test_distinct_no_output_when_multiplicity_stays_positive():
    r = Run(lambda n, i, o: Distinct(n, i, o))
    r.feed(B((1, A)), B((2, A), (3, A, -1))).go()
    assert r.elements == [(1, A, 1)]


# -- SetOperation -----------------------------------------------------------------------------

RULES = {
    ("union", True): lambda a, b: a + b,
    ("union", False): lambda a, b: int(a + b > 0),
    ("except", True): lambda a, b: max(a - b, 0),
    ("except", False): lambda a, b: int(a > 0 and b == 0),
    ("intersect", True): lambda a, b: min(a, b),
    ("intersect", False): lambda a, b: int(a > 0 and b > 0),
}


@pytest.mark.parametrize(("op", "all_"), list(product(["union", "except", "intersect"], [True, False])))
def test_set_operation_against_definition(op, all_):
    rng = np.random.default_rng(hash((op, all_)) % 1000)
    r = Run(lambda n, i, o: SetOperation(n, i, o, op, all_), ports=2)
    live = [Counter(), Counter()]
    rowset = [A, Bb, N]
    for t in range(12):
        for port in (0, 1):
            elems = []
            for _ in range(int(rng.integers(0, 4))):
                row = rowset[int(rng.integers(0, 3))]
                if live[port][row] and rng.random() < 0.4:
                    live[port][row] -= 1
                    elems.append((t, row, -1))
                else:
                    live[port][row] += 1
                    elems.append((t, row))
            if elems:
                r.feed(B(*elems), port=port)
            r.feed(t, port=port)
        r.go()
        f = RULES[(op, all_)]
        want = Counter({row: f(live[0][row], live[1][row]) for row in rowset})
        assert r.at(t) == +want, (t, live)


def test_set_operation_same_instant_on_both_ports():
    r = Run(lambda n, i, o: SetOperation(n, i, o, "except", False), ports=2)
    r.feed(B((1, A), (1, Bb)), 1, port=0).feed(B((1, A)), 1, port=1).go()
    assert r.at(1) == Counter({Bb: 1})
    r.feed(B((2, A, -1)), 2, port=1).feed(B((2, Bb, -1)), 2, port=0).go()
    assert r.at(2) == Counter({A: 1})
    assert r.heartbeats == [1, 2]


def test_union_all_is_a_merge_keeping_ticks():
    r = Run(lambda n, i, o: SetOperation(n, i, o, "union", True), ports=2)
    r.feed(B((1, A), ticks=(0,)), 2, port=0).feed(B((2, A)), 2, port=1).go()
    assert r.at(2) == Counter({A: 2})
    assert r.ticks == {0, 1, 2}


# -- Istream / Dstream ------------------------------------------------------------------------


def test_istream_emits_net_insertions_per_instant():
    r = Run(lambda n, i, o: Istream(n, i, o))
    # At 1: A twice and B then B retracted (no net change for B). At 2: A retracted, C added.
    r.feed(B((1, A), (1, A), (1, Bb), (1, Bb, -1)), B((2, A, -1), (2, C)), 2).go()
    assert r.elements == [(1, A, 1), (1, A, 1), (2, C, 1)]
    assert r.ticks >= {1, 2}


def test_istream_waits_for_the_instant_to_complete():
    r = Run(lambda n, i, o: Istream(n, i, o))
    r.feed(B((1, A))).go()
    # A later element in the same instant could still cancel it.
    r.feed(B((1, A, -1), (1, Bb))).go()
    assert [e for e in r.elements if e[0] == 1] in ([], [(1, Bb, 1)])
    r.feed(1).go()
    assert r.elements == [(1, Bb, 1)]


def test_dstream_emits_net_deletions_per_instant():
    r = Run(lambda n, i, o: Dstream(n, i, o))
    r.feed(
        B((1, A), (1, Bb)),
        B((2, A, -1), (2, A), (2, Bb, -1), (3, A, -1), (3, C)),
        3,
    ).go()
    assert r.elements == [(2, Bb, 1), (3, A, 1)]  # stream elements are insertions


def test_istream_of_a_stream_like_input_keeps_duplicates():
    r = Run(lambda n, i, o: Istream(n, i, o))
    r.feed(B((1, N), (1, N), (2, N)), 5).go()
    assert r.elements == [(1, N, 1), (1, N, 1), (2, N, 1)]


# -- Rstream ----------------------------------------------------------------------------------


def test_rstream_emits_the_relation_at_every_tick():
    r = Run(lambda n, i, o: Rstream(n, i, o))
    r.feed(B((1, A), (1, A)), B(ticks=(2,)), B((3, A, -1), (3, Bb)), B(ticks=(5,)), 6).go()
    got = Counter((t, row) for t, row, w in r.elements if w == 1)
    assert all(w == 1 for *_, w in r.elements)
    assert got == Counter({(1, A): 2, (2, A): 2, (3, A): 1, (3, Bb): 1, (5, A): 1, (5, Bb): 1})
    assert 4 not in {t for t, *_ in r.elements}  # 4 is not an instant that matters


def test_rstream_ticks_with_empty_relation_emit_nothing():
    r = Run(lambda n, i, o: Rstream(n, i, o))
    r.feed(B(ticks=(1, 2)), B((3, A)), B((4, A, -1)), B(ticks=(5,)), 9).go()
    assert r.elements == [(3, A, 1)]


# -- ViewBoundary -----------------------------------------------------------------------------


def test_relation_view_consolidates_and_ticks_only_when_it_changes():
    r = Run(lambda n, i, o: ViewBoundary(n, i, o, is_stream=False))
    r.feed(B((1, A), (1, A, -1), ticks=(0,)), B((2, Bb), (2, A)), B(ticks=(3,)), 4).go()
    assert sorted(r.elements) == [(2, A, 1), (2, Bb, 1)]
    assert r.ticks == {2}
    assert r.heartbeats == [4]


def test_stream_view_passes_elements_with_their_instants_only():
    r = Run(lambda n, i, o: ViewBoundary(n, i, o, is_stream=True))
    r.feed(B((1, A), (1, A), ticks=(0,)), B(ticks=(2,)), B((3, Bb)), 3).go()
    assert r.elements == [(1, A, 1), (1, A, 1), (3, Bb, 1)]
    assert r.ticks == {1, 3}


# -- SinkOperator -----------------------------------------------------------------------------


class FakeWriter:
    def __init__(self) -> None:
        self.lines: list[tuple[int, str, tuple]] = []
        self.flushed = self.closed = 0

    def write(self, ts, ops, columns) -> None:
        assert ops.dtype == np.int8
        rows = list(zip(*(c.to_pylist() for c in columns))) if columns else [()] * len(ts)
        self.lines.extend(
            (int(t), "+" if o > 0 else "-", row) for t, o, row in zip(ts.tolist(), ops.tolist(), rows)
        )

    def flush(self) -> None:
        self.flushed += 1

    def close(self) -> None:
        self.closed += 1


def sink(is_stream: bool, canonical: bool = True):
    writer = FakeWriter()
    inq = Queue("in")
    op = SinkOperator("q", [inq.reader()], writer, is_stream, canonical)
    op.out_types = list(TYPES)
    return op, inq, writer


def run(op):
    while op.runnable():
        op.run(1 << 20)


def test_relation_sink_writes_consolidated_deltas_retractions_first():
    op, inq, w = sink(is_stream=False)
    inq.push(B((1, A), (1, Bb), (1, A, -1), (1, C), (1, C)))
    inq.push(B((2, C, -1), (2, A), (2, Bb, -1)))
    inq.push(Heartbeat(1))
    run(op)
    assert sorted(w.lines) == [(1, "+", Bb), (1, "+", C), (1, "+", C)]
    op.finish()
    assert [line[:2] for line in w.lines[3:]] == [(2, "-"), (2, "-"), (2, "+")]
    assert sorted(w.lines[3:]) == sorted([(2, "-", C), (2, "-", Bb), (2, "+", A)])
    assert w.flushed == 1 and w.closed == 1
    assert op.written == 6


def test_relation_sink_holds_an_instant_until_it_is_complete():
    op, inq, w = sink(is_stream=False)
    inq.push(B((1, A)))
    run(op)
    assert w.lines == []
    inq.push(B((1, A, -1)))
    inq.push(Heartbeat(1))
    run(op)
    assert w.lines == []  # cancelled within the instant
    op.finish()
    assert w.lines == []


def test_stream_sink_without_canonical_order_writes_as_it_comes():
    op, inq, w = sink(is_stream=True, canonical=False)
    inq.push(B((1, A), (1, A), (2, N)))
    run(op)
    assert w.lines == [(1, "+", A), (1, "+", A), (2, "+", N)]
    op.finish()
    assert w.closed == 1


def test_stream_sink_writes_each_complete_instant_in_canonical_order():
    op, inq, w = sink(is_stream=True)
    inq.push(B((1, A), (1, N), (1, A), (2, N)))
    run(op)
    assert w.lines == [(1, "+", N), (1, "+", A), (1, "+", A)]  # instant 2 may still grow
    op.finish()
    assert w.lines[3:] == [(2, "+", N)]
    assert w.closed == 1


def test_release_takes_every_buffered_element_when_an_earlier_batch_has_later_ticks():
    """Regression: a batch whose ticks run ahead of its elements (ticks of a later instant)
    must not hide the elements of the batches queued behind it."""
    r = Run(lambda n, i, o: SetOperation(n, i, o, "except", False), ports=2)
    r.feed(B((0, A), ticks=(34, 38)), B((0, Bb), (0, Bb, -1), (0, Bb)), port=0)
    r.feed(B((0, A)), port=1)
    r.feed(32, port=0).feed(32, port=1).go()
    assert r.at(0) == Counter({Bb: 1})
    assert r.at(32) == Counter({Bb: 1})
