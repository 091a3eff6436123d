"""The cost model's formulas against the numbers of paper 004 (brief-costmodel.md §6)."""

from __future__ import annotations

import math

import pytest

from cq_service.adaptive.cost_model import (
    Edge,
    aggregate,
    aggregate_memory,
    cross,
    granularity,
    group_by,
    join_memory,
    select,
    source,
    time_window,
    union,
)


def test_join_memory_of_the_papers_example():
    """d = 10 ms, w = 10 s on both sides: the model keeps 2,003 elements (measured: 2,005)."""
    s = time_window(source(10.0), 10_000)
    assert (s.d, s.l) == (10.0, 10_001.0)
    assert join_memory(s, s) == 2_003.0


def test_halving_both_windows_halves_the_join_state():
    full = time_window(source(10.0), 10_000)
    half = time_window(source(10.0), 5_000)
    assert join_memory(half, half) / join_memory(full, full) == pytest.approx(0.5, abs=0.01)


def test_shedding_half_of_each_input_halves_the_state_and_quarters_the_results():
    s = time_window(source(10.0), 10_000)
    shed = time_window(select(source(10.0), 0.5), 10_000)
    assert join_memory(shed, shed) / join_memory(s, s) == pytest.approx(0.5, abs=0.01)
    assert cross(shed, shed, 0.02).rate / cross(s, s, 0.02).rate == pytest.approx(0.25)


@pytest.mark.parametrize(("g", "expected"), [(1, 121), (100, 52), (500, 12)])
def test_aggregation_memory_of_the_papers_example(g, expected):
    """d = 50, w = 6000: 121 partial aggregates at g = 1, 52 after Γ(100), 12 after Γ(500)
    (measured: 120, 51, 11)."""
    w = time_window(source(50.0), 6_000)
    stream = w if g == 1 else granularity(w, g)
    assert aggregate_memory(stream) == expected


def test_output_formulas():
    s = source(4.0)
    assert select(s, 0.25) == Edge(16.0, 1.0, 1)
    assert select(s, 0.0).rate == 0
    u = union(Edge(2.0, 10.0), Edge(4.0, 1.0))
    assert u.rate == pytest.approx(0.75) and u.l == pytest.approx((10 / 2 + 1 / 4) / 0.75)
    j = cross(Edge(2.0, 10.0), Edge(4.0, 30.0), 0.1)
    assert j.d == pytest.approx(2 * 4 / (0.1 * 40)) and j.l == pytest.approx(300 / 40)
    w = time_window(source(5.0), 99)
    a = aggregate(w)  # d < l: the aggregate changes at about every start and end
    assert a.d == a.l == pytest.approx(1 / (1 - (1 - 1 / 5) ** 2))
    assert aggregate(source(5.0)) == source(5.0)  # d >= l: one element at a time
    gb = group_by(w, 4)
    some = 1 - (1 - 1 / 20) ** 2
    assert gb.d == pytest.approx(1 / (4 * some)) and gb.l == pytest.approx(1 / some)


def test_granularity_rounds_intervals_inward():
    e = Edge(5.0, 250.0, 1)
    assert granularity(e, 100) == Edge(5.0, 150.0, 100)  # l >= 2g: every element survives
    mid = granularity(Edge(5.0, 150.0, 1), 100)  # g < l < 2g: only some survive
    assert (mid.d, mid.l) == (pytest.approx(5.0 * 100 / 50), 100.0)
    assert granularity(Edge(5.0, 80.0, 1), 100).rate == 0  # l <= g: nothing survives
    with pytest.raises(ValueError, match="not a multiple"):
        granularity(Edge(5.0, 80.0, 10), 15)


def test_several_elements_per_time_unit_use_the_poisson_form():
    """(1 − 1/d)^k is meaningless for d <= 1; e^(−k/d) takes over, and for large d the two
    agree."""
    dense = time_window(source(0.5), 1_000)
    assert aggregate_memory(dense) == math.ceil(1_001 * -math.expm1(-1 / 0.5))
    sparse = time_window(source(50.0), 6_000)
    exact, poisson = aggregate_memory(sparse), aggregate_memory(sparse, poisson=True)
    assert abs(exact - poisson) <= 2


def test_join_cpu_halves_with_the_windows_and_quarters_with_shedding():
    """Halving both windows halves probe and result costs (nested loops: no hashing);
    dropping half of each input quarters them (brief §6)."""
    from cq_service.adaptive.cost_model import join_cpu

    full = time_window(source(10.0), 10_000)
    half = time_window(source(10.0), 5_000)
    shed = time_window(select(source(10.0), 0.5), 10_000)
    f, h, s = (join_cpu(x, x, 0.02) for x in (full, half, shed))
    assert h.probe / f.probe == pytest.approx(0.5, abs=0.01)
    assert h.result / f.result == pytest.approx(0.5, abs=0.01)
    assert s.probe / f.probe == pytest.approx(0.25) and s.result / f.result == pytest.approx(0.25)
    assert h.insert == f.insert and s.insert == f.insert / 2  # per arrival, whatever the window
    hashed = join_cpu(full, full, 0.02, buckets=(100, 100))
    assert hashed.probe < f.probe / 50  # a bucket holds a hundredth of the window
    assert f.total == f.insert + f.probe + f.result + f.reorg


def test_aggregate_cpu_falls_with_a_coarser_granularity():
    from cq_service.adaptive.cost_model import Constants, aggregate_cpu

    w = time_window(source(50.0), 6_000)
    costs = [aggregate_cpu(granularity(w, g) if g > 1 else w) for g in (1, 100, 500)]
    assert costs[0] > costs[1] > costs[2] > 0
    only_updates = Constants(**{k: 0.0 for k in Constants.__dataclass_fields__} | {"update": 1.0})
    # per unit of time: 1/d elements, each updating ~ the aggregates it overlaps
    assert aggregate_cpu(w, only_updates) == pytest.approx(6_001 / 50 * (1 / 50))
