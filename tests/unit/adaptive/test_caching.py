"""A-Caching's selector (adaptive/caching.py): the cost model's terms (the row model and the
measured CPU of the probes, the cache's passes, its upkeep and the shadows), the per-pipeline
dynamic programme against exhaustive search, the pool's greedy share, and the states."""

from __future__ import annotations

from itertools import combinations, pairwise

import numpy as np

from cq_service.adaptive.caching import (
    CALL,
    KEY,
    PASS,
    ACaching,
    best_segments,
    cache_cost_ratio,
    measured_net,
    modelled_costs,
    net_benefit,
    net_value,
    seconds_per_row,
)
from cq_service.engine.cache_policy import Segment, SegmentStats


def _stats(seg: Segment, **kw) -> SegmentStats:
    s = SegmentStats(seg, full_key=kw.pop("full_key", True))
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def test_net_benefit_terms() -> None:
    seg = Segment(0, 0, 2)
    assert net_benefit(_stats(seg)) is None  # nothing seen
    # 100 rows in, 10 rows of work each, 2 out each, hit 0.9, 50 updates
    s = _stats(seg, rows_in=100, work=1000, rows_out=200, lookups=100, hits=90, updates=50)
    assert net_benefit(s) == 100 * (0.9 * 10 - 1 - 2) - 50
    s.full_key = False
    s.entries = 40
    assert net_benefit(s) == 100 * (0.9 * 10 - 1 - 2) - 50 - 40 * 0.05
    cold = _stats(seg, rows_in=100, work=300, rows_out=100, lookups=100, hits=10, updates=0)
    assert net_benefit(cold) < 0  # hits too rare to pay for lookups


def test_net_benefit_counts_batches() -> None:
    seg = Segment(0, 0, 2)
    rows = dict(rows_in=100, work=1000, rows_out=200, lookups=100, hits=90, updates=50)
    base = 100 * (0.9 * 10 - 1 - 2) - 50
    # 4 batches, one of them with a key missing: 3 batches skip the segment's 2 probe calls;
    # every batch pays a pass through the cache, and each distinct key a lookup
    s = _stats(seg, batches=4, fills=1, keys=30, **rows)
    assert net_benefit(s) == base + CALL * 3 * 2 - PASS * 4 - KEY * 30
    # every batch fills, many distinct keys: the per-row saving does not pay for the passes
    s = _stats(seg, batches=4, fills=4, keys=100, **rows)
    assert net_benefit(s) < 0
    # a used cache's work is its fills': W per traversal (one row per missing key)
    s = _stats(seg, traversals=10, **{**rows, "work": 100})
    assert net_benefit(s) == base


def _exhaustive(nets: dict[Segment, float]) -> float:
    segs = list(nets)
    best = 0.0
    for r in range(1, len(segs) + 1):
        for combo in combinations(segs, r):
            if any(a.overlaps(b) for a, b in combinations(combo, 2)):
                continue
            best = max(best, sum(nets[s] for s in combo))
    return best


def test_the_programme_matches_exhaustive_search() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(2, 6))
        nets = {
            Segment(0, k, e): float(rng.normal()) for k in range(m) for e in range(k + 2, m + 1)
        }
        total, chosen = best_segments(nets, m)
        assert abs(total - _exhaustive(nets)) < 1e-9
        assert abs(sum(nets[s] for s in chosen) - total) < 1e-9
        assert not any(a.overlaps(b) for a, b in combinations(chosen, 2))


def test_choose_uses_what_pays_within_the_pool_and_profiles_the_unknown() -> None:
    good = _stats(
        Segment(0, 0, 2),
        rows_in=100,
        work=1000,
        rows_out=100,
        lookups=100,
        hits=90,
        entries=10,
        state="profiled",
    )
    bad = _stats(
        Segment(1, 0, 2),
        rows_in=100,
        work=200,
        rows_out=100,
        lookups=100,
        hits=5,
        entries=90,
        state="profiled",
    )
    new = _stats(Segment(2, 0, 2), state="profiled")
    sel = ACaching(3)
    choice = sel.choose([good, bad, new], pool_rows=1000)
    assert set(choice.used) == {good.segment}
    assert choice.profiled == frozenset({new.segment})  # no estimate yet: keep profiling
    assert sel.choose([good, bad, new], pool_rows=0).used == {}  # no pool, no cache
    sel.choices = ACaching.REPROFILE - 1
    bad.state = "unused"
    again = sel.choose([good, bad, new], pool_rows=1000)
    assert bad.segment in again.profiled  # unused ones are profiled again now and then


