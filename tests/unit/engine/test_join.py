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
    import cq_service.engine.operators.join_runs as runs
    import cq_service.engine.operators.join_synopsis as synopsis

    key_of = (lambda v: [None, 0, 1, 2, 3][v]) if key_kind == "int" else (lambda v: [None, "p", "q", "r", "s"][v])
    kt = INT if key_kind == "int" else STR
    lt, rt = [kt, STR], [kt, INT]
    left, right = _window_streams(np.random.default_rng(seed), key_of)
    results = []
    for ratio, indexed in [(0, True), (1e9, True), (0, False), (2, True)]:
        monkeypatch.setattr(synopsis.JoinSide, "MERGE_RATIO", ratio)
        sorted_index = runs._sorted_index if indexed else (lambda keys: None)
        with monkeypatch.context() as m:
            m.setattr(runs, "_sorted_index", sorted_index)
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
        assert len(h.op._sides[0]) == h.op.sides()[0] == min(t + 1, window)


# -- a join fed by a join: its side holds exactly the current rows ---------------------------


def _window(rng, steps: int, life: int, second) -> list[tuple]:
    """A Range window's deltas: rows (k, second) inserted and retracted `life` instants later
    (small domains, so equal rows are common)."""
    elems = []
    for t in range(steps):
        for _ in range(int(rng.integers(0, 4))):
            row = (int(rng.integers(0, 3)), second(int(rng.integers(0, 2))))
            elems += [(t, row, 1), (t + life, row, -1)]
    return sorted(elems, key=lambda e: e[0])


def _side_rows(side) -> Counter:
    """A synopsis's rows by net weight."""
    if not len(side):
        return Counter()
    cols, _, w = side.live_arrays()
    c: Counter = Counter()
    for row, k in zip(zip(*(x.to_pylist() for x in cols)), w.tolist()):
        c[row] += k
    return +c


