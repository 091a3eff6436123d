"""Join: symmetric hash join of two relations (deltas), NULL keys, residual, cross join, and
elements of both inputs at the same instant. Checked against the join of the two relations at
every instant."""

from __future__ import annotations

from collections import Counter
from itertools import product

import numpy as np
import pytest

from cq_service.cql.logical import Call, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.operators.join import Join
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch, relation_at

INT, STR, BOOL = DataType.INT, DataType.STRING, DataType.BOOL
LT = [INT, STR]  # left: (k, s)
RT = [INT, INT]  # right: (k, v)
OUT = LT + RT


def B(types, *elems: tuple) -> Batch:
    """(ts, row) or (ts, row, weight); ticks are the timestamps."""
    return make_batch(types, elems)


class TwoInputs:
    def __init__(self, make, in_types, out_types):
        self.queues = [Queue("left"), Queue("right")]
        self.types = in_types
        out = Queue("out")
        self.reader = out.reader()
        self.op = make("op", [q.reader() for q in self.queues], out)
        self.op.out_types = list(out_types)
        self.elements: list[tuple[int, tuple, int]] = []
        self.ticks: set[int] = set()
        self.heartbeats: list[int] = []

    def push(self, port: int, *elems: tuple) -> None:
        self.queues[port].push(B(self.types[port], *elems))

    def beat(self, ts: int, ports=(0, 1)) -> None:
        for p in ports:
            self.queues[p].push(Heartbeat(ts))

    def run(self, budget: int = 1 << 20) -> None:
        while self.op.runnable():
            self.op.run(budget)
        last = None
        while (item := self.reader.get()) is not None:
            if isinstance(item, Heartbeat):
                self.heartbeats.append(item.ts)
                continue
            ts = item.ts.tolist()
            assert ts == sorted(ts)
            if ts:
                assert last is None or ts[0] >= last
                last = ts[-1]
            self.elements.extend(zip(ts, item.rows(), item.w.tolist()))
            self.ticks.update(item.ticks.tolist())

    def at(self, t: int) -> Counter:
        return relation_at(self.elements, t)


def relation(elems, t) -> Counter:
    c: Counter = Counter()
    for e in elems:
        if e[0] <= t:
            c[e[1]] += e[2] if len(e) > 2 else 1
    return +c


def brute_join(left, right, t, match) -> Counter:
    out: Counter = Counter()
    for (lr, lc), (rr, rc) in product(relation(left, t).items(), relation(right, t).items()):
        if match(lr, rr):
            out[lr + rr] += lc * rc
    return out


def equi(lr, rr) -> bool:
    return lr[0] is not None and lr[0] == rr[0]


def join_op(residual=None, keys=True):
    lk = (ColRef(0, INT),) if keys else ()
    rk = (ColRef(0, INT),) if keys else ()
    return lambda n, i, o: Join(n, i, o, lk, rk, residual)


def test_equi_join_with_duplicates_multiplies_weights():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    left = [(1, (1, "a")), (1, (1, "a")), (2, (2, "b"))]
    right = [(1, (1, 10)), (3, (1, 10)), (3, (1, 11)), (3, (2, 20))]
    h.push(0, *left)
    h.push(1, *right[:1])
    h.beat(1)
    h.run()
    h.push(1, *right[1:])
    h.beat(5)
    h.run()
    assert h.at(1) == Counter({(1, "a", 1, 10): 2})
    assert h.at(3) == Counter({(1, "a", 1, 10): 4, (1, "a", 1, 11): 2, (2, "b", 2, 20): 1})
    assert h.heartbeats == [1, 5]


def test_deletions_retract_exactly():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    h.push(0, (1, (1, "a")), (1, (1, "a")), (4, (1, "a"), -1), (6, (1, "a"), -1))
    h.push(1, (2, (1, 10)), (5, (1, 10), -1))
    h.beat(10)
    h.run()
    assert h.at(1) == Counter()
    assert h.at(2) == Counter({(1, "a", 1, 10): 2})
    assert h.at(4) == Counter({(1, "a", 1, 10): 1})
    assert h.at(5) == Counter()
    assert h.at(10) == Counter()
    assert h.op.state_size()[0] == 0  # nothing left on either side


def test_null_keys_never_match():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    h.push(0, (1, (None, "a")), (1, (1, "b")))
    h.push(1, (1, (None, 10)), (1, (1, 11)))
    h.beat(1)
    h.run()
    assert h.at(1) == Counter({(1, "b", 1, 11): 1})
    # Deleting a NULL-key row is fine too.
    h.push(0, (2, (None, "a"), -1))
    h.push(1, (2, (None, 10), -1))
    h.beat(2)
    h.run()
    assert h.at(2) == Counter({(1, "b", 1, 11): 1})