# a candidate's counts as the row model sees them (it says: a cache pays), and the CPU the
# engine measured: 100 rows through the probes uncached took 1 ms (1,000 rows of work + one
# call: 1 ms / 1,750 rows = 0.57 µs a row of work)
ROWS = dict(rows_in=100, work=1000, rows_out=200, lookups=100, hits=90, updates=50)
PLAIN = dict(plain_s=1e-3, plain_rows=100, plain_calls=1, plain_work=1000)


def test_measured_costs_in_rows_of_work() -> None:
    seg = Segment(0, 0, 2)
    assert seconds_per_row(_stats(seg, **ROWS)) is None  # never timed
    s = _stats(seg, **ROWS, **PLAIN)
    unit = 1e-3 / (1000 + CALL)
    assert abs(seconds_per_row(s) - unit) < 1e-15  # type: ignore[operator]
    assert measured_net(s) is None  # no cache has run
    # its cache ran on 100 rows in 0.4 ms and keeping it consistent took 0.2 ms
    s = _stats(seg, **ROWS, **PLAIN, cache_s=4e-4, cache_rows=100, upkeep_s=2e-4)
    assert abs(measured_net(s) - (100 * (1e-5 - 4e-6) - 2e-4) / unit) < 1e-6  # type: ignore[operator]
    assert net_value(s) == measured_net(s)  # once measured, the measure decides


def test_upkeep_and_passes_as_measured_drop_a_cache_the_row_model_keeps() -> None:
    seg = Segment(0, 0, 2)
    assert net_benefit(_stats(seg, **ROWS)) > 0  # type: ignore[operator]
    # invalidating its shadow took 2 ms: more than the probes it would save (the old
    # selector charged one row per update, 50 rows: 0.03 ms)
    costly = _stats(seg, **ROWS, **PLAIN, upkeep_s=2e-3, state="profiled")
    assert net_value(costly) < 0  # type: ignore[operator]
    # a used cache whose passes cost more than the probes did: dropped, though hits are 90%
    slow = _stats(seg, **ROWS, **PLAIN, cache_s=1.2e-3, cache_rows=100, state="used")
    assert net_benefit(slow) > 0 and measured_net(slow) < 0  # type: ignore[operator]
    sel = ACaching(3)
    assert sel.choose([costly], pool_rows=1000).used == {}
    assert sel.choose([slow], pool_rows=1000).used == {}
    fast = _stats(seg, **ROWS, **PLAIN, cache_s=1e-4, cache_rows=100, state="used")
    assert set(sel.choose([fast], pool_rows=1000).used) == {seg}


def test_what_caches_cost_against_the_model_is_learnt() -> None:
    seg, other = Segment(0, 0, 2), Segment(1, 0, 2)
    used = _stats(seg, **ROWS, **PLAIN, cache_s=1.2e-3, cache_rows=100, state="used")
    _, cached = modelled_costs(used)  # type: ignore[misc]
    unit = seconds_per_row(used)
    assert abs(cache_cost_ratio(used) - (1.2e-5 / unit) / (cached / 100)) < 1e-9  # type: ignore[operator]
    # a candidate never run as a cache, which the row model alone would use
    fresh = _stats(other, **ROWS, **PLAIN, state="profiled")
    assert net_value(fresh) > 0  # type: ignore[operator]
    sel = ACaching(3)
    choice = sel.choose([used, fresh], pool_rows=1000)
    assert sel.ratio == cache_cost_ratio(used) > 1
    assert choice.used == {}  # its cached cost scaled by what caches measured: no gain


def test_profiling_backs_off_while_it_finds_nothing() -> None:
    bad = _stats(Segment(0, 0, 2), rows_in=100, work=200, rows_out=100, lookups=100, hits=5)
    sel = ACaching(3)
    rounds = []
    for _ in range(40):
        choice = sel.choose([bad], pool_rows=1000)
        if choice.profiled:
            rounds.append(sel.choices)
        bad.state = "profiled" if choice.profiled else "unused"
    gaps = [b - a for a, b in pairwise(rounds)]
    assert gaps == sorted(gaps) and gaps[-1] > ACaching.REPROFILE  # ever rarer


def test_a_candidate_valued_by_its_measures_is_not_profiled_again() -> None:
    seg = Segment(0, 0, 2)
    slow = _stats(seg, **ROWS, **PLAIN, cache_s=1.2e-3, cache_rows=100, state="used")
    fresh = _stats(Segment(1, 0, 2), **ROWS, state="unused")
    sel = ACaching(3)
    sel.choices = ACaching.REPROFILE - 1  # the next choice is a profiling round
    choice = sel.choose([slow, fresh], pool_rows=1000)
    assert seg not in choice.used and seg not in choice.profiled
    assert fresh.segment in choice.profiled
