"""MJoin: the n-way join of relation deltas, on hand-made 3-way cases (inserts, deletes,
duplicates, NULL keys, a residual, a cyclic triangle, elements of every input at one instant),
checked at every instant against the join of the inputs' relations computed by brute force;
other probe orders, snapshot and restore, and the state it keeps."""

from __future__ import annotations

import pickle

import pytest

from cq_service.cql.logical import Call, Const
from tests.unit.engine.mjoins import (
    BOOL,
    CHAIN,
    INT,
    TRIANGLE,
    Inputs,
    chain_match,
    check,
    col,
    feed_chain,
    triangle_match,
)


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
