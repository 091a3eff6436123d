"""Join: symmetric hash join of two relations (deltas), NULL keys, residual, cross join, and
elements of both inputs at the same instant. Checked against the join of the two relations at
every instant."""

from __future__ import annotations

from collections import Counter
from itertools import product

import numpy as np
import pytest

from cq_service.cql.logical import Call, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.operators.join import Join
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch, relation_at

INT, STR, BOOL = DataType.INT, DataType.STRING, DataType.BOOL
LT = [INT, STR]  # left: (k, s)
RT = [INT, INT]  # right: (k, v)
OUT = LT + RT


def B(types, *elems: tuple) -> Batch:
    """(ts, row) or (ts, row, weight); ticks are the timestamps."""
    return make_batch(types, elems)


class TwoInputs:
    def __init__(self, make, in_types, out_types):
        self.queues = [Queue("left"), Queue("right")]
        self.types = in_types
        out = Queue("out")
        self.reader = out.reader()
        self.op = make("op", [q.reader() for q in self.queues], out)
        self.op.out_types = list(out_types)
        self.elements: list[tuple[int, tuple, int]] = []
        self.ticks: set[int] = set()
        self.heartbeats: list[int] = []

    def push(self, port: int, *elems: tuple) -> None:
        self.queues[port].push(B(self.types[port], *elems))

    def beat(self, ts: int, ports=(0, 1)) -> None:
        for p in ports:
            self.queues[p].push(Heartbeat(ts))

    def run(self, budget: int = 1 << 20) -> None:
        while self.op.runnable():
            self.op.run(budget)
        last = None
        while (item := self.reader.get()) is not None:
            if isinstance(item, Heartbeat):
                self.heartbeats.append(item.ts)
                continue
            ts = item.ts.tolist()
            assert ts == sorted(ts)
            if ts:
                assert last is None or ts[0] >= last
                last = ts[-1]
            self.elements.extend(zip(ts, item.rows(), item.w.tolist()))
            self.ticks.update(item.ticks.tolist())

    def at(self, t: int) -> Counter:
        return relation_at(self.elements, t)


def relation(elems, t) -> Counter:
    c: Counter = Counter()
    for e in elems:
        if e[0] <= t:
            c[e[1]] += e[2] if len(e) > 2 else 1
    return +c


def brute_join(left, right, t, match) -> Counter:
    out: Counter = Counter()
    for (lr, lc), (rr, rc) in product(relation(left, t).items(), relation(right, t).items()):
        if match(lr, rr):
            out[lr + rr] += lc * rc
    return out


def equi(lr, rr) -> bool:
    return lr[0] is not None and lr[0] == rr[0]


def join_op(residual=None, keys=True):
    lk = (ColRef(0, INT),) if keys else ()
    rk = (ColRef(0, INT),) if keys else ()
    return lambda n, i, o: Join(n, i, o, lk, rk, residual)


def test_equi_join_with_duplicates_multiplies_weights():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    left = [(1, (1, "a")), (1, (1, "a")), (2, (2, "b"))]
    right = [(1, (1, 10)), (3, (1, 10)), (3, (1, 11)), (3, (2, 20))]
    h.push(0, *left)
    h.push(1, *right[:1])
    h.beat(1)
    h.run()
    h.push(1, *right[1:])
    h.beat(5)
    h.run()
    assert h.at(1) == Counter({(1, "a", 1, 10): 2})
    assert h.at(3) == Counter({(1, "a", 1, 10): 4, (1, "a", 1, 11): 2, (2, "b", 2, 20): 1})
    assert h.heartbeats == [1, 5]


def test_deletions_retract_exactly():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    h.push(0, (1, (1, "a")), (1, (1, "a")), (4, (1, "a"), -1), (6, (1, "a"), -1))
    h.push(1, (2, (1, 10)), (5, (1, 10), -1))
    h.beat(10)
    h.run()
    assert h.at(1) == Counter()
    assert h.at(2) == Counter({(1, "a", 1, 10): 2})
    assert h.at(4) == Counter({(1, "a", 1, 10): 1})
    assert h.at(5) == Counter()
    assert h.at(10) == Counter()
    assert h.op.state_size()[0] == 0  # nothing left on either side


