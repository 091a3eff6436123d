"""A shared join's buffer of one input (engine/operators/shared_join_buffer.py): with `twins`,
its counts of the retained tuples by row hash, and which new tuples it calls twins, checked
against a recount from scratch after every append and retain."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from cq_service.engine.batch import Batch
from cq_service.engine.operators.shared_join_buffer import JoinBuffer
from cq_service.engine.retract import row_hash
from cq_service.plan.shared_joins import SideWindow


def _batch(rng: np.random.Generator, n: int, t: int) -> Batch:
    """n tuples at instant t over few distinct values: duplicates, NULLs and NaNs."""
    k = rng.integers(0, 6, n)
    x = rng.choice(np.array([0.5, -0.0, 0.0, np.nan]), n)
    nulls = rng.random(n) < 0.1
    cols = (pa.array(k), pa.array(x, mask=nulls))
    return Batch(cols, np.full(n, t, np.int64), np.ones(n, np.int64))


def _counts(buf: JoinBuffer) -> Counter:
    return Counter(dict(zip(buf.hash_keys.tolist(), buf.hash_counts.tolist())))


@pytest.mark.parametrize("seed", range(5))
def test_the_counts_and_twins_match_a_recount(seed: int) -> None:
    rng = np.random.default_rng(seed)
    buf = JoinBuffer(twins=True)
    hashes: list[int] = []  # of every tuple appended, in order
    windows = [SideWindow("rows", int(rng.integers(1, 40))), SideWindow("range", 3)]
    for t in range(40):
        b = _batch(rng, int(rng.integers(0, 30)), t)
        h = row_hash(list(b.columns)).tolist()
        live = Counter(hashes[buf.base :])
        twin = buf.append(b, [b.columns[0]])
        nan = np.isnan(np.asarray(b.columns[1].fill_null(1.0)))
        expected = []
        for v, is_nan in zip(h, nan.tolist()):
            expected.append(live[v] > 0 or is_nan)
            live[v] += 1
        assert twin is not None and twin.tolist() == expected
        hashes.extend(h)
        assert _counts(buf) == Counter(hashes[buf.base :])
        buf.retain(windows, t, buf.count)
        assert _counts(buf) == Counter(hashes[buf.base :])
        assert (np.diff(buf.hash_keys.astype(np.float64)) >= 0).all()
        assert (buf.hash_counts > 0).all() and buf.hashes.tolist() == hashes[buf.base :]


def _filled(twins: bool) -> JoinBuffer:
    rng = np.random.default_rng(7)
    buf = JoinBuffer(twins=twins)
    for t in range(5):
        b = _batch(rng, 20, t)
        buf.append(b, [b.columns[0]])
    buf.retain([SideWindow("rows", 50)], 4, buf.count)
    return buf


def test_count_twins_counts_a_store_that_did_not() -> None:
    plain, counted = _filled(False), _filled(True)
    plain.count_twins()
    assert plain.twins and plain.hashes.tolist() == counted.hashes.tolist()
    assert _counts(plain) == _counts(counted)


def test_a_snapshot_round_trips_with_its_counts() -> None:
    buf = _filled(True)
    back = pickle.loads(pickle.dumps(buf))
    assert _counts(back) == _counts(buf) and back.hashes.tolist() == buf.hashes.tolist()


def test_a_snapshot_counted_in_a_dict_loads_recounted() -> None:
    buf = _filled(True)
    state = dict(buf.__dict__)
    del state["hash_keys"], state["hash_counts"]
    state["by_hash"] = dict(Counter(buf.hashes.tolist()))  # the counts as kept before
    old = JoinBuffer.__new__(JoinBuffer)
    old.__setstate__(state)
    assert "by_hash" not in old.__dict__ and _counts(old) == _counts(buf)


def test_a_snapshot_from_before_twins_counts_nothing_until_asked() -> None:
    buf = _filled(False)
    state = {
        k: v
        for k, v in buf.__dict__.items()
        if k not in ("twins", "hashes", "hash_keys", "hash_counts")
    }
    old = JoinBuffer.__new__(JoinBuffer)
    old.__setstate__(state)
    assert not old.twins and not len(old.hash_keys)
    old.count_twins()
    assert _counts(old) == _counts(_filled(True))


@pytest.mark.parametrize("seed", range(6))
def test_a_lookup_within_ranges_reads_what_a_filtered_lookup_finds(seed: int) -> None:
    """`JoinSide.lookup_within` (the partial scan of a bucket the shared join's units use)
    finds exactly the matches of a whole lookup that lie in each probe's position range,
    over several runs, expired rows at the front and NULL keys."""
    rng = np.random.default_rng(seed)
    buf = JoinBuffer()
    for t in range(int(rng.integers(1, 12))):
        n = int(rng.integers(1, 40))
        k = pa.array(rng.integers(0, 5, n), mask=rng.random(n) < 0.1)
        buf.append(Batch((k,), np.full(n, t, np.int64), np.ones(n, np.int64)), [k])
        if rng.random() < 0.3:
            buf.retain([SideWindow("rows", int(rng.integers(1, 60)))], t + 1, buf.count)
    side = buf.rows
    m = int(rng.integers(1, 30))
    probe = [pa.array(rng.integers(0, 6, m), mask=rng.random(m) < 0.1)]
    lo = rng.integers(0, len(side) + 1, m)
    hi = np.minimum(lo + rng.integers(0, len(side) + 1, m), len(side))
    q, j = side.lookup(probe)
    keep = (j >= lo[q]) & (j < hi[q])
    want = sorted(zip(q[keep].tolist(), j[keep].tolist()))
    q2, j2 = side.lookup_within(probe, lo, hi)
    assert sorted(zip(q2.tolist(), j2.tolist())) == want