def test_residual_predicate():
    # ON l.k = r.k AND r.v > 10 AND l.s <> 'x'
    residual = Call(
        "and",
        (
            Call("gt", (ColRef(3, INT), Const(10, INT)), BOOL),
            Call("ne", (ColRef(1, STR), Const("x", STR)), BOOL),
        ),
        BOOL,
    )
    h = TwoInputs(join_op(residual), [LT, RT], OUT)
    h.push(0, (1, (1, "a")), (1, (1, "x")), (1, (1, None)))
    h.push(1, (1, (1, 10)), (1, (1, 11)), (1, (1, None)), (2, (1, 11), -1))
    h.beat(3)
    h.run()
    assert h.at(1) == Counter({(1, "a", 1, 11): 1})
    assert h.at(2) == Counter()


def test_cross_join():
    h = TwoInputs(join_op(keys=False), [LT, RT], OUT)
    h.push(0, (1, (1, "a")), (2, (None, "b")))
    h.push(1, (1, (7, 70)), (3, (8, 80)), (4, (7, 70), -1))
    h.beat(5)
    h.run()
    assert h.at(1) == Counter({(1, "a", 7, 70): 1})
    assert h.at(2) == Counter({(1, "a", 7, 70): 1, (None, "b", 7, 70): 1})
    assert h.at(3) == Counter(
        {(1, "a", 7, 70): 1, (None, "b", 7, 70): 1, (1, "a", 8, 80): 1, (None, "b", 8, 80): 1}
    )
    assert h.at(4) == Counter({(1, "a", 8, 80): 1, (None, "b", 8, 80): 1})


def test_cross_join_with_residual_only():
    residual = Call("lt", (ColRef(0, INT), ColRef(2, INT)), BOOL)
    h = TwoInputs(join_op(residual, keys=False), [LT, RT], OUT)
    h.push(0, (1, (1, "a")), (1, (5, "b")))
    h.push(1, (1, (3, 0)), (1, (None, 0)))
    h.beat(1)
    h.run()
    assert h.at(1) == Counter({(1, "a", 3, 0): 1})


def test_ties_across_ports_at_one_instant_join_once():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    # Right arrives (and is queued) before left, both at instant 1; then both change at 2.
    h.push(1, (1, (1, 10)))
    h.beat(1, ports=(1,))
    h.run()
    assert h.elements == []  # the left input has not completed instant 1 yet
    h.push(0, (1, (1, "a")))
    h.beat(1, ports=(0,))
    h.run()
    assert h.at(1) == Counter({(1, "a", 1, 10): 1})
    h.push(0, (2, (1, "a"), -1), (2, (1, "b")))
    h.push(1, (2, (1, 10), -1), (2, (1, 12)))
    h.beat(2)
    h.run()
    assert h.at(2) == Counter({(1, "b", 1, 12): 1})
    assert h.heartbeats == [1, 2]


def test_heartbeat_waits_for_the_slower_input():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    h.push(0, (1, (1, "a")))
    h.beat(5, ports=(0,))
    h.run()
    assert h.heartbeats == []
    h.beat(3, ports=(1,))
    h.run()
    assert h.heartbeats == [3]
    h.beat(9, ports=(1,))
    h.run()
    assert h.heartbeats == [3, 5]


@pytest.mark.parametrize("budget", [1, 3, 1 << 20])
def test_random_against_brute_force(budget):
    rng = np.random.default_rng(budget)

    def updates(types_second):
        elems, live = [], Counter()
        for t in range(12):
            for _ in range(int(rng.integers(0, 5))):
                if live and rng.random() < 0.3:
                    row = rng.choice(len(live))
                    row = list(live)[row]
                    live[row] -= 1
                    live = +live
                    elems.append((t, row, -1))
                else:
                    k = [None, 0, 1, 2][int(rng.integers(0, 4))]
                    row = (k, types_second(int(rng.integers(0, 2))))
                    live[row] += 1
                    elems.append((t, row, 1))
        return elems

    left = updates(lambda v: "ab"[v])
    right = updates(lambda v: v * 10)
    residual = Call("ne", (ColRef(1, STR), Const("b", STR)), BOOL)
    h = TwoInputs(join_op(residual), [LT, RT], OUT)
    for t in range(12):
        lt = [e for e in left if e[0] == t]
        rt = [e for e in right if e[0] == t]
        if lt:
            h.push(0, *lt)
        if rt:
            h.push(1, *rt)
        h.beat(t)
        h.run(budget)
    for t in range(12):
        want = brute_join(left, right, t, lambda lr, rr: equi(lr, rr) and lr[1] != "b")
        assert h.at(t) == want, t
