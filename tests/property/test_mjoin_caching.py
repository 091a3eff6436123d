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
from cq_service.engine.operators.mjoin import MJoin
from tests.property.mjoin_cases import (
    assert_join_of_inputs,
    feed,
    graphs,
    orders,
    residual_filters,
    updates,
)
from tests.unit.engine.mjoins import AllCaches, Inputs, RandomCaches, RandomProbes


@settings(
    max_examples=int(os.environ.get("MJ_EXAMPLES", "40")) * 3,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_mjoin_with_caches_equals_the_join_of_its_inputs(data) -> None:
    n, edges = data.draw(graphs(most=5))
    order = data.draw(orders(n, edges))
    residual = data.draw(st.booleans())
    filters = residual_filters(n, residual)
    skew = data.draw(st.booleans())  # skewed: most keys 0
    keys = st.sampled_from([0, 0, 0, 0, 0, 1, 2]) if skew else st.integers(0, 2)
    ups = data.draw(updates(n, keys, nulls=4, instants=9))
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
        last = feed(j, n, ups, data)
    finally:
        mp.undo()

    assert_join_of_inputs(j, n, edges, residual, last)
