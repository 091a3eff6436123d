"""consolidate / expand: net weights per instant, NULLs, order within an instant."""

from __future__ import annotations

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import consolidate, expand, unique_sorted
from cq_service.types import DataType

INT, STR, FLT = DataType.INT, DataType.STRING, DataType.FLOAT
TYPES = [INT, STR]


def make(elems: list[tuple[int, tuple, int]], ticks: tuple[int, ...] = ()) -> Batch:
    """elems: (ts, row, weight) in timestamp order."""
    return Batch.from_rows(
        [e[1] for e in elems],
        [e[0] for e in elems],
        [e[2] for e in elems],
        TYPES,
        np.asarray(ticks, dtype=np.int64),
    )


def elements(b: Batch) -> list[tuple[int, tuple, int]]:
    return list(zip(b.ts.tolist(), b.rows(), b.w.tolist()))


def test_cancellation_within_an_instant():
    b = make([(1, (1, "a"), 1), (1, (2, "b"), 1), (1, (1, "a"), -1)])
    assert elements(consolidate(b)) == [(1, (2, "b"), 1)]


def test_no_cancellation_across_instants():
    b = make([(1, (1, "a"), 1), (2, (1, "a"), -1)])
    assert elements(consolidate(b)) == [(1, (1, "a"), 1), (2, (1, "a"), -1)]


def test_multiplicities_are_summed():
    b = make([(3, (1, "a"), 1), (3, (1, "a"), 1), (3, (1, "a"), 1), (3, (1, "a"), -1)])
    assert elements(consolidate(b)) == [(3, (1, "a"), 2)]


def test_everything_cancels():
    b = make([(0, (1, "a"), 1), (0, (1, "a"), -1)], ticks=(0,))
    out = consolidate(b)
    assert len(out) == 0
    assert out.ticks.tolist() == [0]


def test_null_values_are_rows_like_any_other():
    b = make(
        [
            (1, (None, "a"), 1),
            (1, (None, None), 1),
            (1, (None, "a"), -1),
            (1, (None, None), 1),
            (1, (1, None), 1),
            (1, (1, None), -1),
        ]
    )
    assert elements(consolidate(b)) == [(1, (None, None), 2)]


def test_null_is_distinct_from_values():
    b = make([(1, (0, ""), 1), (1, (None, None), -1), (1, (0, ""), -1)])
    assert elements(consolidate(b)) == [(1, (None, None), -1)]


def test_retractions_before_insertions_within_an_instant():
    b = make(
        [
            (1, (1, "x"), 1),
            (1, (2, "y"), -1),
            (2, (3, "z"), 1),
            (2, (4, "w"), -1),
            (2, (5, "v"), 1),
            (2, (6, "u"), -1),
        ]
    )
    out = elements(consolidate(b))
    assert [e[0] for e in out] == [1, 1, 2, 2, 2, 2]
    by_ts = {t: [w for ts, _, w in out if ts == t] for t in (1, 2)}
    assert by_ts == {1: [-1, 1], 2: [-1, -1, 1, 1]}
    assert sorted(out) == sorted(elements(b))


def test_ticks_are_kept():
    b = make([(1, (1, "a"), 1), (1, (1, "a"), -1), (4, (1, "a"), -1)], ticks=(1, 3, 4))
    out = consolidate(b)
    assert out.ticks.tolist() == [1, 3, 4]
    assert elements(out) == [(4, (1, "a"), -1)]


def test_float_rows():
    b = Batch.from_rows([(1.5,), (1.5,), (2.0,)], [0, 0, 0], [1, -1, -1], [FLT])
    assert elements(consolidate(b)) == [(0, (2.0,), -1)]


def test_expand_one_element_per_unit_of_weight():
    b = make([(1, (1, "a"), -2), (1, (2, "b"), 3), (2, (None, None), 1)], ticks=(1, 2))
    out = expand(b)
    assert elements(out) == [
        (1, (1, "a"), -1),
        (1, (1, "a"), -1),
        (1, (2, "b"), 1),
        (1, (2, "b"), 1),
        (1, (2, "b"), 1),
        (2, (None, None), 1),
    ]
    assert out.ticks.tolist() == [1, 2]


def test_expand_of_unit_weights_is_identity():
    b = make([(1, (1, "a"), 1), (2, (1, "a"), -1)])
    assert elements(expand(b)) == elements(b)


def test_consolidate_then_expand_keeps_the_net_bag():
    rng = np.random.default_rng(7)
    elems = []
    for t in range(5):
        for _ in range(30):
            v = int(rng.integers(0, 4))
            elems.append((t, (v, None if v == 0 else str(v)), int(rng.choice([-1, 1]))))
    out = elements(expand(consolidate(make(elems))))
    for t in range(5):
        net: dict[tuple, int] = {}
        for ts, row, w in elems:
            if ts == t:
                net[row] = net.get(row, 0) + w
        got: dict[tuple, int] = {}
        for ts, row, w in out:
            if ts == t:
                got[row] = got.get(row, 0) + w
        assert got == {r: w for r, w in net.items() if w}
    assert all(abs(w) == 1 for _, _, w in out)
    assert [e[0] for e in out] == sorted(e[0] for e in out)


def test_unique_sorted():
    assert unique_sorted(np.array([1, 1, 2, 5, 5, 5], dtype=np.int64)).tolist() == [1, 2, 5]
    assert unique_sorted(np.array([], dtype=np.int64)).tolist() == []
