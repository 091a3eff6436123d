"""The group table's int index against a dict. Its hash table: growth through several rebuilds,
deletions leaving tombstones that later keys probe past and reuse, keys that share a home
bucket, NULL, negative and extreme keys, and a snapshot of the former sorted index. Its direct
table: growth up and down, rebasing once empty, and the move to the hash table when keys
spread, in the middle of a run."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pyarrow as pa
import pytest

from cq_service.engine.operators.group_index import _MIN_BITS, IntIndex
from cq_service.engine.operators.group_table import _IntIndex


class _Seg:
    """What IntIndex.lookup reads of a Segments: each group's key."""

    def __init__(self, keys: list[int | None]):
        self._k = pa.array(keys, type=pa.int64())

    def key_values(self) -> list[pa.Array]:
        return [self._k]


def _check(index: IntIndex, ref: dict) -> None:
    assert len(index) == len(ref)
    assert dict((k[0], s) for k, s in index.items()) == ref
    if ref:
        keys = list(ref)
        slot, _ = index.lookup(_Seg(keys))
        assert slot.tolist() == [ref[k] for k in keys]


def _step(index: IntIndex, ref: dict, batch: list[int | None], drop: set, next_slot: list[int]) -> None:
    """Look a batch of distinct keys up, delete those in `drop`, insert the absent ones."""
    slot, where = index.lookup(_Seg(batch))
    assert slot.tolist() == [ref.get(k, -1) for k in batch]
    gone = np.array([i for i, k in enumerate(batch) if k in ref and k in drop], dtype=np.int64)
    new = np.array([i for i, k in enumerate(batch) if k not in ref], dtype=np.int64)
    slots = np.arange(next_slot[0], next_slot[0] + len(new), dtype=np.int64)
    next_slot[0] += len(new)
    index.update(where, gone, new, slots)
    for i in gone.tolist():
        del ref[batch[i]]
    for i, s in zip(new.tolist(), slots.tolist()):
        ref[batch[i]] = s


def test_random_batches_grow_delete_and_reuse() -> None:
    rng = random.Random(7)
    index, ref, nxt = IntIndex(direct=False), {}, [0]
    pool = [rng.randrange(-(2**63), 2**63) for _ in range(50)] + list(range(-3000, 3000))
    pool += [-(2**63), 2**63 - 1, 0, None]
    for _ in range(300):
        batch = list(dict.fromkeys(rng.sample(pool, rng.randrange(1, 400))))
        drop = {k for k in batch if rng.random() < 0.6}
        _step(index, ref, batch, drop, nxt)
        _check(index, ref)
    assert index.bits > _MIN_BITS  # grew
    pickle.loads(pickle.dumps(index))  # a snapshot of the table round-trips
    _check(pickle.loads(pickle.dumps(index)), ref)


def test_keys_sharing_a_home_bucket_and_tombstones() -> None:
    index = IntIndex(direct=False)
    # keys whose multiplicative hash lands in one bucket: probe chains through each other
    home = index._home(np.arange(200_000, dtype=np.int64))
    same = np.flatnonzero(home == home[0])[:40].tolist()
    assert len(same) >= 20
    ref, nxt = {}, [0]
    _step(index, ref, same, set(), nxt)
    _check(index, ref)
    # delete every other key: later keys are found past the tombstones
    _step(index, ref, same[::2], set(same[::2]), nxt)
    _check(index, ref)
    assert all(k not in dict(index.items()) for k in same[::2])
    # the deleted keys come back into buckets of tombstones; `used` does not grow for them
    used = index.used
    _step(index, ref, same[::2], set(), nxt)
    _check(index, ref)
    assert index.used == used


def test_many_inserts_and_deletes_rebuild_without_tombstones() -> None:
    index, ref, nxt = IntIndex(direct=False), {}, [0]
    for r in range(30):
        batch = list(range(r * 1000, r * 1000 + 3000))
        _step(index, ref, batch, set(range(r * 1000, r * 1000 + 1000)), nxt)
        assert index.used <= (1 << index.bits) // 2
    _check(index, ref)
    assert index.live == len(ref)


