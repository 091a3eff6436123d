"""Aggregate: MIN/MAX kept lazily and the vectorised path — the extreme deleted, ties of the
extreme, NULLs, NaN (equal to NaN, greater than every number), strings, groups created and
deleted within one batch, many instants per batch, consolidation of a large multiset — checked
against a direct evaluation of every instant."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from cq_service.cql.logical import AggCall, ColRef
from cq_service.engine.operators.aggregate import Aggregate
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT, STR, FLT = DataType.INT, DataType.STRING, DataType.FLOAT
IN_TYPES = [INT, INT, FLT, STR]  # (g, x, f, s)
G, X, F, S = ColRef(0, INT), ColRef(1, INT), ColRef(2, FLT), ColRef(3, STR)
NAN, INF = math.nan, math.inf


def agg(fn: str, arg=None, distinct: bool = False) -> AggCall:
    t = INT if fn == "count" else FLT if fn == "avg" else arg.type
    return AggCall(fn, arg, distinct, t)


def norm(v: object) -> object:
    """A comparable form: NaN as a marker, types kept (1 vs 1.0 vs True)."""
    if isinstance(v, float):
        return ("float", "NaN" if math.isnan(v) else round(v, 9))
    return (type(v).__name__, v)


class Harness:
    def __init__(self, keys: tuple, aggs: tuple[AggCall, ...], key_types=(INT,)):
        self.inq = Queue("in")
        out = Queue("out")
        self.reader = out.reader()
        self.op = Aggregate("a", [self.inq.reader()], out, keys, aggs)
        self.op.out_types = [k.type for k in keys] + [a.type for a in aggs]
        self.elements: list[tuple[int, tuple, int]] = []

    def feed(self, elems: list[tuple], upto: int) -> Harness:
        if elems:
            self.inq.push(make_batch(IN_TYPES, elems))
        self.inq.push(Heartbeat(upto))
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
                c[tuple(norm(v) for v in row)] += w
        assert all(v >= 0 for v in c.values()), (t, c)
        return +c


def _extreme(xs: list, is_max: bool) -> object:
    if not xs:
        return None
    nums = [x for x in xs if not (isinstance(x, float) and math.isnan(x))]
    if len(nums) < len(xs) and (is_max or not nums):
        return NAN  # NaN is greater than every number
    return max(nums) if is_max else min(nums)


def direct(live: Counter, keyed: bool, started: bool) -> Counter:
    """The expected result relation of AGGS over the rows in `live`."""
    groups: dict[tuple, list] = {}
    for row, n in live.items():
        groups.setdefault((row[0],) if keyed else (), []).extend([row] * n)
    if not keyed and started and not groups:
        groups[()] = []
    out: Counter = Counter()
    for key, rows in groups.items():
        xs = [r[1] for r in rows if r[1] is not None]
        fs = [r[2] for r in rows if r[2] is not None]
        ss = [r[3] for r in rows if r[3] is not None]
        vals = (
            len(rows),
            len(xs),
            sum(xs) if xs else None,
            sum(xs) / len(xs) if xs else None,
            _extreme(xs, False),
            _extreme(xs, True),
            _extreme(fs, False),
            _extreme(fs, True),
            _extreme(ss, False),
            _extreme(ss, True),
            _extreme(xs, True),
        )
        out[tuple(norm(v) for v in (*key, *vals))] += 1
    return out


AGGS = (
    agg("count"),
    agg("count", X),
    agg("sum", X),
    agg("avg", X),
    agg("min", X),
    agg("max", X),
    agg("min", F),
    agg("max", F),
    agg("min", S),
    agg("max", S),
    agg("max", X, True),
)


def run_random(keyed: bool, seed: int, *, instants: int, per_batch: int, ngroups: int,
               p_delete: float, xs: list, fs: list) -> None:
    h = Harness((G,) if keyed else (), AGGS)
    rng = np.random.default_rng(seed)
    live: Counter = Counter()
    history: list[Counter] = []
    first_t: int | None = None
    t = 0
    while t < instants:
        elems = []
        span = int(rng.integers(1, per_batch + 1))  # instants in this batch
        for tt in range(t, min(t + span, instants)):
            for _ in range(int(rng.integers(0, 7))):
                if live and rng.random() < p_delete:
                    row = list(live)[int(rng.integers(0, len(live)))]
                    if rng.random() < 0.3:  # delete every copy of the row's group
                        for r in [r for r in live if r[0] == row[0]]:
                            elems.extend([(tt, r, -1)] * live[r])
                            del live[r]
                        continue
                    live[row] -= 1
                    live = +live
                    elems.append((tt, row, -1))
                else:
                    row = (
                        int(rng.integers(0, ngroups)),
                        xs[int(rng.integers(0, len(xs)))],
                        fs[int(rng.integers(0, len(fs)))],
                        [None, "a", "b", "ab", "B"][int(rng.integers(0, 5))],
                    )
                    live[row] += 1
                    elems.append((tt, row, 1))
            history.append(+live)
        last = min(t + span, instants) - 1
        if elems and first_t is None:
            first_t = elems[0][0]
        h.feed(elems, last)
        for tt in range(t, last + 1):
            started = first_t is not None and tt >= first_t
            want = direct(history[tt], keyed, started) if started else Counter()
            assert h.at(tt) == want, (seed, tt)
        t = last + 1


@pytest.mark.parametrize("keyed", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_random_many_instants_per_batch(keyed, seed):
    run_random(keyed, seed, instants=60, per_batch=8, ngroups=4, p_delete=0.45,
               xs=[None, 1, 2, 5, 5, -3, 2**40], fs=[None, 0.5, -2.0, NAN, INF, -INF, 0.5])


@pytest.mark.parametrize("seed", range(3))
def test_random_many_small_groups(seed):
    run_random(True, 100 + seed, instants=80, per_batch=20, ngroups=40, p_delete=0.5,
               xs=[None, 3, 7, 7, 11], fs=[None, 1.5, NAN])


def test_extreme_deleted_and_ties_of_the_extreme():
    h = Harness((G,), (agg("min", X), agg("max", X), agg("max", F)))
    # one batch, three instants: ties of the max, then one copy deleted, then the other
    h.feed([
        (1, (1, 9, 1.0, None)), (1, (1, 9, 2.0, None)), (1, (1, 5, 2.0, None)),
        (2, (1, 9, 1.0, None), -1),
        (3, (1, 9, 2.0, None), -1),
    ], 3)
    assert h.at(1) == Counter({(norm(1), norm(5), norm(9), norm(2.0)): 1})
    assert h.at(2) == Counter({(norm(1), norm(5), norm(9), norm(2.0)): 1})
    assert h.at(3) == Counter({(norm(1), norm(5), norm(5), norm(2.0)): 1})
    # across batches: delete the extreme of a group that existed before the batch
    h.feed([(4, (1, 5, 2.0, None), -1), (4, (1, 4, 0.5, None))], 4)
    assert h.at(4) == Counter({(norm(1), norm(4), norm(4), norm(0.5)): 1})


def test_deletions_below_the_extreme_keep_it():
    h = Harness((), (agg("max", X), agg("min", X)))
    h.feed([(1, (0, v, 0.0, None)) for v in range(100)], 1)
    h.feed([(2, (0, v, 0.0, None), -1) for v in range(1, 50)], 2)
    assert h.at(2) == Counter({(norm(99), norm(0)): 1})
    h.feed([(3, (0, 99, 0.0, None), -1), (3, (0, 0, 0.0, None), -1)], 3)
    assert h.at(3) == Counter({(norm(98), norm(50)): 1})


def test_nulls_only_and_all_values_deleted():
    h = Harness((G,), (agg("count"), agg("max", X), agg("min", F)))
    h.feed([(1, (1, None, None, None)), (1, (1, 3, 2.0, None))], 1)
    assert h.at(1) == Counter({(norm(1), norm(2), norm(3), norm(2.0)): 1})
    h.feed([(2, (1, 3, 2.0, None), -1)], 2)  # the row with NULLs stays: MAX of nothing
    assert h.at(2) == Counter({(norm(1), norm(1), ("NoneType", None), ("NoneType", None)): 1})
    h.feed([(3, (1, 8, None, None))], 3)
    assert h.at(3) == Counter({(norm(1), norm(2), norm(8), ("NoneType", None)): 1})


def test_nan_is_the_greatest_and_equals_nan():
    h = Harness((), (agg("max", F), agg("min", F), agg("count")))
    h.feed([(1, (0, 0, NAN, None)), (1, (0, 0, NAN, None)), (1, (0, 0, 7.0, None))], 1)
    assert h.at(1) == Counter({(norm(NAN), norm(7.0), norm(3)): 1})
    h.feed([(2, (0, 0, NAN, None), -1)], 2)  # one NaN remains
    assert h.at(2) == Counter({(norm(NAN), norm(7.0), norm(2)): 1})
    h.feed([(3, (0, 0, NAN, None), -1)], 3)
    assert h.at(3) == Counter({(norm(7.0), norm(7.0), norm(1)): 1})
    h.feed([(4, (0, 0, 7.0, None), -1), (4, (0, 0, NAN, None))], 4)
    assert h.at(4) == Counter({(norm(NAN), norm(NAN), norm(1)): 1})  # MIN of only NaN: NaN


def test_unchanged_nan_result_emits_nothing():
    h = Harness((), (agg("max", F),))
    h.feed([(1, (0, 0, NAN, None))], 1)
    h.feed([(2, (0, 0, 1.0, None))], 2)
    h.feed([(3, (0, 0, 1.0, None), -1)], 3)
    assert [e[0] for e in h.elements] == [1]


def test_nan_keys_form_one_group_across_batches():
    h = Harness((F,), (agg("count"),))
    h.feed([(1, (0, 0, NAN, None))], 1)
    h.feed([(2, (0, 0, NAN, None))], 2)
    assert h.at(2) == Counter({(norm(NAN), norm(2)): 1})
    h.feed([(3, (0, 0, NAN, None), -1), (3, (0, 0, NAN, None), -1)], 3)
    assert h.at(3) == Counter()
    assert h.op.state_size()[0] == 0


def test_strings_min_max_with_deletions():
    h = Harness((), (agg("min", S), agg("max", S)))
    h.feed([(1, (0, 0, 0.0, s)) for s in ["b", "ab", "B", "b"]], 1)
    assert h.at(1) == Counter({(norm("B"), norm("b")): 1})
    h.feed([(2, (0, 0, 0.0, "b"), -1), (2, (0, 0, 0.0, "B"), -1)], 2)
    assert h.at(2) == Counter({(norm("ab"), norm("b")): 1})


def test_groups_created_and_deleted_within_one_batch():
    """The q4 shape: each group appears with k rows at one instant and all k leave at the
    next; the whole history arrives in one batch."""
    h = Harness((G,), (agg("max", X), agg("count")))
    elems = []
    for g in range(50):
        rows = [(g, 10 * g + i, 0.0, None) for i in range(1 + g % 4)]
        elems += [(g, r) for r in rows]
        elems += [(g + 1, r, -1) for r in rows]
    elems.sort(key=lambda e: e[0])
    h.feed(elems, 60)
    got = sorted((t, w, row) for t, row, w in h.elements)
    want = []
    for g in range(50):
        row = (g, 10 * g + g % 4, 1 + g % 4)
        want += [(g, 1, row), (g + 1, -1, row)]
    assert got == sorted(want)
    assert h.op.state_size()[0] == 0  # nothing kept of groups that are gone


def test_group_created_in_one_batch_deleted_in_the_next():
    h = Harness((G,), (agg("max", X), agg("sum", X)))
    h.feed([(1, (1, 4, 0.0, None)), (1, (1, 6, 0.0, None)), (1, (2, 1, 0.0, None))], 1)
    h.feed([(2, (1, 4, 0.0, None), -1), (2, (1, 6, 0.0, None), -1), (2, (2, 3, 0.0, None))], 2)
    assert h.at(1) == Counter({(norm(1), norm(6), norm(10)): 1, (norm(2), norm(1), norm(1)): 1})
    assert h.at(2) == Counter({(norm(2), norm(3), norm(4)): 1})


def test_large_multiset_consolidates_and_stays_exact():
    """Enough values to consolidate several times; the extreme is deleted repeatedly."""
    h = Harness((), (agg("max", X), agg("min", X)))
    rng = np.random.default_rng(5)
    vals = rng.integers(0, 3000, size=20000).tolist()
    h.feed([(1, (0, v, 0.0, None)) for v in vals], 1)
    live = Counter(vals)
    t = 1
    for _ in range(6):
        t += 1
        top = sorted(live)[-3:]
        gone = [v for v in top for _ in range(live[v])]
        for v in top:
            del live[v]
        new = rng.integers(0, 2000, size=5000).tolist()
        live.update(new)
        h.feed([(t, (0, v, 0.0, None), -1) for v in gone] + [(t, (0, v, 0.0, None)) for v in new], t)
        assert h.at(t) == Counter({(norm(max(live)), norm(min(live))): 1}), t
    assert h.op.state_size()[0] <= 1 + 3 * len(live) + 8192


def test_int_sum_beyond_int64_is_null_and_comes_back():
    big = 2**62
    h = Harness((G,), (agg("sum", X), agg("max", X)))
    h.feed([(1, (1, big, 0.0, None)), (1, (1, big, 0.0, None))], 1)
    assert h.at(1) == Counter({(norm(1), ("NoneType", None), norm(big)): 1})
    h.feed([(2, (1, big, 0.0, None), -1), (2, (1, 1, 0.0, None))], 2)
    assert h.at(2) == Counter({(norm(1), norm(big + 1), norm(big)): 1})


def test_zero_and_negative_zero_keys_are_one_group():
    h = Harness((F,), (agg("count"), agg("max", X)))
    h.feed([(1, (0, 1, 0.0, None)), (1, (0, 5, -0.0, None)), (2, (0, 2, -0.0, None))], 2)
    assert h.at(1) == Counter({(norm(0.0), norm(2), norm(5)): 1})
    assert h.at(2) == Counter({(norm(0.0), norm(3), norm(5)): 1})
    h.feed([(3, (0, 1, -0.0, None), -1), (3, (0, 5, 0.0, None), -1), (3, (0, 2, 0.0, None), -1)], 3)
    assert h.at(3) == Counter()
    assert h.op.state_size()[0] == 0
