"""Random MJoin cases for the operator's property tests (test_mjoin_operator.py,
test_mjoin_caching.py): join graphs, connected probe orders, updates with deletes, duplicates
and NULL keys; feeding them with heartbeats now and then; and the check that the output
describes the join of the inputs' relations at every instant."""

from __future__ import annotations

from hypothesis import strategies as st

from cq_service.cql.logical import Call, ColRef
from cq_service.plan.mjoins import Edge
from cq_service.types import DataType
from tests.unit.engine.batches import relation_at
from tests.unit.engine.mjoins import Inputs, brute, eq

INT, BOOL = DataType.INT, DataType.BOOL


@st.composite
def graphs(draw, most: int = 4):
    """n (3 to `most`) inputs of (k, v): a random spanning tree, plus up to two more edges."""
    n = draw(st.integers(3, most))
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
    """A connected probe order for each input."""
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
def updates(draw, n: int, keys=None, nulls: int = 2, instants: int = 8):
    """(port, ts, row, weight) in ts order per port, over 3 to `instants` instants; deletes
    remove a current row; values from `keys` (0 to 2), NULL-able in one row of `nulls`."""
    keys = st.integers(0, 2) if keys is None else keys
    out = []
    bags: list[list[tuple]] = [[] for _ in range(n)]
    for t in range(draw(st.integers(3, instants))):
        for _ in range(draw(st.integers(1, 6))):
            p = draw(st.integers(0, n - 1))
            if bags[p] and draw(st.integers(0, 2)) == 0:
                row = bags[p].pop(draw(st.integers(0, len(bags[p]) - 1)))
                out.append((p, t, row, -1))
                continue
            val = st.one_of(st.none(), keys) if draw(st.integers(0, nulls - 1)) == 0 else keys
            row = (draw(val), draw(val))
            bags[p].append(row)
            out.append((p, t, row, 1))
    return out


def residual_filters(n: int, residual: bool) -> tuple:
    """The residual `I0.v <= I(n-1).v` when `residual`, else none."""
    return (Call("le", (ColRef(1, INT), ColRef(2 * n - 1, INT)), BOOL),) if residual else ()


def feed(j: Inputs, n: int, ups, data) -> int:
    """Push `ups` instant by instant, heartbeats at random (and at the end), then run; the
    last instant."""
    last = max((u[1] for u in ups), default=0)
    for t in range(last + 1):
        for p in range(n):
            elems = [(ts, row, w) for q, ts, row, w in ups if q == p and ts == t]
            if elems:
                j.push(p, *elems)
        if t == last or data.draw(st.integers(0, 2)) == 0:
            j.beat(t)
    j.run()
    return last


def assert_join_of_inputs(j: Inputs, n: int, edges, residual: bool, last: int) -> None:
    """At every instant the output describes the join of the inputs' relations."""

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
