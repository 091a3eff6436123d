"""COUNT, SUM and AVG(DISTINCT) kept in the columnar group table (each group's values with their
multiplicities in a `Multiset`, group_multiset.py) give element for element the output of the
general path: many groups born and dying within a batch, several instants per batch (a value
entering and leaving within one batch), repeated values, NULL keys and values, timestamps,
DISTINCT next to COUNT(*), SUM and MAX(DISTINCT), the hand-over to the general path (the
multisets as its `Counter`s), sums of distinct values the table declines, a state pickled and
restored, and `Values` applied to an accumulator as `Pairs` would be."""

from __future__ import annotations

import pickle
import random
from collections import Counter

import pytest

from cq_service.cql.logical import AggCall, ColRef
from cq_service.engine.operators.accumulators import Acc
from cq_service.engine.operators.segments import Pairs, Segments, Values
from cq_service.types import DataType
from tests.unit.engine import aggregate_runs
from tests.unit.engine.batches import make_batch

INT, STR, TS = DataType.INT, DataType.STRING, DataType.TIMESTAMP
IN_TYPES = [INT, INT, STR, TS]  # (g, x, s, t)
G, X, S, T = ColRef(0, INT), ColRef(1, INT), ColRef(2, STR), ColRef(3, TS)
AGGS = (
    AggCall("count", X, True, INT),
    AggCall("sum", X, True, INT),
    AggCall("avg", X, True, DataType.FLOAT),
    AggCall("count", T, True, INT),
    AggCall("count", None, False, INT),
    AggCall("sum", X, False, INT),
    AggCall("max", X, True, INT),
)


def Run(keys: tuple, table: bool, aggs: tuple = AGGS) -> aggregate_runs.Run:
    return aggregate_runs.Run(keys, table, aggs, IN_TYPES)


def workload(rng: random.Random, groups: int, batches: int, spread: int,
             scale: int = 2**40) -> list[list[tuple]]:
    """A consistent relation's deltas, several instants per batch; values from `spread`
    distinct ones (few: repeated values, multiplicities above one)."""
    alive: list[tuple] = []
    t = 0
    out = []
    for _ in range(batches):
        elems: list[tuple] = []
        for _ in range(rng.randint(1, 5)):
            t += rng.randint(1, 3)
            rng.shuffle(alive)
            gone = alive[: rng.randint(0, len(alive))]
            elems.extend((t, row, -1) for row in gone)
            alive = alive[len(gone):]
            for _ in range(rng.randint(0, 3 * groups)):
                g = rng.randrange(groups) if rng.random() > 0.02 else None
                x = rng.randrange(-spread, spread) * scale if rng.random() > 0.1 else None
                ts = rng.randrange(spread) * 1000 if rng.random() > 0.1 else None
                row = (g, x, rng.choice(["a", "b", None]), ts)
                elems.append((t, row, 1))
                alive.append(row)
        out.append(elems)
    return out


def expected(live: Counter, keyed) -> Counter:
    out: Counter = Counter()
    for key, rows in aggregate_runs.rows_by_group(live, keyed).items():
        xs = [r[1] for r in rows if r[1] is not None]
        d = set(xs)
        ts = {r[3] for r in rows if r[3] is not None}
        out[(*key, len(d), sum(d) if d else None, sum(d) / len(d) if d else None, len(ts),
             len(rows), sum(xs) if xs else None, max(xs) if xs else None)] += 1
    return out


@pytest.mark.parametrize("case", [
    ("int key, many groups", (G,), lambda r: (r[0],), 2000, 50),
    ("int key, few groups, repeated values", (G,), lambda r: (r[0],), 5, 4),
    ("string key", (S,), lambda r: (r[2],), 0, 30),
    ("two keys", (G, S), lambda r: (r[0], r[2]), 300, 3),
], ids=lambda c: c[0])
def test_distinct_in_the_table_gives_the_general_paths_output(case) -> None:
    _, keys, keyed, groups, spread = case
    rng = random.Random(case[0])
    batches = workload(rng, max(groups, 4), 14, spread)
    aggregate_runs.against_general_path(
        batches, keys, AGGS, IN_TYPES, lambda live: expected(live, keyed)
    )


def test_values_spread_over_int64_search_and_sort_without_combined_keys() -> None:
    """Values whose range leaves int64 when combined with the group: the multiset's binary
    search and lexsort (group_multiset.py) instead of one combined key."""
    aggs = (AggCall("count", X, True, INT), AggCall("min", X, False, INT),
            AggCall("max", X, True, INT), AggCall("count", T, True, INT))
    rng = random.Random(5)
    batches = workload(rng, 200, 10, 3, scale=2**61)

    def want(live: Counter) -> Counter:
        out: Counter = Counter()
        for row in expected(live, lambda r: (r[0],)).elements():
            d, n = row[1], row[4]  # COUNT(DISTINCT x), COUNT(DISTINCT t)
            xs = [r[1] for r, m in live.items() if r[0] == row[0] and r[1] is not None]
            out[(row[0], d, min(xs) if xs else None, max(xs) if xs else None, n)] += 1
        return out

    aggregate_runs.against_general_path(batches, (G,), aggs, IN_TYPES, want)


