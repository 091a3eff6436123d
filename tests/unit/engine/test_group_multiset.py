"""MIN and MAX kept in the columnar group table (group_multiset.py) give element for element the
output of the general path: many groups born and dying within a batch, several instants per
batch (values inserted and deleted within one batch), deletions of the extreme, NULL keys and
values, values beyond int32, MIN/MAX next to COUNT and SUM, the hand-over to the general path
(with the multiset as `Extreme`s) and a state pickled and restored."""

from __future__ import annotations

import pickle
import random
from collections import Counter

import pytest

from cq_service.cql.logical import AggCall, ColRef
from cq_service.engine.operators.group_multiset import Multiset
from cq_service.types import DataType
from tests.unit.engine import aggregate_runs

INT, STR = DataType.INT, DataType.STRING
IN_TYPES = [INT, INT, STR]  # (g, x, s)
G, X, S = ColRef(0, INT), ColRef(1, INT), ColRef(2, STR)
AGGS = (
    AggCall("min", X, False, INT),
    AggCall("max", X, False, INT),
    AggCall("count", None, False, INT),
    AggCall("sum", X, False, INT),
    AggCall("max", X, True, INT),
)


def Run(keys: tuple, table: bool, aggs: tuple = AGGS) -> aggregate_runs.Run:
    return aggregate_runs.Run(keys, table, aggs, IN_TYPES)


def workload(rng: random.Random, groups: int, batches: int, spread: int) -> list[list[tuple]]:
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
                x = rng.randrange(-spread, spread) * 2**40 if rng.random() > 0.1 else None
                row = (g, x, rng.choice(["a", "b", None]))
                elems.append((t, row, 1))
                alive.append(row)
        out.append(elems)
    return out


def expected(live: Counter, keyed) -> Counter:
    out: Counter = Counter()
    for key, rows in aggregate_runs.rows_by_group(live, keyed).items():
        xs = [r[1] for r in rows if r[1] is not None]
        lo, hi = (min(xs), max(xs)) if xs else (None, None)
        out[(*key, lo, hi, len(rows), sum(xs) if xs else None, hi)] += 1
    return out


@pytest.mark.parametrize("case", [
    ("int key, many groups", (G,), lambda r: (r[0],), 2000, 50),
    ("int key, few groups, repeated values", (G,), lambda r: (r[0],), 5, 4),
    ("string key", (S,), lambda r: (r[2],), 0, 30),
    ("two keys", (G, S), lambda r: (r[0], r[2]), 300, 3),
], ids=lambda c: c[0])
def test_min_max_in_the_table_give_the_general_paths_output(case) -> None:
    _, keys, keyed, groups, spread = case
    rng = random.Random(case[0])
    batches = workload(rng, max(groups, 4), 14, spread)
    aggregate_runs.against_general_path(
        batches, keys, AGGS, IN_TYPES, lambda live: expected(live, keyed)
    )


def test_the_hand_over_carries_the_values_to_the_general_path() -> None:
    rng = random.Random(7)
    batches = workload(rng, 50, 10, 20)
    with_table, without = Run((G,), True), Run((G,), False)
    for i, elems in enumerate(batches):
        if i == 5:  # a sum that could overflow: the groups go to the general path
            t = elems[-1][0]
            elems = [*elems, (t, (3, 2**62, "a"), 1), (t, (3, 2**62, "a"), -1)]
        upto = max(e[0] for e in elems)
        with_table.feed(elems, upto)
        without.feed(elems, upto)
        assert (with_table.op._table is None) == (i >= 5)
    assert with_table.out == without.out


def test_a_pickled_state_restores_and_an_older_table_has_no_multisets() -> None:
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
    assert again.out == run.out
    table = Run((G,), True, AGGS[2:4]).op._table
    state = table.__reduce_ex__(2)[2]
    del state[1]["multisets"]
    table.__setstate__(state)
    assert table.multisets == {}


def test_the_multiset_keeps_runs_sorted_by_slot_and_value() -> None:
    rng = random.Random(11)
    run = Run((G,), True)
    for elems in workload(rng, 300, 8, 6):
        run.feed(elems, max(e[0] for e in elems))
        for ms in run.op._table.multisets.values():
            assert isinstance(ms, Multiset)
            key = list(zip(ms.slot.tolist(), ms.val.tolist()))
            assert key == sorted(set(key)) and (ms.cnt > 0).all()
