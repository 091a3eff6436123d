"""The exhaustive optimum of `cq bench filters` on hand-made instances."""

from __future__ import annotations

import numpy as np
import pytest

from cq_service.bench.filters.optimum import cost_of, optimum


def test_cost_of_counts_evaluations_until_the_first_drop() -> None:
    # rows: F1 drops; F2 drops; nobody drops; both drop
    drops = np.array([[1, 0], [0, 1], [0, 0], [1, 1]], dtype=bool)
    assert cost_of(drops, [0, 1]) == pytest.approx((1 + 2 + 2 + 1) / 4)
    assert cost_of(drops, [1, 0]) == pytest.approx((2 + 1 + 2 + 1) / 4)
    assert cost_of(drops, [0, 1], costs=[1, 10]) == pytest.approx((1 + 11 + 11 + 1) / 4)


def test_correlated_pair_is_split() -> None:
    """F1 and F2 drop the same tuples, F3 others: the optimum takes one of the pair and then
    F3 (the marginally most selective pair first would waste the second probe)."""
    a = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0], dtype=bool)  # F1 = F2: drop 30%
    f3 = np.array([0, 0, 0, 1, 1, 0, 0, 0, 0, 0], dtype=bool)  # F3: drop 20%, other tuples
    drops = np.stack([a, a, f3], axis=1)
    order, cost = optimum(drops)
    assert order == [0, 2, 1]
    assert cost == pytest.approx(cost_of(drops, order))
    assert cost == pytest.approx((3 * 1 + 2 * 2 + 5 * 3) / 10)
    assert cost < cost_of(drops, [0, 1, 2])


def test_costs_change_the_optimum() -> None:
    drops = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)
    assert optimum(drops)[0] == [0, 1]
    assert optimum(drops, costs=[10, 1])[0] == [1, 0]


def test_agrees_with_brute_force_on_random_instances() -> None:
    import itertools

    rng = np.random.default_rng(1)
    for n in (2, 3, 4):
        drops = rng.random((200, n)) < rng.random(n)
        costs = rng.uniform(1, 5, n)
        best = min(cost_of(drops, o, costs) for o in itertools.permutations(range(n)))
        assert optimum(drops, costs)[1] == pytest.approx(best)


def test_refuses_large_n() -> None:
    with pytest.raises(ValueError):
        optimum(np.zeros((1, 9), dtype=bool))
