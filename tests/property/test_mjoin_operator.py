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

from cq_service.engine.operators.mjoin import MJoin
from tests.property.mjoin_cases import (
    assert_join_of_inputs,
    feed,
    graphs,
    orders,
    residual_filters,
    updates,
)
from tests.unit.engine.mjoins import Inputs, RandomProbes


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
    filters = residual_filters(n, residual)
    ups = data.draw(updates(n))
    slice_rows = data.draw(st.sampled_from([1, 2, 5, MJoin.SLICE_ROWS]))
    reorder_seed = data.draw(st.one_of(st.none(), st.integers(0, 1000)))
    mp = pytest.MonkeyPatch()
    mp.setattr(MJoin, "SLICE_ROWS", slice_rows)
    try:
        j = Inputs(n, edges, filters, order)
        if reorder_seed is not None:
            j.op.probe_orderer = RandomProbes(reorder_seed)
        last = feed(j, n, ups, data)
    finally:
        mp.undo()

    assert_join_of_inputs(j, n, edges, residual, last)