@pytest.mark.parametrize("compact", ["at once", "tombstones"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_join_over_a_join_holds_exactly_the_current_rows(seed, compact, monkeypatch):
    """(A ⋈ B) ⋈ C with deltas of several instants per step: the lower join's output holds
    pairs that cancel within a step (ΔA ⋈ ΔB) and retractions in no FIFO order. The upper
    join's side cancels them as they come: after each step it holds exactly the rows of A ⋈ B
    (no retraction rows waiting for a consolidation), and the result is the three-way join.
    With compaction put off ("tombstones"), cancelled rows linger with weight 0: still exact."""
    import cq_service.engine.operators.join_synopsis as synopsis

    if compact == "tombstones":
        monkeypatch.setattr(synopsis.JoinSide, "COMPACT_ROWS", 0)
        monkeypatch.setattr(synopsis.JoinSide, "COMPACT_RATIO", 1)
    rng = np.random.default_rng(seed)
    steps = 40
    a = _window(rng, steps, 5, lambda v: "ab"[v])
    b = _window(rng, steps, 4, lambda v: v * 10)
    c = _window(rng, steps, 6, lambda v: v + 100)
    qa, qb, qc, q1, q2 = (Queue(n) for n in ("a", "b", "c", "ab", "abc"))
    lower = Join("ab", [qa.reader(), qb.reader()], q1, (ColRef(0, INT),), (ColRef(0, INT),), None)
    lower.out_types = OUT
    upper = Join("abc", [q1.reader(), qc.reader()], q2, (ColRef(0, INT),), (ColRef(0, INT),), None)
    upper.out_types = [*OUT, INT, INT]
    out = q2.reader()
    elements: list[tuple] = []
    cancelled = 0
    for t0 in range(0, steps + 8, 3):  # three instants per step
        t1 = t0 + 2
        for q, elems, types in ((qa, a, LT), (qb, b, RT), (qc, c, RT)):
            if now := [e for e in elems if t0 <= e[0] <= t1]:
                q.push(B(types, *now))
            q.push(Heartbeat(t1))
        while lower.runnable() or upper.runnable():
            for op in (lower, upper):
                if op.runnable():
                    op.run(1 << 20)
        while (item := out.get()) is not None:
            if not isinstance(item, Heartbeat):
                elements.extend(zip(item.ts.tolist(), item.rows(), item.w.tolist()))
        ab = brute_join(a, b, t1, equi)
        side = upper._sides[0]
        assert _side_rows(side) == ab
        assert side._retractions == 0
        if compact == "at once":
            assert len(side) == sum(ab.values()) and side.dead == 0
        else:
            assert len(side) - side.dead == sum(ab.values())
            cancelled = max(cancelled, side.dead)
        for t in range(t0, t1 + 1):
            want: Counter = Counter()
            ab_t, c_t = brute_join(a, b, t, equi), relation(c, t)
            for (lr, lc), (rr, rc) in product(ab_t.items(), c_t.items()):
                if lr[0] == rr[0]:
                    want[lr + rr] += lc * rc
            assert relation_at(elements, t) == want, t
    assert compact == "at once" or cancelled > 0


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_retractions_cancel_equal_rows_of_any_weight(seed):
    """A side fed deltas with weights other than ±1, equal rows stored several times, NULLs
    (keys included) and retractions of a delta's own insertions: its rows by weight are the
    relation, and no stored row is a retraction or cancelled."""
    from cq_service.engine.operators.join_synopsis import JoinSide

    rng = np.random.default_rng(seed)
    side, live = JoinSide(), Counter()
    for t in range(60):
        elems = []
        for _ in range(int(rng.integers(1, 7))):
            if live and rng.random() < 0.45:
                row = list(live)[int(rng.integers(0, len(live)))]
                k = int(rng.integers(1, live[row] + 1))
                live[row] -= k
                live = +live
                elems.append((t, row, -k))
            else:
                k, s = (int(x) for x in rng.integers(0, 3, 2))
                row = ([None, 0, 1][k], [None, "x", "y"][s])
                k = int(rng.integers(1, 3))
                live[row] += k
                elems.append((t, row, k))
        batch = B(LT, *elems)
        side.add(list(batch.columns), [batch.columns[0]], batch.w)
        assert _side_rows(side) == live
        assert side._retractions == 0 and side.dead == 0
        assert len(side) == 0 or bool((side.live_arrays()[2] > 0).all())


@pytest.mark.parametrize("run_was", [b"join\n_Run", b"join_synopsis\nRun"])
def test_a_side_pickled_under_the_old_module_path_loads(run_was):
    """Snapshots written before join_synopsis.py name `join._Side` and `join._Run`; those
    written before join_runs.py name `join_synopsis.Run`."""
    import pickle

    from cq_service.engine.operators.join_synopsis import JoinSide

    side = JoinSide()
    batch = B(LT, (1, (1, "a"), 1), (1, (2, "b"), 2), (2, (1, "a"), -1))
    side.add(list(batch.columns), [batch.columns[0]], batch.w)
    old = pickle.dumps(side, protocol=2)  # GLOBAL opcodes: module and name as text
    package = b"cq_service.engine.operators."
    for now, was in ((b"join_synopsis\nJoinSide", b"join\n_Side"), (b"join_runs\nRun", run_was)):
        assert package + now + b"\n" in old
        old = old.replace(package + now + b"\n", package + was + b"\n")
    assert b"join_runs" not in old
    again = pickle.loads(old)
    assert type(again) is JoinSide
    assert _side_rows(again) == _side_rows(side) == Counter({(2, "b"): 2})


def test_row_hashes_are_equal_for_equal_rows():
    """Equal rows hash alike whatever the array's offset, NULL position or width: slices,
    NULLs, -0.0 and 0.0, timestamps, strings."""
    import pyarrow as pa

    from cq_service.engine.retract import row_hash

    ints = pa.array([7, None, 3, 7, None, 3], pa.int32())
    floats = pa.array([0.0, 1.5, None, -0.0, 1.5, None])
    times = pa.array([1, 2, 3, 1, 2, 3], pa.timestamp("ms"))
    strs = pa.array(["a", None, "b", "a", None, "b"])
    cols = [ints, floats, times, strs]
    h = row_hash(cols)
    assert h[0] == h[3] and h[1] == h[4] and h[2] == h[5]
    assert len(set(h[:3].tolist())) == 3
    tail = row_hash([c.slice(3) for c in cols])
    assert tail.tolist() == h[3:].tolist()


# -- slices cut at instants while ΔL ⋈ ΔR would hold too many pairs ------------------------------


def _now_windows(instants: int, per: int = 5) -> tuple[list[tuple], list[tuple]]:
    """Two [Now] windows' deltas: `per` rows at each instant (keys 0..per-1), each retracted at
    the next instant."""
    left, right = [], []
    for t in range(instants):
        for k in range(per):
            left.append((t, (k, "a"), 1))
            right.append((t, (k, t), 1))
            if t:
                left.append((t, (k, "a"), -1))
                right.append((t, (k, t - 1), -1))
    return left, right


def test_short_windows_read_in_one_batch_make_few_pairs():
    """A [Now] join of 400 instants read at once: each element meets the later elements of its
    key that its own expiry cancels. Cut at instants, the join makes about ten elements per
    input element (82,445 for 7,990); in one slice it made 3,192,005."""
    left, right = _now_windows(400)
    h = TwoInputs(join_op(), [LT, RT], OUT)
    h.push(0, *left)
    h.push(1, *right)
    h.beat(399)
    h.run()
    for t in (0, 1, 200, 399):
        assert h.at(t) == brute_join(left, right, t, equi), t
    assert h.op.rows_out < 16 * (len(left) + len(right))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_cutting_every_slice_at_instants_keeps_the_result(seed, monkeypatch):
    """Every slice of several instants cut (no pair allowed), on random inserts and deletes
    read in one batch: the join of the two relations at every instant."""
    monkeypatch.setattr(Join, "PAIRS_PER_ROW", 0)
    monkeypatch.setattr(Join, "MIN_CHECKED", 0)
    rng = np.random.default_rng(seed)
    left, right = _window_streams(rng, lambda v: [None, 0, 1, 2, 3][v])
    h = TwoInputs(join_op(), [LT, [INT, INT]], OUT)
    h.push(0, *left)
    h.push(1, *right)
    h.beat(29)
    h.run()
    for t in range(30):
        assert h.at(t) == brute_join(left, right, t, equi), t