def test_null_keys_never_match():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    h.push(0, (1, (None, "a")), (1, (1, "b")))
    h.push(1, (1, (None, 10)), (1, (1, 11)))
    h.beat(1)
    h.run()
    assert h.at(1) == Counter({(1, "b", 1, 11): 1})
    # Deleting a NULL-key row is fine too.
    h.push(0, (2, (None, "a"), -1))
    h.push(1, (2, (None, 10), -1))
    h.beat(2)
    h.run()
    assert h.at(2) == Counter({(1, "b", 1, 11): 1})


def test_residual_predicate():
    # ON l.k = r.k AND r.v > 10 AND l.s <> 'x'
    residual = Call(
        "and",
        (
            Call("gt", (ColRef(3, INT), Const(10, INT)), BOOL),
            Call("ne", (ColRef(1, STR), Const("x", STR)), BOOL),
        ),
        BOOL,
    )
    h = TwoInputs(join_op(residual), [LT, RT], OUT)
    h.push(0, (1, (1, "a")), (1, (1, "x")), (1, (1, None)))
    h.push(1, (1, (1, 10)), (1, (1, 11)), (1, (1, None)), (2, (1, 11), -1))
    h.beat(3)
    h.run()
    assert h.at(1) == Counter({(1, "a", 1, 11): 1})
    assert h.at(2) == Counter()


def test_cross_join():
    h = TwoInputs(join_op(keys=False), [LT, RT], OUT)
    h.push(0, (1, (1, "a")), (2, (None, "b")))
    h.push(1, (1, (7, 70)), (3, (8, 80)), (4, (7, 70), -1))
    h.beat(5)
    h.run()
    assert h.at(1) == Counter({(1, "a", 7, 70): 1})
    assert h.at(2) == Counter({(1, "a", 7, 70): 1, (None, "b", 7, 70): 1})
    assert h.at(3) == Counter(
        {(1, "a", 7, 70): 1, (None, "b", 7, 70): 1, (1, "a", 8, 80): 1, (None, "b", 8, 80): 1}
    )
    assert h.at(4) == Counter({(1, "a", 8, 80): 1, (None, "b", 8, 80): 1})


def test_cross_join_with_residual_only():
    residual = Call("lt", (ColRef(0, INT), ColRef(2, INT)), BOOL)
    h = TwoInputs(join_op(residual, keys=False), [LT, RT], OUT)
    h.push(0, (1, (1, "a")), (1, (5, "b")))
    h.push(1, (1, (3, 0)), (1, (None, 0)))
    h.beat(1)
    h.run()
    assert h.at(1) == Counter({(1, "a", 3, 0): 1})


def test_ties_across_ports_at_one_instant_join_once():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    # Right arrives (and is queued) before left, both at instant 1; then both change at 2.
    h.push(1, (1, (1, 10)))
    h.beat(1, ports=(1,))
    h.run()
    assert h.elements == []  # the left input has not completed instant 1 yet
    h.push(0, (1, (1, "a")))
    h.beat(1, ports=(0,))
    h.run()
    assert h.at(1) == Counter({(1, "a", 1, 10): 1})
    h.push(0, (2, (1, "a"), -1), (2, (1, "b")))
    h.push(1, (2, (1, 10), -1), (2, (1, 12)))
    h.beat(2)
    h.run()
    assert h.at(2) == Counter({(1, "b", 1, 12): 1})
    assert h.heartbeats == [1, 2]


def test_heartbeat_waits_for_the_slower_input():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    h.push(0, (1, (1, "a")))
    h.beat(5, ports=(0,))
    h.run()
    assert h.heartbeats == []
    h.beat(3, ports=(1,))
    h.run()
    assert h.heartbeats == [3]
    h.beat(9, ports=(1,))
    h.run()
    assert h.heartbeats == [3, 5]


