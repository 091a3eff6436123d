"""A-Caching in the MJoin (engine/operators/mjoin_cache.py, mjoin_caching.py): with every
candidate cache used from the first step, or caches added and dropped at random, the join's
output is the join of its inputs' relations at every instant — through inserts, deletes,
duplicates and NULL keys — and caches are hit; invalidation drops exactly the entries an
update could change."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa

from cq_service.cql.logical import ColRef
from cq_service.engine.cache_policy import Segment
from cq_service.engine.expressions import compile_expr
from cq_service.engine.operators.mjoin_cache import SegmentCache
from cq_service.plan.mjoins import Edge
from tests.unit.engine.mjoins import (
    CHAIN,
    TRIANGLE,
    AllCaches,
    Inputs,
    RandomCaches,
    chain_match,
    check,
    col,
    feed_chain,
    feed_triangle,
    triangle_match,
)


def _with(j: Inputs, selector) -> Inputs:
    j.op._init_caching(selector)
    return j


def test_every_cache_used_keeps_the_result() -> None:
    j = _with(Inputs(3, CHAIN), AllCaches())
    feed_chain(j)
    check(j, chain_match, 6)
    assert j.op.cache_choices > 0
    t = _with(Inputs(3, TRIANGLE), AllCaches())
    feed_triangle(t)
    check(t, triangle_match, 3)


def test_caches_added_and_dropped_at_random_keep_the_result() -> None:
    for seed in range(6):
        j = _with(Inputs(3, CHAIN), RandomCaches(seed))
        feed_chain(j)
        check(j, chain_match, 6)


def _repeated(selector, steps: int = 30) -> Inputs:
    """X (0) updates every step with keys 0..3; A (1) and B (2) fixed but for one expiry at
    step 10: the cache on X's pipeline (A then B) is hit and must forget what expired."""
    edges = (Edge(0, col(0), 1, col(0)), Edge(1, col(1), 2, col(0)))
    j = _with(Inputs(3, edges), selector)
    j.push(1, *((1, (k, k + r)) for k in range(4) for r in range(3)))
    j.push(2, *((1, (v, 7)) for v in range(8)))
    j.beat(1)
    j.run()
    rng = np.random.default_rng(1)
    for step in range(2, steps):
        j.push(0, *((step, (int(k), 0)) for k in rng.integers(0, 4, 5)))
        if step == 10:
            j.push(1, (step, (2, 3), -1))  # A's (2, 3) expires
            j.push(2, (step, (5, 7), -1))  # B's key 5 goes
        j.beat(step)
        j.run()
    return j


def test_a_cache_is_hit_and_forgets_what_expired() -> None:
    j = _repeated(AllCaches(every=1))
    check(j, chain_match, 29)
    st = j.op._seg_stats[Segment(0, 0, 2)]
    assert st.state == "used"
    # B holds no key part: its updates are joined back to A, the key's input, not a clear-all
    assert 2 in j.op._seg_plans[Segment(0, 0, 2)][7] and st.full_key
    assert j.op._caches
    stats_total_hits = sum(s.hits for s in j.op._seg_stats.values())
    assert stats_total_hits > 0


def test_a_batch_s_rows_of_a_key_share_one_fill() -> None:
    # X's pipeline (A then B) cached from the first step; one batch of X with keys
    # 0, 0, 0, 1, 1, 3 (3 matches nothing in A): three fills, the other three rows hit
    edges = (Edge(0, col(0), 1, col(0)), Edge(1, col(1), 2, col(0)))
    j = _with(Inputs(3, edges), AllCaches(every=1))
    j.push(1, *((1, (k, k)) for k in range(3)))
    j.push(2, *((1, (v, 7)) for v in range(3)))
    j.beat(1)
    j.run()  # the first choice: every candidate used
    j.op.cache_selector.every = 1000  # no more choices: the counts stay as they are
    st = j.op._seg_stats[Segment(0, 0, 2)]
    assert st.state == "used"
    for f in ("lookups", "hits", "batches", "fills", "keys", "traversals"):
        setattr(st, f, 0)
    j.push(0, *((2, (k, 0)) for k in (0, 0, 0, 1, 1, 3)))
    j.beat(2)
    j.run()
    assert (st.lookups, st.hits, st.batches, st.fills, st.keys) == (6, 3, 1, 1, 3)
    assert st.traversals == 3  # a fill runs one row per missing key
    j.push(0, *((3, (k, 0)) for k in (1, 0, 0)))
    j.beat(3)
    j.run()  # every key found: no fill
    assert (st.lookups, st.hits, st.batches, st.fills, st.keys) == (9, 6, 2, 1, 5)
    check(j, chain_match, 3)


