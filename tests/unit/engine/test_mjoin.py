"""MJoin: the n-way join of relation deltas, on hand-made 3-way cases (inserts, deletes,
duplicates, NULL keys, a residual, a cyclic triangle, elements of every input at one instant),
checked at every instant against the join of the inputs' relations computed by brute force;
other probe orders, snapshot and restore, and the state it keeps."""

from __future__ import annotations

import pickle
from collections import Counter
from itertools import product

import pytest

from cq_service.cql.logical import Call, ColRef, Const
from cq_service.engine.operators.mjoin import MJoin
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.plan.mjoins import Edge, static_order
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch, relation_at

INT, BOOL = DataType.INT, DataType.BOOL
TYPES = [INT, INT]  # every input: (k, v)


def col(i: int) -> ColRef:
    return ColRef(i, INT)


# A chain 0 —k— 1 —v=k— 2: I0.k = I1.k, I1.v = I2.k
CHAIN = (Edge(0, col(0), 1, col(0)), Edge(1, col(1), 2, col(0)))
# A triangle on k: I0.k = I1.k, I1.k = I2.k, I2.k = I0.k
TRIANGLE = (Edge(0, col(0), 1, col(0)), Edge(1, col(0), 2, col(0)), Edge(2, col(0), 0, col(0)))


class Inputs:
    """An MJoin over n inputs of (k, v) rows, fed and drained by hand."""

    def __init__(self, n: int, edges, filters=(), orders=None):
        self.queues = [Queue(f"in{i}") for i in range(n)]
        out = Queue("out")
        self.reader = out.reader()
        self.orders = orders or tuple(static_order(n, edges, i) for i in range(n))
        self.op = MJoin(
            "mj",
            [q.reader() for q in self.queues],
            out,
            [2] * n,
            edges,
            tuple(filters),
            self.orders,
        )
        self.op.out_types = TYPES * n
        self.elements: list[tuple[int, tuple, int]] = []
        self.fed: list[list[tuple]] = [[] for _ in range(n)]

    def push(self, port: int, *elems: tuple) -> None:
        self.fed[port].extend(elems)
        self.queues[port].push(make_batch(TYPES, elems))

    def beat(self, ts: int) -> None:
        for q in self.queues:
            q.push(Heartbeat(ts))

    def run(self) -> None:
        while self.op.runnable():
            self.op.run(1 << 20)
        last = None
        while (item := self.reader.get()) is not None:
            if isinstance(item, Heartbeat):
                continue
            ts = item.ts.tolist()
            assert ts == sorted(ts)
            if ts:
                assert last is None or ts[0] >= last
                last = ts[-1]
            self.elements.extend(zip(ts, item.rows(), item.w.tolist()))


def _rel(elems, t) -> Counter:
    c: Counter = Counter()
    for e in elems:
        if e[0] <= t:
            c[e[1]] += e[2] if len(e) > 2 else 1
    return +c


def brute(fed, t, match) -> Counter:
    out: Counter = Counter()
    rels = [_rel(f, t).items() for f in fed]
    for combo in product(*rels):
        rows = tuple(x for r, _ in combo for x in r)
        if match(rows):
            w = 1
            for _, c in combo:
                w *= c
            out[rows] += w
    return out


def eq(a, b) -> bool:
    return a is not None and b is not None and a == b


def chain_match(r) -> bool:  # (k0, v0, k1, v1, k2, v2)
    return eq(r[0], r[2]) and eq(r[3], r[4])


def triangle_match(r) -> bool:
    return eq(r[0], r[2]) and eq(r[2], r[4]) and eq(r[4], r[0])


def check(j: Inputs, match, upto: int) -> None:
    for t in range(upto + 1):
        assert relation_at(j.elements, t) == brute(j.fed, t, match), t


def feed_chain(j: Inputs) -> None:
    j.push(0, (1, (1, 10)), (2, (1, 11)), (2, (1, 11)))  # a duplicate
    j.push(1, (1, (1, 5)), (3, (None, 5)), (3, (2, 6)))  # a NULL key
    j.push(2, (2, (5, 0)), (2, (None, 1)), (3, (6, 2)))
    j.beat(3)
    j.push(0, (4, (2, 12)), (5, (1, 10), -1))  # a delete
    j.push(1, (4, (1, 5)), (5, (1, 5), -1))  # an insert and a delete of equal rows
    j.push(2, (4, (5, 0)), (6, (5, 0), -1))
    j.beat(6)
    j.run()


