"""MarkJoin: EXISTS, IN / op ANY, op ALL and scalar subqueries, as a left row plus its mark,
kept up to date as both sides change. SQL's three-valued rules for IN, NOT IN and ALL."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from cq_service.cql.logical import Call, ColRef
from cq_service.engine.batch import Batch
from cq_service.engine.operators.mark_join import MarkJoin
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT, STR, BOOL = DataType.INT, DataType.STRING, DataType.BOOL
LT = [INT, STR]  # left: (x, s)
RT = [INT, INT]  # right: (v, k); the subquery's value is column 0


def B(types, *elems: tuple) -> Batch:
    return make_batch(types, elems)


class MarkHarness:
    def __init__(self, mode, *, probe=None, op=None, keys=False, correlation=None):
        self.queues = [Queue("left"), Queue("right")]
        out = Queue("out")
        self.reader = out.reader()
        self.op = MarkJoin(
            "m",
            [q.reader() for q in self.queues],
            out,
            mode=mode,
            left_types=LT,
            right_types=RT,
            probe=probe,
            op=op,
            left_keys=(ColRef(0, INT),) if keys else (),
            right_keys=(ColRef(1, INT),) if keys else (),
            correlation=correlation,
        )
        self.op.out_types = [*LT, INT if mode == "scalar" else BOOL]
        self.elements: list[tuple[int, tuple, int]] = []
        self.clock = -1

    def left(self, t, *rows, w=1):
        self.queues[0].push(B(LT, *[(t, r, w) for r in rows]))
        return self

    def right(self, t, *rows, w=1):
        self.queues[1].push(B(RT, *[(t, r, w) for r in rows]))
        return self

    def upto(self, t) -> Counter:
        """Complete instants up to t on both inputs; the result relation at t."""
        for q in self.queues:
            q.push(Heartbeat(t))
        while self.op.runnable():
            self.op.run(1 << 20)
        while (item := self.reader.get()) is not None:
            if not isinstance(item, Heartbeat):
                self.elements.extend(zip(item.ts.tolist(), item.rows(), item.w.tolist()))
        c: Counter = Counter()
        for ts, row, w in self.elements:
            if ts <= t:
                c[row] += w
        assert all(v >= 0 for v in c.values()), c
        # A None mark and a False mark are different rows: compare with types.
        return Counter({_typed(r): n for r, n in c.items() if n})


def _typed(row: tuple) -> tuple:
    return tuple((type(v).__name__, v) for v in row)


def marks(*rows_and_marks) -> Counter:
    return Counter(_typed(r) for r in rows_and_marks)


X = ColRef(0, INT)

# -- EXISTS -----------------------------------------------------------------------------------


def test_exists_uncorrelated_follows_the_right_side():
    h = MarkHarness("exists")
    h.left(1, (1, "a"), (None, "b"))
    assert h.upto(1) == marks((1, "a", False), (None, "b", False))
    h.right(2, (5, 0))
    assert h.upto(2) == marks((1, "a", True), (None, "b", True))
    h.right(3, (6, 0))
    assert h.upto(3) == marks((1, "a", True), (None, "b", True))
    h.right(4, (5, 0), (6, 0), w=-1)
    assert h.upto(4) == marks((1, "a", False), (None, "b", False))


def test_exists_correlated_by_keys():
    h = MarkHarness("exists", keys=True)
    h.left(1, (1, "a"), (2, "b"), (None, "n"))
    h.right(1, (10, 1), (20, None))
    assert h.upto(1) == marks((1, "a", True), (2, "b", False), (None, "n", False))
    h.right(2, (30, 2))
    h.right(2, (10, 1), w=-1)
    assert h.upto(2) == marks((1, "a", False), (2, "b", True), (None, "n", False))


def test_exists_with_correlation_predicate():
    # EXISTS (SELECT * FROM R WHERE R.v > L.x)
    corr = Call("gt", (ColRef(2, INT), ColRef(0, INT)), BOOL)
    h = MarkHarness("exists", correlation=corr)
    h.left(1, (5, "a"), (15, "b"), (None, "n"))
    h.right(1, (10, 0))
    assert h.upto(1) == marks((5, "a", True), (15, "b", False), (None, "n", False))
    h.right(2, (20, 0))
    assert h.upto(2) == marks((5, "a", True), (15, "b", True), (None, "n", False))


def test_left_duplicates_and_deletions_keep_their_marks():
    h = MarkHarness("exists", keys=True)
    h.left(1, (1, "a"), (1, "a"))
    h.right(1, (10, 1))
    assert h.upto(1) == Counter({_typed((1, "a", True)): 2})
    h.left(2, (1, "a"), w=-1)
    assert h.upto(2) == marks((1, "a", True))
    h.right(3, (10, 1), w=-1)
    assert h.upto(3) == marks((1, "a", False))
    h.left(4, (1, "a"), w=-1)
    assert h.upto(4) == Counter()


def test_left_and_right_change_at_the_same_instant():
    h = MarkHarness("exists", keys=True)
    h.left(1, (1, "a"))
    h.right(1, (10, 1))
    assert h.upto(1) == marks((1, "a", True))
    h.left(2, (2, "b"))
    h.right(2, (20, 2))
    h.right(2, (10, 1), w=-1)
    assert h.upto(2) == marks((1, "a", False), (2, "b", True))


# -- IN / ANY ---------------------------------------------------------------------------------


def test_in_three_valued():
    h = MarkHarness("any", probe=X, op="=")
    h.left(1, (1, "a"), (2, "b"), (None, "n"))
    # Empty subquery: x IN () is FALSE, even for NULL x.
    assert h.upto(1) == marks((1, "a", False), (2, "b", False), (None, "n", False))
    h.right(2, (1, 0), (3, 0))
    assert h.upto(2) == marks((1, "a", True), (2, "b", False), (None, "n", None))
    h.right(3, (None, 0))
    # 2 IN (1, 3, NULL) is NULL; 1 IN (...) stays TRUE.
    assert h.upto(3) == marks((1, "a", True), (2, "b", None), (None, "n", None))
    h.right(4, (1, 0), (3, 0), w=-1)
    assert h.upto(4) == marks((1, "a", None), (2, "b", None), (None, "n", None))


def test_any_with_comparison():
    # x < ANY (SELECT v FROM R)
    h = MarkHarness("any", probe=X, op="<")
    h.left(1, (1, "a"), (5, "b"))
    h.right(1, (3, 0))
    assert h.upto(1) == marks((1, "a", True), (5, "b", False))
    h.right(2, (None, 0))
    assert h.upto(2) == marks((1, "a", True), (5, "b", None))
    h.right(3, (9, 0))
    assert h.upto(3) == marks((1, "a", True), (5, "b", True))


def test_in_correlated_by_keys():
    # x IN (SELECT v FROM R WHERE R.k = L.x)  -- v = k here except where noted
    h = MarkHarness("any", probe=X, op="=", keys=True)
    h.left(1, (1, "a"), (2, "b"))
    h.right(1, (1, 1), (None, 2))
    assert h.upto(1) == marks((1, "a", True), (2, "b", None))
    h.right(2, (None, 2), w=-1)
    assert h.upto(2) == marks((1, "a", True), (2, "b", False))


# -- ALL --------------------------------------------------------------------------------------


def test_all_three_valued():
    # x > ALL (SELECT v FROM R)
    h = MarkHarness("all", probe=X, op=">")
    h.left(1, (5, "a"), (None, "n"))
    assert h.upto(1) == marks((5, "a", True), (None, "n", True))  # ALL of nothing is TRUE
    h.right(2, (1, 0), (3, 0))
    assert h.upto(2) == marks((5, "a", True), (None, "n", None))
    h.right(3, (None, 0))
    assert h.upto(3) == marks((5, "a", None), (None, "n", None))
    h.right(4, (7, 0))
    assert h.upto(4) == marks((5, "a", False), (None, "n", None))
    h.right(5, (7, 0), (None, 0), w=-1)
    assert h.upto(5) == marks((5, "a", True), (None, "n", None))


def test_not_in_is_all_not_equal():
    # x NOT IN (subq) == x <> ALL (subq): NULL in the subquery makes every non-match NULL.
    h = MarkHarness("all", probe=X, op="<>")
    h.left(1, (1, "a"), (2, "b"))
    h.right(1, (1, 0))
    assert h.upto(1) == marks((1, "a", False), (2, "b", True))
    h.right(2, (None, 0))
    assert h.upto(2) == marks((1, "a", False), (2, "b", None))


# -- scalar -----------------------------------------------------------------------------------


def test_scalar_subquery():
    # (SELECT v FROM R WHERE R.k = L.x)
    h = MarkHarness("scalar", keys=True)
    h.left(1, (1, "a"), (2, "b"), (None, "n"))
    h.right(1, (10, 1))
    assert h.upto(1) == marks((1, "a", 10), (2, "b", None), (None, "n", None))
    h.right(2, (20, 2), (11, 1))  # two rows for key 1: a run-time error, NULL
    assert h.upto(2) == marks((1, "a", None), (2, "b", 20), (None, "n", None))
    assert h.op.errors >= 1
    h.right(3, (10, 1), w=-1)
    assert h.upto(3) == marks((1, "a", 11), (2, "b", 20), (None, "n", None))


def test_scalar_duplicate_rows_are_more_than_one_row():
    h = MarkHarness("scalar")
    h.left(1, (1, "a"))
    h.right(1, (7, 0), (7, 0))
    assert h.upto(1) == marks((1, "a", None))
    h.right(2, (7, 0), w=-1)
    assert h.upto(2) == marks((1, "a", 7))


def test_scalar_with_correlation_predicate():
    # (SELECT v FROM R WHERE R.v > L.x) with exactly one match
    corr = Call("gt", (ColRef(2, INT), ColRef(0, INT)), BOOL)
    h = MarkHarness("scalar", correlation=corr)
    h.left(1, (5, "a"), (1, "b"))
    h.right(1, (3, 0), (8, 0))
    assert h.upto(1) == marks((5, "a", 8), (1, "b", None))


# -- against a direct evaluation --------------------------------------------------------------


def _expected(mode, op, lrow, right: Counter):
    import operator

    cmp = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, ">": operator.gt}[op or "="]
    vals = [r[0] for r, n in right.items() for _ in range(n) if r[1] is not None and r[1] == lrow[0]]
    if mode == "exists":
        return bool(vals)
    res = [None if lrow[0] is None or v is None else cmp(lrow[0], v) for v in vals]
    if mode == "any":
        return True if True in res else (None if None in res else False)
    return False if False in res else (None if None in res else True)


@pytest.mark.parametrize(("mode", "op"), [("exists", None), ("any", "="), ("any", "<"), ("all", ">"), ("all", "<>")])
def test_random_correlated_against_direct_evaluation(mode, op):
    rng = np.random.default_rng(len(mode) * 7 + len(op or ""))
    h = MarkHarness(mode, probe=None if mode == "exists" else X, op=op, keys=True)
    vals = [None, 0, 1, 2]
    left_live: Counter = Counter()
    right_live: Counter = Counter()
    for t in range(15):
        for _ in range(int(rng.integers(0, 3))):
            row = (vals[int(rng.integers(0, 4))], "s")
            if left_live[row] and rng.random() < 0.4:
                left_live[row] -= 1
                h.left(t, row, w=-1)
            else:
                left_live[row] += 1
                h.left(t, row)
        for _ in range(int(rng.integers(0, 4))):
            row = (vals[int(rng.integers(0, 4))], vals[int(rng.integers(0, 4))])
            if right_live[row] and rng.random() < 0.4:
                right_live[row] -= 1
                h.right(t, row, w=-1)
            else:
                right_live[row] += 1
                h.right(t, row)
        got = h.upto(t)
        want = Counter()
        for row, n in (+left_live).items():
            want[_typed((*row, _expected(mode, op, row, +right_live)))] += n
        assert got == want, t


def test_left_row_deleted_and_reinserted_within_one_run():
    # E.g. a [Rows 1] window over arrivals a, b, a at one instant emits +a +b −a +a −b.
    h = MarkHarness("exists", keys=True)
    h.right(1, (10, 1))
    h.left(1, (1, "a"), (2, "b"))
    h.left(1, (1, "a"), w=-1)
    h.left(1, (1, "a"))
    h.left(1, (2, "b"), w=-1)
    assert h.upto(1) == marks((1, "a", True))


# -- uncorrelated subqueries: the columnar path ------------------------------------------------


def _expected_uncorrelated(mode, op, lrow, right: Counter):
    import operator

    if mode == "scalar":
        n = sum(right.values())
        return None if n != 1 else next(iter(right))[0]
    cmp = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, ">=": operator.ge}[op or "="]
    vals = [r[0] for r, n in right.items() for _ in range(n)]
    if mode == "exists":
        return bool(vals)
    res = [None if lrow[0] is None or v is None else cmp(lrow[0], v) for v in vals]
    if mode == "any":
        return True if True in res else (None if None in res else False)
    return False if False in res else (None if None in res else True)


@pytest.mark.parametrize(
    ("mode", "op"),
    [("exists", None), ("scalar", None), ("any", "="), ("any", "<"), ("all", ">="), ("all", "<>")],
)
@pytest.mark.parametrize("fifo", [True, False])
def test_random_uncorrelated_against_direct_evaluation(mode, op, fifo):
    """Left deltas shaped like a window's (the oldest rows retracted in order, with `fifo`) or
    arbitrary retractions; the right relation changing under them."""
    rng = np.random.default_rng(len(mode) * 11 + len(op or "") + fifo)
    h = MarkHarness(mode, probe=X if mode in ("any", "all") else None, op=op)
    vals = [None, 0, 1, 2, 3]
    order: list[tuple] = []  # live left rows, oldest first
    right_live: Counter = Counter()
    for t in range(25):
        ins = [(vals[int(rng.integers(0, 5))], "abc"[int(rng.integers(0, 3))])
               for _ in range(int(rng.integers(0, 5)))]
        order.extend(ins)
        k = int(rng.integers(0, len(order) + 1)) if rng.random() < 0.6 else 0
        if fifo:
            gone = order[:k]
            del order[:k]
        else:
            picks = sorted(rng.choice(len(order), size=k, replace=False).tolist(), reverse=True)
            gone = [order.pop(i) for i in picks]
        if ins or gone:
            elems = [(t, r, 1) for r in ins] + [(t, r, -1) for r in gone]
            h.queues[0].push(B(LT, *elems))
        for _ in range(int(rng.integers(0, 3))):
            row = (vals[int(rng.integers(0, 5))], 0)
            if right_live[row] and rng.random() < 0.5:
                right_live[row] -= 1
                h.right(t, row, w=-1)
            else:
                right_live[row] += 1
                h.right(t, row)
        got = h.upto(t)
        want = Counter()
        for row in order:
            want[_typed((*row, _expected_uncorrelated(mode, op, row, +right_live)))] += 1
        assert got == want, t


def test_uncorrelated_window_slide_keeps_the_left_rows_as_a_fifo():
    # A tumbling window's left input: every instant retracts all the rows of the one before.
    h = MarkHarness("scalar")
    h.right(0, (7, 0))
    for t in range(1, 6):
        rows = [(t * 10 + i, "s") for i in range(4)]
        old = [((t - 1) * 10 + i, "s") for i in range(4)] if t > 1 else []
        h.queues[0].push(B(LT, *[(t, r, 1) for r in rows], *[(t, r, -1) for r in old]))
        assert h.upto(t) == marks(*[(*r, 7) for r in rows])
        assert h.op._flat.bag.rows == 4  # retractions matched the oldest rows, none kept
        assert h.op._flat.bag._loose == 0


def test_uncorrelated_right_change_re_emits_only_rows_whose_mark_changed():
    # x >= ALL (subquery): raising the maximum from 3 to 4 changes the marks of x = 3 only.
    h = MarkHarness("all", probe=X, op=">=")
    h.left(1, (1, "a"), (3, "b"), (5, "c"), (5, "d"))
    h.right(1, (1, 0), (3, 0))
    assert h.upto(1) == marks((1, "a", False), (3, "b", True), (5, "c", True), (5, "d", True))
    n = len(h.elements)
    h.right(2, (4, 0))
    assert h.upto(2) == marks((1, "a", False), (3, "b", False), (5, "c", True), (5, "d", True))
    assert sorted(h.elements[n:]) == [(2, (3, "b", False), 1), (2, (3, "b", True), -1)]
    n = len(h.elements)
    h.right(3, (1, 0))  # a value already there: the set is unchanged, nothing to re-emit
    assert h.upto(3) == marks((1, "a", False), (3, "b", False), (5, "c", True), (5, "d", True))
    assert h.elements[n:] == []


def test_uncorrelated_scalar_counts_multiplicities():
    h = MarkHarness("scalar")
    h.left(1, (1, "a"), (2, "b"))
    h.right(1, (7, 0))
    assert h.upto(1) == marks((1, "a", 7), (2, "b", 7))
    h.right(2, (7, 0))  # the same row twice: more than one row, NULL
    assert h.upto(2) == marks((1, "a", None), (2, "b", None))
    assert h.op.errors >= 1
    h.right(3, (7, 0), (7, 0), w=-1)  # empty: the default (NULL here)
    assert h.upto(3) == marks((1, "a", None), (2, "b", None))
    h.right(4, (8, 0))
    assert h.upto(4) == marks((1, "a", 8), (2, "b", 8))
