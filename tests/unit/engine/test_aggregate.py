"""Aggregate: grouped and global, COUNT(*)/COUNT/SUM/AVG/MIN/MAX with and without DISTINCT,
under insertions and deletions, NULLs, groups appearing and disappearing, and the global
aggregate's row from the first instant that matters."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from cq_service.cql.logical import AggCall, ColRef
from cq_service.engine.batch import Batch
from cq_service.engine.operators.aggregate import Aggregate
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT, STR, FLT = DataType.INT, DataType.STRING, DataType.FLOAT
IN_TYPES = [STR, INT, FLT]  # (g, x, f)
G, X, F = ColRef(0, STR), ColRef(1, INT), ColRef(2, FLT)


def B(*elems: tuple, ticks: tuple[int, ...] = ()) -> Batch:
    return make_batch(IN_TYPES, elems, ticks)


def agg(fn, arg=None, distinct=False) -> AggCall:
    if fn == "count":
        t = INT
    elif fn == "avg":
        t = FLT
    else:
        t = arg.type
    return AggCall(fn, arg, distinct, t)


class AggHarness:
    def __init__(self, keys: tuple, aggs: tuple[AggCall, ...]):
        self.inq = Queue("in")
        out = Queue("out")
        self.reader = out.reader()
        self.op = Aggregate("a", [self.inq.reader()], out, keys, aggs)
        self.op.out_types = [k.type for k in keys] + [a.type for a in aggs]
        self.elements: list[tuple[int, tuple, int]] = []

    def feed(self, *items) -> AggHarness:
        for it in items:
            self.inq.push(Heartbeat(it) if isinstance(it, int) else it)
        while self.op.runnable():
            self.op.run(1 << 20)
        while (item := self.reader.get()) is not None:
            if not isinstance(item, Heartbeat):
                ts = item.ts.tolist()
                assert ts == sorted(ts)
                self.elements.extend(zip(ts, item.rows(), item.w.tolist()))
        return self

    def at(self, t: int) -> Counter:
        c: Counter = Counter()
        for ts, row, w in self.elements:
            if ts <= t:
                c[_norm(row)] += w
        assert all(v >= 0 for v in c.values()), (t, c)
        return +c

    def instants(self) -> set[int]:
        net: dict[int, Counter] = {}
        for ts, row, w in self.elements:
            net.setdefault(ts, Counter())[_norm(row)] += w
        return {t for t, c in net.items() if any(c.values())}


def _norm(row: tuple) -> tuple:
    """Types matter (1 vs 1.0 vs True), floats compared rounded."""
    return tuple(
        (type(v).__name__, round(v, 9) if isinstance(v, float) else v) for v in row
    )


def R(*rows: tuple) -> Counter:
    return Counter(_norm(r) for r in rows)


# -- grouped ----------------------------------------------------------------------------------


def test_grouped_count_sum_avg_min_max():
    aggs = (agg("count"), agg("count", X), agg("sum", X), agg("avg", X), agg("min", X), agg("max", X))
    h = AggHarness((G,), aggs)
    h.feed(B((1, ("a", 1, 0.0)), (1, ("a", 4, 0.0)), (1, ("b", 2, 0.0))), 1)
    assert h.at(1) == R(("a", 2, 2, 5, 2.5, 1, 4), ("b", 1, 1, 2, 2.0, 2, 2))
    h.feed(B((2, ("a", 10, 0.0)), (2, ("b", 2, 0.0), -1)), 2)
    assert h.at(2) == R(("a", 3, 3, 15, 5.0, 1, 10))  # group b disappeared


def test_min_max_after_deleting_the_extreme():
    h = AggHarness((G,), (agg("min", X), agg("max", X)))
    h.feed(B((1, ("a", 5, 0.0)), (1, ("a", 1, 0.0)), (1, ("a", 9, 0.0)), (1, ("a", 9, 0.0))))
    h.feed(1)
    assert h.at(1) == R(("a", 1, 9))
    h.feed(B((2, ("a", 1, 0.0), -1), (2, ("a", 9, 0.0), -1)), 2)
    assert h.at(2) == R(("a", 5, 9))  # one 9 is still there
    h.feed(B((3, ("a", 9, 0.0), -1)), 3)
    assert h.at(3) == R(("a", 5, 5))
    h.feed(B((4, ("a", 3, 0.0))), 4)
    assert h.at(4) == R(("a", 3, 5))


def test_min_max_strings_and_floats():
    h = AggHarness((), (agg("min", G), agg("max", G), agg("min", F), agg("max", F)))
    h.feed(B((1, ("b", 0, 2.5)), (1, ("ab", 0, -1.0)), (1, ("B", 0, None))), 1)
    assert h.at(1) == R(("B", "b", -1.0, 2.5))  # code point order


def test_nulls_are_skipped_and_null_keys_form_a_group():
    aggs = (agg("count"), agg("count", X), agg("sum", X), agg("avg", X), agg("min", X), agg("max", X))
    h = AggHarness((G,), aggs)
    h.feed(B((1, (None, None, 0.0)), (1, (None, 3, 0.0)), (1, ("a", None, 0.0))), 1)
    assert h.at(1) == R(
        (None, 2, 1, 3, 3.0, 3, 3),
        ("a", 1, 0, None, None, None, None),  # SUM/AVG/MIN/MAX of no values: NULL; COUNT: 0
    )


def test_group_disappears_and_comes_back():
    h = AggHarness((G,), (agg("count"),))
    h.feed(B((1, ("a", 1, 0.0))), 1)
    h.feed(B((2, ("a", 1, 0.0), -1)), 2)
    assert h.at(2) == Counter()
    h.feed(B((3, ("a", 2, 0.0))), 3)
    assert h.at(3) == R(("a", 1))
    assert h.op.state_size()[0] >= 1


def test_group_changed_and_restored_within_an_instant_has_no_net_change():
    h = AggHarness((G,), (agg("sum", X),))
    h.feed(B((1, ("a", 1, 0.0))), 1)
    h.feed(B((2, ("a", 5, 0.0)), (2, ("a", 5, 0.0), -1)), 2)
    assert h.at(2) == R(("a", 1))
    assert h.instants() == {1}


def test_distinct_aggregates():
    aggs = (agg("count", X, True), agg("sum", X, True), agg("avg", X, True), agg("min", X, True), agg("count", X))
    h = AggHarness((G,), aggs)
    h.feed(B((1, ("a", 2, 0.0)), (1, ("a", 2, 0.0)), (1, ("a", 4, 0.0)), (1, ("a", None, 0.0))), 1)
    assert h.at(1) == R(("a", 2, 6, 3.0, 2, 3))
    h.feed(B((2, ("a", 2, 0.0), -1)), 2)
    assert h.at(2) == R(("a", 2, 6, 3.0, 2, 2))  # one 2 remains
    h.feed(B((3, ("a", 2, 0.0), -1)), 3)
    assert h.at(3) == R(("a", 1, 4, 4.0, 4, 1))


def test_sum_types():
    h = AggHarness((), (agg("sum", X), agg("sum", F), agg("avg", X)))
    h.feed(B((1, ("a", 1, 0.5)), (1, ("a", 2, 0.25))), 1)
    [(row, n)] = h.at(1).items()
    assert n == 1
    assert row == (("int", 3), ("float", 0.75), ("float", 1.5))


def test_float_sum_survives_cancellation():
    h = AggHarness((), (agg("sum", F),))
    h.feed(B((1, ("a", 0, 1e16)), (1, ("a", 0, 1.0))), 1)
    h.feed(B((2, ("a", 0, 1e16), -1)), 2)
    [(row, _)] = h.at(2).items()
    assert row == (("float", 1.0),)


def test_avg_of_large_ints_is_exact():
    big = 2**62
    h = AggHarness((), (agg("avg", X),))
    h.feed(B((1, ("a", big, 0.0)), (1, ("a", big + 2, 0.0))), 1)
    [(row, _)] = h.at(1).items()
    assert row == (("float", float(big + 1)),)


# -- global -----------------------------------------------------------------------------------

GLOBAL = (agg("count"), agg("sum", X), agg("min", X), agg("avg", F))


def test_global_row_at_first_tick_even_without_elements():
    h = AggHarness((), GLOBAL)
    h.feed(2)
    assert h.elements == []  # nothing has mattered yet
    h.feed(B(ticks=(3,)), 3)
    assert h.at(2) == Counter()
    assert h.at(3) == R((0, None, None, None))
    h.feed(B((5, ("a", 7, 1.0))), 5)
    assert h.at(5) == R((1, 7, 7, 1.0))
    h.feed(B((6, ("a", 7, 1.0), -1)), 6)
    assert h.at(6) == R((0, None, None, None))  # the global row stays, back to empty


def test_global_first_tick_before_the_first_element_in_one_batch():
    h = AggHarness((), (agg("count"),))
    h.feed(B((4, ("a", 1, 0.0)), ticks=(2,)), 4)
    assert h.at(2) == R((0,))
    assert h.at(4) == R((1,))


def test_global_first_instant_is_the_first_element():
    h = AggHarness((), (agg("count"),))
    h.feed(B((4, ("a", 1, 0.0)), (4, ("a", 1, 0.0))), 4)
    assert h.at(3) == Counter()
    assert h.at(4) == R((2,))
    assert h.instants() == {4}


def test_global_with_all_elements_cancelled_at_first_instant():
    h = AggHarness((), (agg("count"), agg("max", X)))
    h.feed(B((1, ("a", 1, 0.0)), (1, ("a", 1, 0.0), -1)), 1)
    assert h.at(1) == R((0, None))


# -- against a direct evaluation --------------------------------------------------------------


def _direct(rows: Counter, keys: bool) -> Counter:
    groups: dict[tuple, list] = {}
    for row, n in rows.items():
        groups.setdefault((row[0],) if keys else (), []).extend([row] * n)
    if not keys and not groups:
        groups[()] = []
    out: Counter = Counter()
    for key, grp in groups.items():
        xs = [r[1] for r in grp if r[1] is not None]
        fs = [r[2] for r in grp if r[2] is not None]
        dx = sorted(set(xs))
        out[_norm((
            *key,
            len(grp),
            len(xs),
            sum(xs) if xs else None,
            sum(xs) / len(xs) if xs else None,
            min(xs) if xs else None,
            max(xs) if xs else None,
            len(dx),
            sum(dx) if dx else None,
            math.fsum(fs) if fs else None,
            max(fs) if fs else None,
        ))] += 1
    return out


@pytest.mark.parametrize("keys", [True, False])
def test_random_against_direct_evaluation(keys):
    aggs = (
        agg("count"),
        agg("count", X),
        agg("sum", X),
        agg("avg", X),
        agg("min", X),
        agg("max", X),
        agg("count", X, True),
        agg("sum", X, True),
        agg("sum", F),
        agg("max", F),
    )
    h = AggHarness((G,) if keys else (), aggs)
    rng = np.random.default_rng(17 if keys else 19)
    live: Counter = Counter()
    started = False
    for t in range(20):
        elems = []
        for _ in range(int(rng.integers(0, 6))):
            if live and rng.random() < 0.45:
                row = list(live)[int(rng.integers(0, len(live)))]
                live[row] -= 1
                live = +live
                elems.append((t, row, -1))
            else:
                x = [None, 1, 2, 5, -3][int(rng.integers(0, 5))]
                f = [None, 0.5, 1.25, -2.0][int(rng.integers(0, 4))]
                row = ([None, "a", "b"][int(rng.integers(0, 3))], x, f)
                live[row] += 1
                elems.append((t, row, 1))
        if elems:
            h.feed(B(*elems))
            started = True
        h.feed(t)
        want = _direct(live, keys) if started else Counter()
        assert h.at(t) == want, t
