"""The resource manager's choices: inside every range, within the budget, as precise as the
strategy allows, lighter queries first; admission control and shedding."""

from __future__ import annotations

import itertools
import random

import pytest

from cq_service.adaptive.manager import (
    Budget,
    admit,
    decide,
    weighted,
)
from tests.unit.adaptive.managed_queries import GROUP, JOIN, managed


def full(q):
    return q.cost(q.settings(1.0, 1.0)).memory


def least(q):
    return q.cost(q.settings(0.0, 0.0)).memory


def test_knobs_take_their_ranges_ends_and_only_grow_with_f(tmp_path):
    q = managed(tmp_path, qos="{window: [1000, 10000], granularity: [1, 10, 100]}")
    assert [w.label for w in q.windows] == ["S", "T"]
    assert q.settings(1.0, 1.0) == {"S": (10000, 1), "T": (10000, 1)}
    assert q.settings(0.0, 0.0) == {"S": (1000, 100), "T": (1000, 100)}
    assert q.granularity_at(0.99) == 10 and q.granularity_at(0.5) == 10
    assert q.granularity_at(0.49) == 100
    fs = [i / 50 for i in range(51)]
    sizes = [q.windows[0].size_at(f) for f in fs]
    rungs = [q.granularity_at(f) for f in fs]
    assert sizes == sorted(sizes) and rungs == sorted(rungs, reverse=True)
    memory = [q.cost(q.settings(f, f)).memory for f in fs]
    assert all(a <= b + 1e-6 for a, b in itertools.pairwise(memory))  # monotone in f


def test_weights_make_lighter_queries_give_up_first():
    assert weighted(0.5, 2.0, 2.0) == 0.5
    assert weighted(0.5, 1.0, 2.0) == 0.25
    assert weighted(1.0, 0.1, 2.0) == 1.0 and weighted(0.0, 5.0, 5.0) == 0.0


def test_everything_fits_at_full_precision(tmp_path):
    q = managed(tmp_path)
    d = decide([q], Budget(memory=full(q) * 1.01))
    assert d.fits and d.f_window == 1.0 and d.f_granularity == 1.0
    assert d.settings["q"] == {"S": (10000, 1), "T": (10000, 1)}


def test_a_tight_budget_is_met_with_the_largest_window_that_fits(tmp_path):
    q = managed(tmp_path)
    budget = Budget(memory=full(q) * 0.6, reserve=full(q) * 0.1)
    d = decide([q], budget)
    assert d.fits and d.total.memory <= budget.target
    size = d.settings["q"]["S"][0]
    assert 1000 <= size < 10000
    # maximal: one step of the bisection's tolerance more would not fit
    bigger = {k: (min(10000, s + 9000 // 128), g) for k, (s, g) in d.settings["q"].items()}
    assert q.cost(bigger).memory > budget.target
    # the join's state is about linear in the window: half the memory, about half the window
    assert size == pytest.approx(0.5 * 10000, rel=0.1)


def test_granularity_is_given_up_before_windows_are_bisected(tmp_path):
    q = managed(tmp_path, cql=GROUP, qos="{window: [6000, 60000], granularity: [1, 100, 1000]}")
    d = decide([q], Budget(memory=full(q) * 0.5))
    assert d.fits
    size, g = d.settings["q"]["S"]
    assert g in (1, 100, 1000) and 6000 <= size <= 60000
    assert d.f_granularity < 1.0  # the scan stepped down before bisecting the windows


def test_lighter_query_gives_more(tmp_path):
    heavy = managed(tmp_path, key="heavy", weight=4.0)
    light = managed(tmp_path, key="light", weight=1.0)
    budget = Budget(memory=(full(heavy) + full(light)) * 0.6)
    d = decide([heavy, light], budget)
    assert d.fits
    assert d.settings["light"]["S"][0] < d.settings["heavy"]["S"][0]


def test_queries_without_ranges_are_never_touched(tmp_path):
    fixed = managed(tmp_path, qos="{}", key="fixed")
    moving = managed(tmp_path, key="moving")
    assert not fixed.adjustable and fixed.windows == ()
    budget = Budget(memory=full(fixed) + least(moving) * 1.5)
    d = decide([fixed, moving], budget)
    assert d.fits and d.keep["fixed"] == 1.0
    assert d.per_query["fixed"].memory == pytest.approx(full(fixed))
    assert d.settings["moving"]["S"][0] < 10000


def test_shedding_only_when_every_range_is_exhausted(tmp_path):
    q = managed(tmp_path)
    budget = Budget(memory=least(q) * 0.5)
    d = decide([q], budget)
    assert d.f_window == 0.0 and d.f_granularity == 0.0
    assert d.settings["q"] == {"S": (1000, 1), "T": (1000, 1)}
    assert d.fits and 0.4 < d.shedding["q"] < 0.6  # the windows' state is linear in what they keep
    assert d.total.memory <= budget.target


def test_admission_rejects_with_the_estimate(tmp_path):
    running = managed(tmp_path, key="running")
    new = managed(tmp_path, key="new")
    ok, rejected = admit([running], [new], Budget(memory=least(running) + least(new) * 1.1))
    assert [q.key for q in ok] == ["new"] and rejected == []
    ok, rejected = admit([running], [new], Budget(memory=least(running) + least(new) * 0.9))
    assert ok == [] and [r.query for r in rejected] == ["new"]
    assert rejected[0].needed.memory == pytest.approx(least(running) + least(new))
    assert "minimum settings" in rejected[0].reason


def test_random_mixes_stay_inside_ranges_and_budget(tmp_path):
    """The properties brief-costmodel §6 lists for the manager, on random mixes."""
    rng = random.Random(7)
    for trial in range(6):
        (tmp_path / str(trial)).mkdir()
        qs = []
        for i in range(4):
            lo = rng.choice([500, 1000, 2000])
            hi = lo * rng.choice([2, 5, 10])
            cql = JOIN.replace("10000", str(hi)) if rng.random() < 0.5 else GROUP.replace("60000", str(hi))
            ladder = rng.choice(["", ", granularity: [1, 10, 100]"])
            qs.append(
                managed(tmp_path / str(trial), cql=cql, qos=f"{{window: [{lo}, {hi}]{ladder}}}", key=f"q{i}",
                        weight=rng.choice([1.0, 2.0, 5.0]), d=rng.choice([5.0, 20.0]))
            )
        most = sum(full(q) for q in qs)
        budget = Budget(memory=most * rng.uniform(0.2, 0.9), reserve=most * 0.05)
        d = decide(qs, budget)
        assert d.fits and d.total.memory <= budget.target
        for q in qs:
            for w in q.windows:
                size, g = d.settings[q.key][w.label]
                assert w.size_range[0] <= size <= w.size_range[1]
                assert g in (q.ladder or (1,))
