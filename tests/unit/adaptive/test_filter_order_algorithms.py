"""A-Greedy's variants and the Profiler's parts: what each converges to, what it profiles."""

from __future__ import annotations

import numpy as np
import pytest

from cq_service.adaptive.filter_order import (
    ALGORITHMS,
    AGreedy,
    Independent,
    LocalSwaps,
    Sweep,
    orderer_factory,
)
from cq_service.adaptive.filter_order.profile import FilterCosts, ProfileWindow
from cq_service.cql.logical import Call, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.filter_order import StaticOrder
from cq_service.engine.operators.select import Select
from cq_service.engine.queues import Queue
from cq_service.spec.model import FILTER_ORDERS
from cq_service.types import DataType

INT, BOOL = DataType.INT, DataType.BOOL


def test_every_setting_has_an_algorithm():
    assert set(ALGORITHMS) == set(FILTER_ORDERS)
    for name in FILTER_ORDERS:
        assert orderer_factory(name)(3).name == name


def test_the_factory_seeds_each_selection_in_turn():
    make = orderer_factory("a-greedy", seed=5)
    a, b = make(3), make(3)
    again = orderer_factory("a-greedy", seed=5)(3)
    assert list(a.sample(0, 10_000)) == list(again.sample(0, 10_000))
    assert list(a.sample(0, 10_000)) != list(b.sample(0, 10_000))


def test_profile_window_keeps_the_last_tuples_in_order():
    w = ProfileWindow(2, 3)
    rows = np.array([[1, 0], [0, 1], [1, 1], [0, 0], [1, 0]], dtype=bool)
    _, expired = w.push_many(np.ones_like(rows[:2]), rows[:2])
    assert len(expired) == 0
    _, expired = w.push_many(np.ones_like(rows[2:]), rows[2:])
    assert expired.tolist() == [[True, False], [False, True]]
    assert w.arrays()[1].tolist() == rows[2:].tolist()
    _, expired = w.push_many(np.ones((5, 2), bool), np.zeros((5, 2), bool))  # more than fit
    assert expired.tolist() == rows[2:].tolist()
    assert w.count == 3 and not w.arrays()[1].any()


def test_costs_are_amortised_per_row_and_fill_gaps_with_the_mean():
    c = FilterCosts(3, min_rows=10)
    assert c.values().tolist() == [1.0, 1.0, 1.0]
    c.observe([100, 10, 0], [1.0, 0.2, 0.0])
    assert c.values().tolist() == pytest.approx([0.01, 0.02, 0.015])
    c.observe([1000, 5, 0], [1.0, 5.0, 0.0])  # 5 rows: too few to count
    assert c.values().tolist() == pytest.approx([1.9 / 1090, 0.02, (1.9 / 1090 + 0.02) / 2])
    assert FilterCosts(2, unit=True).values().tolist() == [1.0, 1.0]


def test_a_spike_is_held_back_and_a_lasting_rise_passes():
    c = FilterCosts(2, min_rows=1)
    c.observe([100, 100], [1.0, 5.0])  # 0.01 and 0.05 s a row
    c.observe([100, 0], [100.0, 0])  # F1 preempted: 1 s a row in one batch
    # held to twice its figure (0.02 s a row for that batch): 0.9 * 1.0 + 2.0 over 190 rows
    assert c.values()[0] == pytest.approx((0.9 * 1.0 + 2.0) / 190)
    for _ in range(30):  # a lasting rise passes, a few batches at a time
        c.observe([100, 0], [100.0, 0])
    assert c.values()[0] > 0.5


def _independent_select(orderer) -> Select:
    """a < 90 (drops 10%), b < 50 (50%), c < 20 (80%) over independent uniform columns."""
    conj = [Call("lt", (ColRef(i, INT), Const(v, INT)), BOOL) for i, v in enumerate((90, 50, 20))]
    pred = Call("and", (Call("and", (conj[0], conj[1]), BOOL), conj[2]), BOOL)
    op = Select("#s", [], Queue("q"), pred, orderer)
    op.out_types = [INT] * 3
    op.emit = lambda b: None  # type: ignore[method-assign]
    return op


def _run(op: Select, batches: int, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(batches):
        vals = rng.integers(0, 100, size=(2000, 3))
        op.on_batch(
            Batch.from_rows(
                [tuple(map(int, r)) for r in vals],
                np.zeros(2000, np.int64),
                np.ones(2000, np.int64),
                [INT] * 3,
            )
        )


@pytest.mark.parametrize("cls", [AGreedy, Sweep, Independent, LocalSwaps])
def test_each_variant_finds_the_optimal_order_of_independent_filters(cls):
    op = _independent_select(lambda n: cls(n, unit_costs=True))
    _run(op, 120)
    assert list(op.conjunction.orderer.order()) == [2, 1, 0]
    assert op.conjunction.profiled > 0


def test_costs_decide_between_equally_selective_filters():
    """Two filters dropping half each: the cheaper runs first (a_i from observed times)."""
    ag = AGreedy(2, p=1.0, window=100)
    ag.costs.observe([1000, 1000], [5.0, 1.0])  # F1 five times as expensive
    rng = np.random.default_rng(0)
    d = rng.random((100, 2)) < 0.5
    d = d[d.any(axis=1)]
    ag.add_profiles(np.ones_like(d), d)
    ag.check()
    assert list(ag.order()) == [1, 0]


def test_what_each_variant_profiles():
    assert list(AGreedy(4).profile_positions(1)) == [2, 3]
    assert list(Independent(4).profile_positions(0)) == [1, 2, 3]
    assert list(LocalSwaps(4).profile_positions(1)) == [2]
    assert list(LocalSwaps(4).profile_positions(3)) == []
    s = Sweep(4)
    assert s.j == 1 and list(s.profile_positions(0)) == [1] and s.profiles(1)
    assert not s.profiles(2)  # a drop after the profiled position counts in no kept entry


def test_sweep_moves_to_the_next_position_after_a_quiet_stage():
    s = Sweep(3, window=10, stage=2, unit_costs=True)
    quiet = np.array([[True, False, False]] * 2)  # F1 drops, F2 passes: no violation at j=1
    s.add_profiles(np.array([[True, True, False]] * 2), quiet)
    s.check()
    assert s.j == 2 and list(s.order()) == [0, 1, 2]


def test_sweep_moves_a_better_filter_forward():
    s = Sweep(3, window=10, unit_costs=True)
    drops = np.array([[False, True, False]] * 3)  # F2 drops what F1 passes
    s.add_profiles(np.array([[True, True, False]] * 3), drops)
    s.check()
    assert list(s.order()) == [1, 0, 2]


def test_static_never_profiles():
    s = StaticOrder(3)
    assert list(s.order()) == [0, 1, 2] and len(s.sample(0, 100)) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"p": 1.5}, "probability"),
        ({"alpha": 0.0}, "alpha"),
        ({"start": (0, 0, 1)}, "order"),
    ],
)
def test_bad_parameters_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AGreedy(3, **kwargs)


