"""MJoin probe orders that adapt (engine/probe_order.py, adaptive/probe_order.py): orders
changed at every profile keep the join's result; the greedy orderer moves the probe that
leaves fewest rows first; adapting never adds an index."""

from __future__ import annotations

import numpy as np

from cq_service.adaptive.probe_order import GreedyProbes
from cq_service.engine.probe_order import PositionProfile
from cq_service.plan.mjoins import Edge
from tests.unit.engine.batches import relation_at
from tests.unit.engine.mjoins import (
    CHAIN,
    TRIANGLE,
    Inputs,
    RandomProbes,
    chain_match,
    check,
    col,
    feed_chain,
    feed_triangle,
    triangle_match,
)

# A star: X (0) joined to A (1) on X.k = A.k and to B (2) on X.v = B.k
STAR = (Edge(0, col(0), 1, col(0)), Edge(0, col(1), 2, col(0)))


def test_orders_changed_at_every_profile_keep_the_result() -> None:
    for seed in range(5):
        j = Inputs(3, CHAIN)
        j.op.probe_orderer = RandomProbes(seed)
        feed_chain(j)
        check(j, chain_match, 6)
    t = Inputs(3, TRIANGLE)
    t.op.probe_orderer = orderer = RandomProbes(1)
    feed_triangle(t)
    check(t, triangle_match, 3)
    assert orderer.profiles and all(p.rows > 0 for p in orderer.profiles)


def _star(adaptive: bool, steps: int = 40) -> Inputs:
    """A: 5 rows for each key 0..9; B: one row, key 0; X: 50 rows a step, k and v in 0..9.
    Probing A first gives 5 rows per X row, B first 0.1."""
    j = Inputs(3, STAR)
    if adaptive:
        j.op.probe_orderer = GreedyProbes(3)
    j.push(1, *((1, (k, r)) for k in range(10) for r in range(5)))
    j.push(2, (1, (0, 0)))
    rng = np.random.default_rng(3)
    j.beat(1)
    for step in range(2, steps + 2):
        ks, vs = rng.integers(0, 10, 50), rng.integers(0, 10, 50)
        j.push(0, *((step, (int(k), int(v))) for k, v in zip(ks, vs, strict=True)))
        j.push(1)
        j.push(2)
        j.beat(step)
        j.run()
    return j


def test_greedy_probes_the_input_that_leaves_fewest_rows_first() -> None:
    adaptive, fixed = _star(True), _star(False)
    assert fixed.op.orders[0] == (0, 1, 2)  # as planned: A first
    assert adaptive.op.orders[0] == (0, 2, 1)  # B first: 0.1 rows left per X row, not 5
    assert adaptive.op.reorders >= 1
    orderer = adaptive.op.probe_orderer
    assert isinstance(orderer, GreedyProbes)
    first = frozenset({0})
    assert orderer.fanout(0, first, 1) == 5.0
    assert orderer.fanout(0, first, 2) < 0.5
    for t in (1, 20, 41):
        assert relation_at(adaptive.elements, t) == relation_at(fixed.elements, t)
    assert [len(s) for s in adaptive.op._sides] == [len(s) for s in fixed.op._sides]


def test_a_violation_within_the_guard_changes_nothing() -> None:
    orderer = GreedyProbes(3, alpha=0.9)
    bound = frozenset({0})

    def candidates(b: frozenset[int]) -> list[int]:
        return [t for t in (1, 2) if t not in b]

    # fanouts 1.0 (current, input 1) against 0.95 (input 2): within alpha
    prof = [PositionProfile(bound, 100, {1: 100, 2: 95})]
    orderer.observe(0, (0, 1, 2), prof, candidates)
    assert orderer.significant() and not orderer.reoptimize() and orderer.take_orders() == {}
    prof = [PositionProfile(bound, 100, {1: 100, 2: 80})]
    orderer.observe(0, (0, 1, 2), prof, candidates)
    assert orderer.reoptimize() and orderer.take_orders() == {0: (0, 2, 1)}
    assert not orderer.significant()  # nothing observed since
