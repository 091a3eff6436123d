"""A-Caching's selector (adaptive/caching.py): the cost model's terms, the per-pipeline
dynamic programme against exhaustive search, the pool's greedy share, and the states."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from cq_service.adaptive.caching import CALL, KEY, PASS, ACaching, best_segments, net_benefit
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