def test_restore_starts_the_caches_again() -> None:
    j = _repeated(AllCaches(every=1), steps=12)
    assert any(len(c) for c in j.op._caches.values())
    j.op.restore(pickle.loads(pickle.dumps(j.op.snapshot())))
    assert not j.op._caches and all(s.state == "profiled" for s in j.op._seg_stats.values())
    j.push(0, (12, (1, 0)), (12, (2, 0)))
    j.beat(12)
    j.run()
    check(j, chain_match, 12)


def _cache(inv_inputs: list[int]) -> SegmentCache:
    seg = Segment(0, 0, 2)
    inv = [(s, compile_expr(ColRef(0, col(0).type))) for s in inv_inputs]
    return SegmentCache(seg, [], inv, [2, 3], values=True)


def _fill(c: SegmentCache, keys: list[tuple]) -> None:
    b = c.put_block([pa.array(list(range(len(keys))))] * 2, np.ones(len(keys), np.int64))
    for x, k in enumerate(keys):
        c.put(k, b, x, x + 1)
    c.unpin(b)


def test_invalidation_drops_what_an_update_could_change() -> None:
    # both key parts on input 1: the rows name the entries
    c = _cache([1, 1])
    _fill(c, [(1, 1), (2, 2), (3, 3)])
    assert c.invalidate(1, [pa.array([2])], 1) == 1
    assert c.get((2, 2)) is None and c.get((1, 1)) is not None and c.rows == 2
    # one part on input 1, one on input 2: entries that agree on input 1's part
    c = _cache([1, 2])
    _fill(c, [(1, 5), (1, 6), (2, 5)])
    assert c.invalidate(1, [pa.array([1])], 1) == 2
    assert c.get((2, 5)) is not None
    # input 3 holds no key part (it is deeper in the segment): everything goes
    assert c.invalidate(3, [pa.array([9])], 1) == 1
    assert len(c) == 0 and c.rows == 0 and not c._blocks


def test_direct_mapped_entries_and_the_row_bound() -> None:
    c = _cache([1])
    c.slots = 1
    _fill(c, [(1,), (2,)])  # one slot: the second replaces the first
    assert c.get((1,)) is None and c.get((2,)) is not None and len(c) == 1
    c.max_rows = 1
    b = c.put_block([pa.array([0, 1])] * 2, np.ones(2, np.int64))
    assert not c.put((3,), b, 0, 2)  # two rows: over the bound, not kept
    c.unpin(b)
    assert c.rows <= 1


class _Never:
    """Every candidate profiled, none used; no choice within the test."""

    name = "never"
    every = 10_000

    def choose(self, stats, pool_rows):  # pragma: no cover - never reached
        raise AssertionError


def test_the_cpu_of_probes_passes_upkeep_and_profiling_is_measured() -> None:
    # profiled (shadows): the segment's probes run uncached and are timed, its shadow's
    # lookups are charged to profiling and its invalidations to upkeep
    j = _repeated(_Never())
    check(j, chain_match, 29)
    st = j.op._seg_stats[Segment(0, 0, 2)]
    assert st.state == "profiled"
    assert st.plain_s > 0 and st.plain_rows == st.rows_in and st.plain_calls > 0
    assert st.plain_work == st.work
    assert st.profile_s > 0 and st.upkeep_s > 0  # B's and A's expiries at step 10
    assert st.cache_s == 0 and st.cache_rows == 0
    # used: its passes are timed, with the rows they looked up
    j = _repeated(AllCaches(every=1))
    st = j.op._seg_stats[Segment(0, 0, 2)]
    assert st.state == "used" and st.cache_s > 0 and st.cache_rows > 0
    assert st.profile_s == 0