def test_chain_inserts_deletes_duplicates_nulls() -> None:
    j = Inputs(3, CHAIN)
    feed_chain(j)
    check(j, chain_match, 6)
    assert j.elements, "the case joins something"


def test_cyclic_triangle() -> None:
    j = Inputs(3, TRIANGLE)
    j.push(0, (1, (1, 0)), (2, (2, 0)), (3, (None, 0)))
    j.push(1, (1, (1, 1)), (2, (2, 1)), (2, (1, 2)))
    j.push(2, (1, (1, 3)), (3, (2, 3)), (3, (None, 4)))
    j.beat(3)
    j.push(1, (4, (1, 1), -1))
    j.push(2, (4, (1, 3)))
    j.beat(5)
    j.run()
    check(j, triangle_match, 5)
    assert j.elements
    # every pipeline probes its second input by one key, its third by both equalities
    assert all(len(p[1].bound_ev) == 2 for p in j.op._pipelines)


def test_residual_applied_once_its_inputs_are_bound() -> None:
    # I0.v < I2.v (columns 1 and 5 of the concatenated row) and the constant-free I1.v > 4
    filters = (Call("lt", (col(1), col(5)), BOOL), Call("gt", (col(3), Const(4, INT)), BOOL))
    j = Inputs(3, CHAIN, filters)
    feed_chain(j)

    def match(r) -> bool:
        return chain_match(r) and r[1] < r[5] and r[3] > 4

    check(j, match, 6)


def test_every_connected_order_gives_the_same_result() -> None:
    orders = ((0, 1, 2), (1, 2, 0), (2, 1, 0))
    j = Inputs(3, CHAIN, orders=orders)
    feed_chain(j)
    check(j, chain_match, 6)
    with pytest.raises(ValueError):
        j.op.set_order(0, (0, 2, 1))  # 2 is not joined to 0: a Cartesian product


def test_set_order_builds_an_index_on_new_keys() -> None:
    j = Inputs(3, TRIANGLE)
    j.push(0, (1, (1, 0)), (1, (1, 0)))
    j.push(1, (1, (1, 1)))
    j.push(2, (1, (1, 3)))
    j.beat(1)
    j.run()
    before = len(j.op._sides[2])
    j.op.set_order(1, (1, 2, 0))  # input 2 now probed on one key from input 1
    assert len(j.op._sides[2]) >= before
    j.push(1, (2, (1, 7)))
    j.push(0, (2, (1, 9)), (2, (1, 0), -1))
    j.beat(2)
    j.run()
    check(j, triangle_match, 2)


def test_snapshot_and_restore() -> None:
    j = Inputs(3, CHAIN)
    j.push(0, (1, (1, 10)), (2, (1, 11)))
    j.push(1, (1, (1, 5)))
    j.push(2, (2, (5, 0)))
    j.beat(2)
    j.run()
    saved = pickle.loads(pickle.dumps(j.op.snapshot()))
    k = Inputs(3, CHAIN)
    k.op.restore(saved)
    k.fed = [list(f) for f in j.fed]
    k.elements = list(j.elements)
    k.push(1, (3, (1, 5)))
    k.push(2, (3, (5, 1)))
    k.beat(3)
    k.run()
    check(k, chain_match, 3)
    assert len(k.elements) > len(j.elements)


def test_state_is_the_inputs_only() -> None:
    j = Inputs(3, CHAIN)
    feed_chain(j)
    rows, nbytes = j.op.state_size()
    # each input's current rows, once per key set it is probed by: the middle input of the
    # chain is probed by k (from input 0) and by v (from input 2)
    assert [len(s) for s in j.op._sides] == [1, 2, 1]
    assert rows == sum(len(x) for s in j.op._sides for x in s) and nbytes > 0
    assert len(j.op._sides[1][0]) == len(j.op._sides[1][1])
    assert "mjoin of 3 inputs" in j.op.describe()
