"""Cutting a batch into (instant, group) segments, against a direct evaluation: segments
numbered by their first element, rows in segment order (stable within a segment), each
segment's instant, group and Δrows, each group's first row, and per-segment sums of batch-order
values both before and after the rows have been put in segment order. Batches of one instant
(the segments are the groups), several instants in order and out of order, one and two keys,
NULL keys, big weights."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from cq_service.engine.operators.dense_ids import dense_ids
from cq_service.engine.operators.segments import Segments, group_ids
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT, STR = DataType.INT, DataType.STRING


def _reference(elems: list[tuple], nkeys: int) -> list[tuple]:
    """Per segment, in order of first element: (ts, key, its rows)."""
    segs: dict[tuple, list[int]] = {}
    for r, (ts, row, _) in enumerate(elems):
        segs.setdefault((ts, row[:nkeys]), []).append(r)
    return [(ts, key, rows) for (ts, key), rows in segs.items()]


def _case(rng: random.Random, n: int, instants: int, sorted_ts: bool, groups: int) -> list[tuple]:
    ts = [rng.randrange(instants) * 7 for _ in range(n)]
    if sorted_ts:
        ts.sort()
    out = []
    for t in ts:
        g = rng.randrange(groups)
        key = (None if g == 0 else g, rng.choice(["a", "b", None]))
        out.append((t, (*key, rng.randrange(-50, 50)), rng.choice([1, -1, 2, 2**40])))
    return out


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("nkeys", [1, 2])
def test_segments_match_a_direct_cut(seed: int, nkeys: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(1, 300)
    instants = rng.choice([1, 1, 2, 5, 40])
    elems = _case(rng, n, instants, sorted_ts=rng.random() < 0.8, groups=rng.choice([2, 10, 500]))
    batch = make_batch([INT, STR, INT], elems)
    keys = list(batch.columns[:nkeys])
    seg = Segments(batch, keys)
    ref = _reference(elems, nkeys)
    assert len(seg) == len(ref)
    assert seg.ts.tolist() == [ts for ts, _, _ in ref]
    assert [seg.gkeys[g] for g in seg.gid.tolist()] == [key for _, key, _ in ref]
    assert len(set(seg.gkeys)) == seg.groups
    first_row = {}
    for r, (_, row, _) in enumerate(elems):
        first_row.setdefault(row[:nkeys], r)
    assert seg.grow.tolist() == [first_row[k] for k in seg.gkeys]
    w = [e[2] for e in elems]
    assert seg.drows.tolist() == [sum(w[r] for r in rows) for _, _, rows in ref]
    a = np.array([e[1][2] for e in elems], dtype=np.int64) * batch.w
    want = [sum(int(a[r]) for r in rows) for _, _, rows in ref]
    assert seg.segment_sums(a).tolist() == want
    ids = seg.segment_ids().tolist()
    assert all(ids[r] == i for i, (_, _, rows) in enumerate(ref) for r in rows)
    in_order = [r for _, _, rows in ref for r in rows]
    assert seg.take(np.arange(n)).tolist() == in_order
    assert seg.w.tolist() == [w[r] for r in in_order]
    lengths = [len(rows) for _, _, rows in ref]
    assert (seg.ends - seg.starts).tolist() == lengths
    assert seg.segment_sums(a).tolist() == want  # after the rows were sorted into order
    assert seg.sums(seg.take(a)).tolist() == want
    assert seg.row_gid().tolist() == [seg.gid[ids[r]] for r in in_order]


def test_one_instant_segments_are_the_groups() -> None:
    elems = [(5, (g, "x", 1), 1) for g in (3, 1, 3, 2, 1)]
    seg = Segments(make_batch([INT, STR, INT], elems), [pa.array([3, 1, 3, 2, 1])])
    assert seg.gid.tolist() == [0, 1, 2]
    assert seg.take(np.arange(5)).tolist() == [0, 2, 1, 4, 3]
    assert seg.drows.tolist() == [2, 2, 1]


def test_dense_ids_number_in_order_of_first_appearance_on_either_path():
    """Direct addressing (narrow spans) and Arrow's hash (wide ones) give the same ids: dense,
    in order of first appearance, with each id's first row."""
    rng = np.random.default_rng(7)
    for n, span, lo in [(1, 1, 0), (5, 3, -2), (1000, 50, 10**12), (1000, 10**9, -(10**15)),
                        (4000, 9000, 0), (4000, 9000, -(2**62))]:
        codes = rng.integers(0, span, n) + lo
        ids, firsts = dense_ids(codes)
        _, first_at, inverse = np.unique(codes, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first_at))  # each distinct value's order of appearance
        assert ids.tolist() == rank[inverse].tolist()
        assert firsts.tolist() == sorted(first_at.tolist())


def test_group_ids_agree_for_int_string_null_and_compound_keys():
    ints = pa.array([5, 3, 5, 9, 3, 3])
    strs = pa.array(["a", "b", "a", "a", None, None])
    nulls = pa.array([1, None, 1, None, 2, 1])
    assert [x.tolist() for x in group_ids([ints])] == [[0, 1, 0, 2, 1, 1], [0, 1, 3]]
    assert [x.tolist() for x in group_ids([nulls])] == [[0, 1, 0, 1, 2, 0], [0, 1, 4]]
    gid, first = group_ids([ints, strs])
    assert gid.tolist() == [0, 1, 0, 2, 3, 3] and first.tolist() == [0, 1, 3, 4]
    gid, first = group_ids([strs, ints])
    assert gid.tolist() == [0, 1, 0, 2, 3, 3] and first.tolist() == [0, 1, 3, 4]
