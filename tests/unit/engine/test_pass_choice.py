"""The choice between one pass and the ordered conjuncts (engine/pass_choice.py), on scripted
times: ordered while the orderer warms up, then the cheaper way, the other one tried so that it
takes about `EXPLORE_SHARE` of the time, and a change in either way's cost followed."""

from __future__ import annotations

import pytest

from cq_service.engine.pass_choice import PassChooser


def _run(chooser: PassChooser, batches: int, cost: dict[bool, float]) -> list[bool]:
    """`batches` batches of 1,000 rows; a batch of each way takes `cost[way]` per row."""
    ways = []
    for _ in range(batches):
        whole = chooser.whole()
        ways.append(whole)
        chooser.record(whole, cost[whole] * 1000, 1000)
    return ways


def test_ordered_through_the_warm_up_then_one_pass_is_tried():
    chooser = PassChooser()
    ways = _run(chooser, PassChooser.WARMUP + 1, {False: 1e-6, True: 5e-6})
    assert ways == [False] * PassChooser.WARMUP + [True]


@pytest.mark.parametrize("ratio", [1.25, 2.0, 5.0])
def test_the_dearer_way_takes_about_explore_share_of_the_time(ratio):
    chooser = PassChooser()
    cost = {False: ratio * 1e-6, True: 1e-6}
    _run(chooser, PassChooser.WARMUP + 1, cost)
    ways = _run(chooser, 2000, cost)
    assert chooser.prefers_one_pass()
    dearer = ways.count(False) * cost[False]
    cheaper = ways.count(True) * cost[True]
    # one try of the dearer way per 1/EXPLORE_SHARE of its cost spent on the cheaper way
    assert dearer / cheaper == pytest.approx(PassChooser.EXPLORE_SHARE, rel=0.1)


def test_a_drift_in_cost_is_followed():
    chooser = PassChooser()
    _run(chooser, 100, {False: 1e-6, True: 3e-6})
    assert not chooser.prefers_one_pass()
    # The order's cost grows (say the data changed and the orderer has not caught up): the
    # next try of one pass finds it cheaper, and from then on one pass runs.
    ways = _run(chooser, 100, {False: 9e-6, True: 3e-6})
    assert chooser.prefers_one_pass()
    first = ways.index(True)
    assert first <= 1 / PassChooser.EXPLORE_SHARE * 3  # tried within 60 batches (3 µs vs 1)
    assert all(ways[first : first + 20])


def test_costs_are_per_row_whatever_the_batch_sizes():
    chooser = PassChooser()
    chooser.record(False, 0.010, 10_000)  # 1 µs a row
    chooser.record(True, 0.001, 500)  # 2 µs a row
    assert chooser.cost(False) == 1e-6 and chooser.cost(True) == 2e-6
    assert not chooser.prefers_one_pass()


def test_a_new_order_is_measured_on_the_next_batch():
    """After the orderer changes its order, what the ordered way measured is forgotten: the
    next batch runs ordered, whatever the exploration schedule, then the cheaper way."""
    chooser = PassChooser()
    _run(chooser, 100, {False: 5e-6, True: 1e-6})
    assert chooser.prefers_one_pass()
    chooser.order_changed()
    assert chooser.cost(False) is None and not chooser.prefers_one_pass()
    ways = _run(chooser, 2, {False: 0.5e-6, True: 1e-6})  # the new order is cheaper
    assert ways == [False, False] and not chooser.prefers_one_pass()


def test_one_preempted_batch_does_not_flip_the_choice():
    chooser = PassChooser()
    _run(chooser, 50, {False: 1e-6, True: 3e-6})
    chooser.record(False, 1000 * 50e-6, 1000)  # one batch 50 times slower: the machine, not the way
    assert not chooser.prefers_one_pass()
    assert chooser.cost(False) < 1.5e-6