def _position_biased(order, batch=1000, drop=0.5, fixed=20e-6, per_row=1e-7):
    """Rows and seconds per filter (index) of one batch of equal-cost filters in `order`: each
    call keeps `fixed` seconds of fixed cost (what the engine's 1-row figure leaves), so a
    filter run late, on few rows, looks dearer per row."""
    n = len(order)
    rows, seconds = [0] * n, [0.0] * n
    m = batch
    for f in order:
        rows[f], seconds[f] = m, fixed + per_row * m
        m = int(m * (1 - drop))
    return rows, seconds


def test_equal_cost_filters_stay_tied_whatever_their_positions():
    c = FilterCosts(3)
    late = FilterCosts(3)  # the figures over every batch only
    for order in [[0, 1, 2]] * 10 + [[1, 0, 2]] * 10 + [[2, 0, 1]] * 10:
        rows, seconds = _position_biased(order)
        c.observe(rows, seconds, first=order[0])
        late.observe(rows, seconds)
    a = c.values()
    assert a.max() / a.min() == pytest.approx(1.0)
    assert late.values().max() / late.values().min() > 1.1  # apart by recent positions alone


def test_a_filter_never_first_takes_the_mean_or_its_own_lower_figure():
    c = FilterCosts(3)
    for _ in range(5):
        rows, seconds = _position_biased([0, 1, 2])
        seconds[2] = 0.1 * seconds[2]  # F3, last, is cheap even with its fixed cost
        c.observe(rows, seconds, first=0)
    a = c.values()
    assert a[1] == pytest.approx(a[0])  # F2's late figure errs high: the first one's instead
    assert a[2] < a[0] / 2  # F3's is lower: kept


def test_differences_within_the_noise_tie_and_larger_ones_count():
    rng = np.random.default_rng(3)
    c = FilterCosts(3)
    # each filter measured first in its own stretch of batches, the machine's speed varying
    # by +-30% from batch to batch; F3 is 20x dearer
    for f, per_row in ((0, 1e-7), (1, 1e-7), (2, 2e-6)):
        for _ in range(20):
            seconds = [0.0, 0.0, 0.0]
            seconds[f] = per_row * 1000 * rng.uniform(0.7, 1.3)
            rows = [0, 0, 0]
            rows[f] = 1000
            c.observe(rows, seconds, first=f)
    a = c.values()
    assert c.noise() > 0
    assert a[0] == pytest.approx(a[1])  # the same cost: tied whatever the last batches said
    assert a[2] > 10 * a[0]


class _AlwaysOnePass:
    """A pass chooser that runs every batch in one pass."""

    whole_batches = 0

    def whole(self) -> bool:
        return True

    def record(self, whole: bool, seconds: float, rows: int) -> None:
        pass

    def order_changed(self) -> None:
        pass

    def prefers_one_pass(self) -> bool:
        return True


@pytest.mark.parametrize("cls", [AGreedy, Sweep, Independent, LocalSwaps])
def test_each_variant_learns_the_order_from_one_pass_batches(monkeypatch, cls):
    """While the selection runs one pass, each variant still gets profile tuples (the sampled
    dropped rows, every verdict known) and every filter's time as a first-position figure,
    and reaches the optimal order with no batch ever evaluated in its order."""
    from cq_service.engine import conjunction

    monkeypatch.setattr(conjunction, "PassChooser", _AlwaysOnePass)
    op = _independent_select(lambda n: cls(n, unit_costs=True, whole_pass=True))
    _run(op, 120)
    conj = op.conjunction
    assert conj.one_pass_rows == 120 * 2000
    assert list(conj.orderer.order()) == [2, 1, 0]
    assert conj.orderer.window.count > 0


def test_one_pass_batches_give_every_filter_a_first_position_time():
    costs = FilterCosts(3)
    costs.observe([1000] * 3, [1e-3, 2e-3, 4e-3], first=range(3))
    assert costs.values() == pytest.approx([1e-6, 2e-6, 4e-6])


def test_costs_stay_positive_when_first_position_times_are_zero():
    """A time with the per-call cost taken off can be 0: no a_i may be (the ratios divide)."""
    costs = FilterCosts(3)
    costs.observe([1000, 500, 200], [0.0, 1e-4, 1e-4], first=0)
    assert (costs.values() > 0).all()