@pytest.mark.parametrize("budget", [1, 3, 1 << 20])
def test_random_against_brute_force(budget):
    rng = np.random.default_rng(budget)

    def updates(types_second):
        elems, live = [], Counter()
        for t in range(12):
            for _ in range(int(rng.integers(0, 5))):
                if live and rng.random() < 0.3:
                    row = rng.choice(len(live))
                    row = list(live)[row]
                    live[row] -= 1
                    live = +live
                    elems.append((t, row, -1))
                else:
                    k = [None, 0, 1, 2][int(rng.integers(0, 4))]
                    row = (k, types_second(int(rng.integers(0, 2))))
                    live[row] += 1
                    elems.append((t, row, 1))
        return elems

    left = updates(lambda v: "ab"[v])
    right = updates(lambda v: v * 10)
    residual = Call("ne", (ColRef(1, STR), Const("b", STR)), BOOL)
    h = TwoInputs(join_op(residual), [LT, RT], OUT)
    for t in range(12):
        lt = [e for e in left if e[0] == t]
        rt = [e for e in right if e[0] == t]
        if lt:
            h.push(0, *lt)
        if rt:
            h.push(1, *rt)
        h.beat(t)
        h.run(budget)
    for t in range(12):
        want = brute_join(left, right, t, lambda lr, rr: equi(lr, rr) and lr[1] != "b")
        assert h.at(t) == want, t


# -- the synopsis as runs: merging, expiry from the front, key look-ups ------------------------


def _window_streams(rng, key_of, steps=30):
    """Left: inserts and random retractions; right: a FIFO window (inserts, and retractions
    of its oldest rows in order), so the right synopsis expires from its front."""
    left, right, live_l, fifo = [], [], Counter(), []
    for t in range(steps):
        for _ in range(int(rng.integers(0, 6))):
            if live_l and rng.random() < 0.3:
                row = list(live_l)[int(rng.integers(0, len(live_l)))]
                live_l[row] -= 1
                live_l = +live_l
                left.append((t, row, -1))
            else:
                row = (key_of(int(rng.integers(0, 5))), "ab"[int(rng.integers(0, 2))])
                live_l[row] += 1
                left.append((t, row, 1))
        for _ in range(int(rng.integers(0, 9))):
            row = (key_of(int(rng.integers(0, 5))), int(rng.integers(0, 3)))
            fifo.append(row)
            right.append((t, row, 1))
        while len(fifo) > 12:
            right.append((t, fifo.pop(0), -1))
    return left, right