def _same_groups(a: dict, b: dict) -> None:
    """The general path's groups, accumulator for accumulator (DISTINCT: its multiset)."""
    assert a.keys() == b.keys()
    for key, ga in a.items():
        gb = b[key]
        assert ga.rows == gb.rows and ga.result() == gb.result()
        for x, y in zip(ga.accs, gb.accs):
            if isinstance(x, Acc):
                assert (x.count, x.total, x.multiset) == (y.count, y.total, y.multiset)


def test_the_hand_over_carries_the_distinct_values_to_the_general_path() -> None:
    rng = random.Random(7)
    batches = workload(rng, 50, 10, 20)
    with_table, without = Run((G,), True), Run((G,), False)
    for i, elems in enumerate(batches):
        if i == 5:  # a sum that could overflow: the groups go to the general path
            t = elems[-1][0]
            elems = [*elems, (t, (3, 2**62, "a", 1), 1), (t, (3, 2**62, "a", 1), -1)]
        upto = max(e[0] for e in elems)
        with_table.feed(elems, upto)
        without.feed(elems, upto)
        assert (with_table.op._table is None) == (i >= 5)
        if i == 5:
            _same_groups(with_table.op._groups, without.op._groups)
    assert with_table.out == without.out


def test_distinct_sums_that_could_leave_int64_hand_over() -> None:
    """Distinct values near 2**61: the sum of a batch's distinct values could leave ±2**62,
    so the table declines the batch (its SUM(x) alone would not: the same values summed
    with their multiplicities are what `linear_safe` bounds)."""
    aggs = (AggCall("sum", X, True, INT), AggCall("avg", X, True, DataType.FLOAT))
    with_table, without = Run((G,), True, aggs), Run((G,), False, aggs)
    feeds = [
        [(1, (g % 3, g, "a", 1), 1) for g in range(30)],
        [(2, (0, 2**61 + i, "a", 1), 1) for i in range(3)],
        [(3, (0, 2**61 + i, "a", 1), -1) for i in range(2)],
    ]
    for t, elems in enumerate(feeds, 1):
        with_table.feed(elems, t)
        without.feed(elems, t)
        assert (with_table.op._table is None) == (t >= 2)
    assert with_table.out == without.out


def test_a_pickled_state_restores_with_its_distinct_values() -> None:
    rng = random.Random(3)
    batches = workload(rng, 100, 6, 10)
    run, again = Run((G,), True), Run((G,), True)
    for elems in batches[:3]:
        run.feed(elems, max(e[0] for e in elems))
    again.op.restore(pickle.loads(pickle.dumps(run.op.snapshot())))
    run.out.clear()
    for elems in batches[3:]:
        run.feed(elems, max(e[0] for e in elems))
        again.feed(elems, max(e[0] for e in elems))
    assert again.out == run.out and run.out


def test_values_apply_a_segment_as_pairs_do() -> None:
    rows = [(0, 5, "a", 1), (0, 5, "a", 1), (1, None, "a", 1), (0, 7, "a", 1), (0, 5, "a", 1)]
    batch = make_batch(IN_TYPES, [(1, r, w) for r, w in zip(rows, [1, 1, 1, -1, -1])])
    seg = Segments(batch, [batch.columns[0]])
    arg = batch.columns[1]
    call = AggCall("sum", X, True, INT)
    for i in range(len(seg)):
        a, b = Acc(call), Acc(call)
        a.update(7, 1)
        b.update(7, 1)
        Values(arg, seg).apply(a, i)
        Pairs(arg, batch, seg).apply(b, i)
        assert (a.count, a.total, a.multiset) == (b.count, b.total, b.multiset)


def test_each_groups_count_and_total_are_its_distinct_values() -> None:
    rng = random.Random(11)
    run = Run((G,), True)
    table = run.op._table
    for elems in workload(rng, 300, 8, 6):
        run.feed(elems, max(e[0] for e in elems))
        slots = [s for _, s in table.index.items()]
        for j in (0, 1, 3):  # COUNT, SUM (DISTINCT x) and COUNT(DISTINCT t)
            ms = table.multisets[j]
            key = list(zip(ms.slot.tolist(), ms.val.tolist()))
            assert key == sorted(set(key)) and (ms.cnt > 0).all()
            assert set(ms.slot.tolist()) <= set(slots)
            for s in slots:
                vals = [v for slot, v in key if slot == s]
                assert table.count[j, s] == len(vals)
                if j == 1:
                    assert table.total[j, s] == sum(vals)
