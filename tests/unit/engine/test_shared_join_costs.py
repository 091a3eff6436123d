"""MQT's cost model (engine/operators/shared_join_costs.py): the fit of a call's seconds as
fixed + per pair, the pairs predicted per unit from the release's size, and where the first
call of a release ends."""

from __future__ import annotations

import numpy as np
import pytest

from cq_service.engine.operators.shared_join import _units_of
from cq_service.engine.operators.shared_join_costs import OUTLIER, UnitCosts

FIXED, PER_PAIR = 1e-3, 1e-6
PER_TUPLE = (0.1, 1.0, 10.0)  # pairs an outer tuple finds in each unit's partial window


def _measured(calls: int = 20) -> UnitCosts:
    """Costs measured over calls of one unit and of the other two, 10 tuples each."""
    c = UnitCosts(3)
    for _ in range(calls):
        for lo, hi in ((0, 1), (1, 3)):
            found = [10 * p if lo <= u < hi else 0 for u, p in enumerate(PER_TUPLE)]
            pairs = sum(found)
            c.observe(lo, hi, FIXED + PER_PAIR * pairs, int(pairs), 10, found)
    return c


def test_the_fit_recovers_the_fixed_part_and_the_cost_per_pair() -> None:
    fixed, per_pair = _measured().params()
    assert fixed == pytest.approx(FIXED, rel=1e-6)
    assert per_pair == pytest.approx(PER_PAIR, rel=1e-6)
    assert _measured().pairs_per_tuple() == pytest.approx(PER_TUPLE)


def test_a_predicted_cost_grows_with_the_release() -> None:
    c = _measured()
    assert c.cost(0, 3, 10) == pytest.approx(FIXED + PER_PAIR * 10 * sum(PER_TUPLE))
    assert c.cost(2, 3, 1000) == pytest.approx(FIXED + PER_PAIR * 1000 * PER_TUPLE[2])


def test_a_pre_empted_call_counts_as_a_bounded_outlier() -> None:
    c = _measured()
    c.observe(0, 1, 10.0, 1, 10, [1, 0, 0])  # 10 s: the process was descheduled
    fixed, _ = c.params()
    assert fixed < (OUTLIER + 1) * FIXED


def test_a_release_splits_only_when_its_later_scan_outweighs_a_call() -> None:
    c = _measured()
    assert c.first_call(0, 3, 10) == 3  # a small release: one call, as LWO
    assert c.first_call(0, 3, 1000) == 2  # a burst: the small windows first
    assert c.first_call(0, 3, 1000, waiting=50_000.0) == 3  # a backlog behind it: one call
    assert UnitCosts(3).first_call(0, 3, 1000) == 3  # nothing measured: one call


def test_a_pair_is_found_in_the_unit_of_the_first_route_holding_it() -> None:
    parts = [((), (), np.zeros(4), np.ones(4), np.array([0b111, 0b110, 0b100, 0b110]))]
    assert _units_of(parts, 3).tolist() == [1, 2, 1]
    assert _units_of([], 3).tolist() == [0, 0, 0]


def test_the_gap_between_a_release_s_calls_is_measured_and_weighs_against_a_split() -> None:
    c = _measured()
    c.pause(10.0)
    c.resume(10.5)  # the executor came back half a second later
    c.resume(20.0)  # no pause before: nothing measured
    assert c.gap == pytest.approx(0.1)
    assert c.first_call(0, 3, 1000) == 3  # a split would cost the later routes the gap