@pytest.mark.parametrize("key_kind", ["int", "str"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_runs_and_lookups_give_the_same_elements(key_kind, seed, monkeypatch):
    """Many small runs, one run, with and without the sorted key index: the same elements in
    the same order, and the join of the two relations at every instant."""
    import cq_service.engine.operators.join as join_mod

    key_of = (lambda v: [None, 0, 1, 2, 3][v]) if key_kind == "int" else (lambda v: [None, "p", "q", "r", "s"][v])
    kt = INT if key_kind == "int" else STR
    lt, rt = [kt, STR], [kt, INT]
    left, right = _window_streams(np.random.default_rng(seed), key_of)
    results = []
    for ratio, indexed in [(0, True), (1e9, True), (0, False), (2, True)]:
        monkeypatch.setattr(join_mod._Side, "MERGE_RATIO", ratio)
        sorted_index = join_mod._sorted_index if indexed else (lambda keys: None)
        with monkeypatch.context() as m:
            m.setattr(join_mod, "_sorted_index", sorted_index)
            h = TwoInputs(join_op(), [lt, rt], lt + rt)
            most_runs = 0
            for t in range(30):
                if lt_t := [e for e in left if e[0] == t]:
                    h.push(0, *lt_t)
                if rt_t := [e for e in right if e[0] == t]:
                    h.push(1, *rt_t)
                h.beat(t)
                h.run(int(1 + t % 4))
                most_runs = max(most_runs, len(h.op._sides[1]._runs))
            assert most_runs > 2 if ratio == 0 else most_runs >= 1
            assert most_runs == 1 or ratio < 1e9
        results.append(h.elements)
        for t in range(30):
            assert h.at(t) == brute_join(left, right, t, equi), (ratio, indexed, t)
    assert all(r == results[0] for r in results[1:])


def test_fifo_expiry_across_runs_drops_whole_runs():
    h = TwoInputs(join_op(), [LT, RT], OUT)
    side = h.op._sides[1]
    side.MERGE_RATIO = 0  # every delta its own run
    for t in range(6):
        h.push(1, *[(t, (k, t)) for k in range(4)])
        h.beat(t)
        h.run()
    assert len(side._runs) == 6 and len(side) == 24
    # Retract the oldest ten rows (two runs and a half) in order, with two new rows.
    gone = [(6, (k, t), -1) for t in range(3) for k in range(4)][:10]
    h.push(1, *gone, (6, (1, 60)), (6, (9, 61)))
    h.push(0, (6, (1, "a")))
    h.beat(6)
    h.run()
    assert len(side) == 16 and side._retractions == 0  # the FIFO path, no negative rows kept
    assert side._runs[0].lo + len(side._runs[0]) > side._head >= side._runs[0].lo
    assert h.at(6) == Counter({(1, "a", 1, v): 1 for v in (3, 4, 5, 60)})


def test_multi_column_keys_use_the_filter_path():
    lk = (ColRef(0, INT), ColRef(1, STR))
    rk = (ColRef(0, INT), ColRef(1, STR))
    types = [INT, STR]
    h = TwoInputs(lambda n, i, o: Join(n, i, o, lk, rk, None), [types, types], types + types)
    h.push(1, (1, (1, "a")), (1, (1, "b")), (1, (2, "a")), (1, (None, "a")))
    h.beat(1)
    h.run()
    h.push(0, (2, (1, "a")), (2, (2, "b")), (2, (None, "a")), (2, (2, "a")))
    h.beat(2)
    h.run()
    assert h.op._sides[1]._runs[0].index is None
    assert h.at(2) == Counter({(1, "a", 1, "a"): 1, (2, "a", 2, "a"): 1})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_key_matches_counts_equal_key_pairs_of_the_current_rows(seed):
    """The cost model's join selectivity is read from this count: pairs of current rows
    with equal, non-NULL keys, by net weight, before any residual predicate."""
    rng = np.random.default_rng(seed)
    h = TwoInputs(join_op(), [LT, RT], OUT)
    live: list[Counter] = [Counter(), Counter()]
    for t in range(30):
        for port, second in ((0, lambda v: "ab"[v]), (1, lambda v: v * 10)):
            elems = []
            for _ in range(int(rng.integers(0, 6))):
                if live[port] and rng.random() < 0.4:
                    row = list(live[port])[int(rng.integers(0, len(live[port])))]
                    live[port][row] -= 1
                    live[port] = +live[port]
                    elems.append((t, row, -1))
                else:
                    row = ([None, 0, 1, 2][int(rng.integers(0, 4))], second(int(rng.integers(0, 2))))
                    live[port][row] += 1
                    elems.append((t, row, 1))
            if elems:
                h.push(port, *elems)
        h.beat(t)
        h.run()
        want = sum(
            lc * rc
            for (lr, lc), (rr, rc) in product(live[0].items(), live[1].items())
            if equi(lr, rr)
        )
        assert h.op.key_matches() == want


def test_a_window_input_keeps_only_live_rows_from_its_first_delta_on():
    """A window retracts its oldest rows first; the join drops them from the front, also
    when the first delta already holds retractions of its own insertions, so the side holds
    exactly the live rows (no retraction rows waiting for a consolidation)."""
    h = TwoInputs(join_op(), [LT, RT], OUT)
    window = 3
    for t in range(20):
        elems = [(t, (t % 4, "ab"[t % 2]), 1)]
        if t >= window:
            old = t - window
            elems.insert(0, (t, (old % 4, "ab"[old % 2]), -1))
        h.push(0, *elems)
        h.beat(t)
        h.run()
        assert h.op.sides()[0] == min(t + 1, window)
