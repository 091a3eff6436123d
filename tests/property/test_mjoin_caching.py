"""MJoin with A-Caching against the n-way join computed by brute force (as
test_mjoin_operator.py): random 3- to 5-way join graphs (cyclic ones too), random inserts and
deletes with duplicates and NULL keys, keys drawn from a skewed or a uniform range, random
heartbeats and time slices, probe orders changed at random in some cases; and caches forced:
every candidate used from the first step, caches added and dropped at random at every step
(with pool shares down to one row, so fills are dropped), or the A-Caching selector choosing
every step. The join of the inputs' relations must be what the output describes at every
instant — caches kept consistent through every deletion."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cq_service.adaptive.caching import ACaching
from cq_service.cql.logical import Call, ColRef
from cq_service.engine.operators.mjoin import MJoin
from cq_service.plan.mjoins import Edge
from cq_service.types import DataType
from tests.property.test_mjoin_operator import orders
from tests.unit.engine.batches import relation_at
from tests.unit.engine.test_mjoin import Inputs, brute, eq
from tests.unit.engine.test_mjoin_cache import AllCaches, RandomCaches
from tests.unit.engine.test_mjoin_probe_order import RandomProbes

INT, BOOL = DataType.INT, DataType.BOOL


@st.composite
def graphs(draw):
    n = draw(st.integers(3, 5))
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
def updates(draw, n: int):
    """(port, ts, row, weight) in ts order; deletes remove a current row; skewed: most keys 0."""
    skew = draw(st.booleans())
    key = st.sampled_from([0, 0, 0, 0, 0, 1, 2]) if skew else st.integers(0, 2)
    out = []
    bags: list[list[tuple]] = [[] for _ in range(n)]
    for t in range(draw(st.integers(3, 9))):
        for _ in range(draw(st.integers(1, 6))):
            p = draw(st.integers(0, n - 1))
            if bags[p] and draw(st.integers(0, 2)) == 0:
                row = bags[p].pop(draw(st.integers(0, len(bags[p]) - 1)))
                out.append((p, t, row, -1))
                continue
            val = st.one_of(st.none(), key) if draw(st.integers(0, 3)) == 0 else key
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
def test_mjoin_with_caches_equals_the_join_of_its_inputs(data) -> None:
    n, edges = data.draw(graphs())
    order = data.draw(orders(n, edges))
    residual = data.draw(st.booleans())
    filters = (Call("le", (ColRef(1, INT), ColRef(2 * n - 1, INT)), BOOL),) if residual else ()
    ups = data.draw(updates(n))
    slice_rows = data.draw(st.sampled_from([1, 3, MJoin.SLICE_ROWS]))
    kind = data.draw(st.sampled_from(["all", "random", "a-caching"]))
    seed = data.draw(st.integers(0, 1000))
    reorder = data.draw(st.integers(0, 3)) == 0
    mp = pytest.MonkeyPatch()
    mp.setattr(MJoin, "SLICE_ROWS", slice_rows)
    try:
        j = Inputs(n, edges, filters, order)
        if kind == "all":
            sel = AllCaches(every=data.draw(st.sampled_from([1, 2])))
        elif kind == "random":
            sel = RandomCaches(seed)
        else:
            sel = ACaching(n)
            sel.every = 1
        j.op._init_caching(sel)
        if reorder:
            j.op.probe_orderer = RandomProbes(seed)
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
