"""The columnar group table (COUNT and int SUM/AVG) gives element for element the output of the
general path: many groups (thousands, most born and dying within a batch, as in a sliding
window over many keys), several instants per batch, NULL keys and values, int and string keys,
two keys, sums beyond 2**53 (AVG's exact quotient), and the hand-over to the general path when
a batch's sums could overflow int64. Each case runs the same batches through an operator with
the table and one without, and checks the result against a direct evaluation at every instant."""

from __future__ import annotations

import pickle
import random
from collections import Counter

import numpy as np
import pytest

from cq_service.cql.logical import AggCall, ColRef
from cq_service.types import DataType
from tests.unit.engine import aggregate_runs

INT, STR = DataType.INT, DataType.STRING
IN_TYPES = [INT, INT, STR]  # (g, x, s)
G, X, S = ColRef(0, INT), ColRef(1, INT), ColRef(2, STR)
AGGS = (
    AggCall("count", None, False, INT),
    AggCall("count", X, False, INT),
    AggCall("sum", X, False, INT),
    AggCall("avg", X, False, DataType.FLOAT),
)


def Run(keys: tuple, table: bool) -> aggregate_runs.Run:
    return aggregate_runs.Run(keys, table, AGGS, IN_TYPES)


def workload(rng: random.Random, groups: int, batches: int, big: bool,
             instants: int = 4) -> list[list[tuple]]:
    """Batches of a consistent relation's deltas: each instant inserts new rows and deletes
    some of those alive (a sliding window's shape), several instants per batch."""
    alive: list[tuple] = []
    t = 0
    out = []
    for _ in range(batches):
        elems: list[tuple] = []
        for _ in range(rng.randint(1, instants)):
            t += rng.randint(1, 3)
            rng.shuffle(alive)
            for row in alive[: rng.randint(0, len(alive))]:
                elems.append((t, row, -1))
            alive = alive[len([e for e in elems if e[0] == t]):]
            for _ in range(rng.randint(0, 3 * groups)):
                g = rng.randrange(groups) if rng.random() > 0.02 else None
                x = rng.randrange(-5, 1000) if rng.random() > 0.1 else None
                if big and x is not None:
                    x = x * 2**42 + 3  # sums beyond 2**53, no batch's beyond 2**62
                row = (g, x, rng.choice(["a", "b", "ab", None]))
                elems.append((t, row, 1))
                alive.append(row)
        out.append(elems)
    return out


def expected(live: Counter, keyed: tuple) -> Counter:
    out: Counter = Counter()
    for key, rows in aggregate_runs.rows_by_group(live, keyed).items():
        xs = [r[1] for r in rows if r[1] is not None]
        total = sum(xs) if xs and -(2**63) <= sum(xs) < 2**63 else None  # beyond: NULL
        out[(*key, len(rows), len(xs), total, sum(xs) / len(xs) if xs else None)] += 1
    return out


@pytest.mark.parametrize("case", [
    ("int key, many groups", (G,), lambda r: (r[0],), 3000, False),
    ("int key, few groups", (G,), lambda r: (r[0],), 7, False),
    ("string key", (S,), lambda r: (r[2],), 0, False),
    ("two keys", (G, S), lambda r: (r[0], r[2]), 500, False),
    ("sums beyond 2**53", (G,), lambda r: (r[0],), 20, True),
], ids=lambda c: c[0])
@pytest.mark.parametrize("instants", [1, 4])  # 1: every segment a group of its own
def test_the_table_gives_the_general_paths_output(case, instants: int) -> None:
    _, keys, keyed, groups, big = case
    rng = random.Random(case[0])
    batches = workload(rng, max(groups, 4), 12, big, instants)
    with_table = aggregate_runs.against_general_path(
        batches, keys, AGGS, IN_TYPES, lambda live: expected(live, keyed)
    )
    if big:
        assert max(abs(row[3] or 0) for _, row, _, _, _ in with_table.out) > 2**53


def test_a_batch_whose_sums_could_overflow_hands_the_groups_over() -> None:
    with_table, without = Run((G,), True), Run((G,), False)
    feeds = [
        [(1, (g, g, "a"), 1) for g in range(100)],
        [(2, (g, 2**61, "a"), 1) for g in range(0, 100, 3)] + [(2, (5, 7, "b"), 1)],
        [(3, (g, g, "a"), -1) for g in range(50)],
    ]
    for t, elems in enumerate(feeds, 1):
        with_table.feed(elems, t)
        without.feed(elems, t)
        if t == 1:
            assert with_table.op._table is not None
    assert with_table.op._table is None
    assert with_table.out == without.out


def test_the_tables_state_pickles_and_an_older_state_restores() -> None:
    run = Run((G,), True)
    run.feed([(1, (g % 50, g, "a"), 1) for g in range(200)], 1)
    state = pickle.loads(pickle.dumps(run.op.snapshot()))
    again = Run((G,), True)
    again.op.restore(state)
    old = {k: v for k, v in Run((G,), False).op.snapshot().items() if k != "_table"}
    older = Run((G,), True)
    older.op.restore(old)  # a state saved before the table existed: the general path
    assert older.op._table is None
    for r in (run, again):
        r.out.clear()
        r.feed([(2, (g, 1, "a"), -1) for g in range(10)], 2)
    assert again.out == run.out and len(run.out) == 20
    assert np.array_equal(again.op._table.rows, run.op._table.rows)


def test_a_table_pickled_with_separate_rows_count_and_total_arrays_restores() -> None:
    """Before `cells`, a table kept `rows`, `count` and `total` arrays: such a state restores
    into the same cells and runs on with the same output."""
    run = Run((G,), True)
    run.feed([(1, (g % 50, g, "a"), 1) for g in range(200)], 1)
    run.feed([(2, (g % 50, g, "a"), -1) for g in range(200) if g % 50 < 5], 2)  # 5 slots free
    table = run.op._table
    _, fields = table.__reduce_ex__(2)[2]
    old = {k: v for k, v in fields.items() if k != "cells"}
    old.update(rows=table.rows.copy(), count=table.count.copy(), total=table.total.copy(),
               free=table.free.tolist())
    restored = type(table).__new__(type(table))
    restored.__setstate__((None, old))
    assert np.array_equal(restored.cells, table.cells)
    assert np.array_equal(restored.free, table.free) and len(table.free)
    again = Run((G,), True)
    again.op.restore({**pickle.loads(pickle.dumps(run.op.snapshot())), "_table": restored})
    for r in (run, again):
        r.out.clear()
        r.feed([(3, (g, g, "a"), -1) for g in range(5, 15)] + [(3, (60, 1, "a"), 1)], 3)
    assert again.op._table is not None  # still in the table: a free slot taken by group 60
    assert again.out == run.out and len(run.out) == 21