@pytest.mark.parametrize("direct", [True, False])
def test_null_key(direct: bool) -> None:
    index, ref, nxt = IntIndex(direct), {}, [0]
    _step(index, ref, [None], set(), nxt)  # only NULL: the direct table stays empty
    _step(index, ref, [None, 1], set(), nxt)
    _check(index, ref)
    _step(index, ref, [None, 7], {None}, nxt)
    assert index.null == -1
    _check(index, ref)
    assert (index.direct is not None) == direct


def test_direct_table_grows_both_ways_rebases_and_spreads_into_the_hash_table() -> None:
    index, ref, nxt = IntIndex(), {}, [0]
    _step(index, ref, list(range(1000, 1100)), set(), nxt)
    assert index.direct is not None and index.base == 1000
    _step(index, ref, list(range(900, 950)) + list(range(5000, 5010)), set(range(1000, 1050)), nxt)
    assert index.direct is not None and index.base == 900
    _check(index, ref)
    # everything goes: the next keys, far away, rebase the table instead of spreading it
    _step(index, ref, sorted(ref), set(ref), nxt)
    assert not ref and len(index) == 0
    _step(index, ref, [10**15, 10**15 + 3, None], set(), nxt)
    assert index.direct is not None and index.base == 10**15
    _check(index, ref)
    # keys 2**62 apart: the held keys move into the hash table, which answers from then on
    _step(index, ref, [-(2**62), 10**15 + 1], {10**15}, nxt)
    assert index.direct is None
    _check(index, ref)
    rng = random.Random(3)
    for _ in range(50):
        batch = list(dict.fromkeys(rng.randrange(-(2**63), 2**63) for _ in range(30)))
        _step(index, ref, [*batch, 10**15 + 2], {k for k in batch if rng.random() < 0.5}, nxt)
        _check(index, ref)


def test_random_batches_in_a_direct_table() -> None:
    rng = random.Random(11)
    index, ref, nxt = IntIndex(), {}, [0]
    for r in range(200):  # ids drifting upwards, as sequence numbers do
        pool = [*range(r * 50, r * 50 + 3000), None]
        batch = list(dict.fromkeys(rng.sample(pool, rng.randrange(1, 300))))
        _step(index, ref, batch, {k for k in batch if rng.random() < 0.5}, nxt)
        _check(index, ref)
    assert index.direct is not None
    _check(pickle.loads(pickle.dumps(index)), ref)


def test_snapshot_of_the_hash_table_before_direct_tables_restores() -> None:
    index, ref, nxt = IntIndex(direct=False), {}, [0]
    _step(index, ref, [5, -3, None], set(), nxt)
    state = index.__reduce_ex__(2)[2]
    fields = dict(state[1])
    del fields["base"], fields["direct"]
    old = IntIndex.__new__(IntIndex)
    old.__setstate__((None, fields))
    assert old.direct is None
    _check(old, ref)


def test_snapshot_of_the_sorted_index_restores() -> None:
    """A snapshot taken when the index was sorted arrays (keys, slots, null) restores."""
    old = IntIndex.__new__(IntIndex)
    old.__setstate__((None, {"keys": np.array([-5, 3, 9], dtype=np.int64),
                             "slots": np.array([2, 0, 1], dtype=np.int64), "null": 4}))
    _check(old, {-5: 2, 3: 0, 9: 1, None: 4})
    assert _IntIndex is IntIndex


def test_hash_table_moves_to_a_direct_table_when_the_groups_fill_their_span() -> None:
    index, ref, nxt = IntIndex(), {}, [0]
    _step(index, ref, [0, 10**9], set(), nxt)  # two keys far apart: a hash table
    assert index.direct is None
    _step(index, ref, [10**9], {10**9}, nxt)
    for r in range(10):
        _step(index, ref, list(range(r * 2000 + 1, r * 2000 + 2001)), set(), nxt)
        _check(index, ref)
    assert index.direct is not None and index.base == 0
    _step(index, ref, [-(10**12)], set(), nxt)  # and back, when one spreads them again
    assert index.direct is None
    _check(index, ref)
