"""The MJoin operator alone against the n-way join computed by brute force: random 3- and
4-way join graphs (cyclic ones too) on random key columns, random inserts and deletes
(duplicates, NULL keys) on every input, fed in random runs with heartbeats only now and then,
so that one release holds several instants of several inputs, and cut into time slices
(`SLICE_ROWS`) of random size; every probe order drawn at random among the connected ones, and
in half the cases changed at random at every run (a probe orderer profiling every run,
engine/probe_order.py). The join of the inputs' relations must be what the output describes at
every instant."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cq_service.cql.logical import Call, ColRef
from cq_service.engine.operators.mjoin import MJoin
from cq_service.plan.mjoins import Edge
from cq_service.types import DataType
from tests.unit.engine.batches import relation_at
from tests.unit.engine.test_mjoin import Inputs, brute, eq
from tests.unit.engine.test_mjoin_probe_order import RandomProbes

INT, BOOL = DataType.INT, DataType.BOOL


@st.composite
def graphs(draw):
    n = draw(st.integers(3, 4))
    edges = []
    for i in range(1, n):
        j = draw(st.integers(0, i - 1))
        edges.append(Edge(j, ColRef(draw(st.integers(0, 1)), INT), i, ColRef(0, INT)))
    for _ in range(draw(st.integers(0, 2))):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if i != j:
            edges.append(Edge(i, ColRef(draw(st.integers(0, 1)), INT), j, ColRef(1, INT)))
    return n, tuple(edges)


@st.composite
def orders(draw, n: int, edges) -> tuple[tuple[int, ...], ...]:
    out = []
    for i in range(n):
        order = [i]
        while len(order) < n:
            nxt = sorted(
                {
                    e.other(b)
                    for e in edges
                    for b in order
                    if b in (e.left, e.right) and e.other(b) not in order
                }
            )
            order.append(draw(st.sampled_from(nxt)))
        out.append(tuple(order))
    return tuple(out)


@st.composite
def updates(draw, n: int):
    """(port, ts, row, weight) in ts order per port; deletes remove a current row."""
    out = []
    bags: list[list[tuple]] = [[] for _ in range(n)]
    for t in range(draw(st.integers(3, 8))):
        for _ in range(draw(st.integers(1, 6))):
            p = draw(st.integers(0, n - 1))
            if bags[p] and draw(st.integers(0, 2)) == 0:
                row = bags[p].pop(draw(st.integers(0, len(bags[p]) - 1)))
                out.append((p, t, row, -1))
                continue
            val = (
                st.one_of(st.none(), st.integers(0, 2))
                if draw(st.booleans())
                else st.integers(0, 2)
            )
            row = (draw(val), draw(val))
            bags[p].append(row)
            out.append((p, t, row, 1))
    return out


@settings(
    max_examples=int(os.environ.get("MJ_EXAMPLES", "40")) * 3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_mjoin_equals_the_join_of_its_inputs(data) -> None:
    n, edges = data.draw(graphs())
    order = data.draw(orders(n, edges))
    residual = data.draw(st.booleans())
    filters = (Call("le", (ColRef(1, INT), ColRef(2 * n - 1, INT)), BOOL),) if residual else ()
    ups = data.draw(updates(n))
    slice_rows = data.draw(st.sampled_from([1, 2, 5, MJoin.SLICE_ROWS]))
    reorder_seed = data.draw(st.one_of(st.none(), st.integers(0, 1000)))
    mp = pytest.MonkeyPatch()
    mp.setattr(MJoin, "SLICE_ROWS", slice_rows)
    try:
        j = Inputs(n, edges, filters, order)
        if reorder_seed is not None:
            j.op.probe_orderer = RandomProbes(reorder_seed)
        last = max((u[1] for u in ups), default=0)
        for t in range(last + 1):
            for p in range(n):
                elems = [(ts, row, w) for q, ts, row, w in ups if q == p and ts == t]
                if elems:
                    j.push(p, *elems)
            if t == last or data.draw(st.integers(0, 2)) == 0:
                j.beat(t)
        j.run()
    finally:
        mp.undo()

    def match(r) -> bool:
        ok = all(
            eq(r[2 * e.left + e.left_expr.index], r[2 * e.right + e.right_expr.index])
            for e in edges
        )
        if residual:
            ok = ok and r[1] is not None and r[2 * n - 1] is not None and r[1] <= r[2 * n - 1]
        return ok

    for t in range(last + 1):
        assert relation_at(j.elements, t) == brute(j.fed, t, match), t
