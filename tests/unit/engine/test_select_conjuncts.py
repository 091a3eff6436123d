"""Select's conjuncts, one at a time on the survivors: any order, any switch, the same rows as
the whole predicate evaluated at once (three-valued logic, NULLs, division by zero)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pytest

from cq_service.cql.logical import Call, CastExpr, ColRef, Const
from cq_service.engine import conjunction, filter_order
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import FUNCTIONS, compile_predicate
from cq_service.engine.filter_order import StaticOrder, movable, split_conjuncts
from cq_service.engine.operators.select import Select
from cq_service.engine.queues import Queue
from cq_service.types import DataType
from tests.unit.engine.filter_orderers import Alternating, Switching

INT, BOOL, STRING = DataType.INT, DataType.BOOL, DataType.STRING
TYPES = [INT, INT, STRING]
a, b, c = ColRef(0, INT, "a"), ColRef(1, INT, "b"), ColRef(2, STRING, "c")


def _and(*xs):
    e = xs[0]
    for x in xs[1:]:
        e = Call("and", (e, x), BOOL)
    return e


CONJUNCTS = [
    Call("gt", (Call("div", (Const(10, INT), a), INT), Const(2, INT)), BOOL),  # 10 / a > 2
    Call("ne", (b, Const(3, INT)), BOOL),
    Call("like", (c, Const("x%", STRING)), BOOL),
    Call("or", (Call("is_null", (a,), BOOL), Call("lt", (b, Const(8, INT)), BOOL)), BOOL),
    Call("eq", (CastExpr(c, INT), CastExpr(c, INT)), BOOL),  # NULL where c is not a number
]


def _batch(seed: int, n: int = 300) -> Batch:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        x = None if rng.random() < 0.15 else int(rng.integers(-2, 6))
        y = None if rng.random() < 0.15 else int(rng.integers(0, 10))
        z = None if rng.random() < 0.1 else str(rng.choice(["x1", "xy", "7", "y", "x"]))
        rows.append((x, y, z))
    return Batch.from_rows(rows, np.arange(n), np.ones(n, np.int64), TYPES)


def _run(pred, factory, batches: Sequence[Batch]) -> tuple[Select, list[tuple]]:
    op = Select("#s", [], Queue("q"), pred, factory)
    op.out_types = TYPES
    out: list[Batch] = []
    op.emit = out.append  # type: ignore[method-assign]
    for bt in batches:
        op.on_batch(bt)
    return op, [(int(t), *r) for bo in out for t, r in zip(bo.ts, bo.rows(), strict=True)]


def _expected(pred, batches: Sequence[Batch]) -> list[tuple]:
    whole = compile_predicate(pred)
    rows = []
    for bt in batches:
        kept = bt.filter(whole(bt.columns, len(bt)))
        rows += [(int(t), *r) for t, r in zip(kept.ts, kept.rows(), strict=True)]
    return rows


def test_split_conjuncts_in_written_order():
    assert split_conjuncts(_and(*CONJUNCTS[:3])) == CONJUNCTS[:3]
    assert split_conjuncts(CONJUNCTS[3]) == [CONJUNCTS[3]]  # OR is one conjunct


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_every_order_keeps_the_same_rows(order):
    pred = _and(*CONJUNCTS[:4])
    batches = [_batch(s) for s in range(3)]

    class Fixed(StaticOrder):
        def order(self):
            return list(order)

    op, got = _run(pred, Fixed, batches)
    assert got == _expected(pred, batches)
    assert op.conjunction.evaluated[order[0]] == sum(len(bt) for bt in batches)


def test_switching_orders_every_batch_with_profiling_keeps_the_same_rows():
    pred = _and(*CONJUNCTS)
    batches = [_batch(s, n) for s, n in zip(range(20), [1, 2, 0, 50, 7] * 4, strict=True)]
    op, got = _run(pred, Switching, batches)
    assert got == _expected(pred, batches)
    assert op.conjunction.orderer.seen == op.conjunction.profiled > 0


def test_a_conjunct_that_is_not_movable_keeps_the_written_order(monkeypatch):
    pred = _and(*CONJUNCTS[:3])
    assert all(movable(x) for x in CONJUNCTS)
    monkeypatch.setattr(filter_order, "ROW_WISE_FUNCTIONS", frozenset({"and", "gt", "ne", "div"}))
    assert not movable(CONJUNCTS[2])
    op, _ = _run(pred, Switching, [_batch(0)])
    assert isinstance(op.conjunction.orderer, StaticOrder)


def test_every_compiled_function_is_reviewed_as_row_wise():
    """A function added to the expression compiler must be reviewed: listed in
    ROW_WISE_FUNCTIONS if it is total and row-wise (else its conjuncts stay pinned)."""
    assert set(FUNCTIONS) == filter_order.ROW_WISE_FUNCTIONS


def test_one_conjunct_needs_no_orderer():
    op, _ = _run(CONJUNCTS[0], Switching, [_batch(0)])
    assert isinstance(op.conjunction.orderer, StaticOrder) and op.describe() == "select"


class _Recording(Switching):
    """`Switching`, with a fixed order per batch sequence (the same in every run of a test)
    and the profile tuples it is given kept, in the order given."""

    def __init__(self, n: int, profile_batch: int):
        super().__init__(n, seed=3)
        self.profile_batch = profile_batch
        self.tuples: list[tuple[tuple[bool, ...], tuple[bool, ...]]] = []
        self.batches_with_tuples = 0

    def sample(self, position: int, dropped: int) -> np.ndarray:
        return np.arange(0, dropped, 3)  # every third dropped row

    def observe(self, rows, seconds, known, drops) -> None:
        super().observe(rows, seconds, known, drops)
        assert all(s >= 0 for s in seconds)
        self.batches_with_tuples += bool(len(drops))
        self.tuples.extend(zip(map(tuple, known), map(tuple, drops), strict=True))


def test_profiled_rows_evaluated_together_give_the_same_profile_tuples():
    """Gathering profiled rows over batches (`profile_batch`) and evaluating each filter once
    on all of them gives the tuples, in arrival order, that evaluating them per batch gives."""
    pred = _and(*CONJUNCTS)
    batches = [_batch(seed, n=60) for seed in range(12)]
    runs = {}
    for size in (1, 40):
        made: list[_Recording] = []
        _run(
            pred,
            lambda n, size=size, made=made: made.append(_Recording(n, size)) or made[-1],
            batches,
        )
        runs[size] = made[0]
    one, gathered = runs[1], runs[40]
    assert one.tuples and gathered.tuples == one.tuples[: len(gathered.tuples)]
    assert len(one.tuples) - len(gathered.tuples) < 40  # only the last, unfilled, still waits
    assert gathered.batches_with_tuples < one.batches_with_tuples


def test_one_pass_batches_between_ordered_ones_keep_the_same_rows(monkeypatch):
    """An orderer with `whole_pass` lets the selection run some batches in one pass: the rows
    are those of the whole predicate, those batches count every conjunct on every row and are
    not observed (no profile tuples come from them)."""
    monkeypatch.setattr(conjunction, "PassChooser", Alternating)
    pred = _and(*CONJUNCTS)
    batches = [_batch(s, n) for s, n in zip(range(12), [40, 3, 0, 90, 7, 60] * 2, strict=True)]

    op, got = _run(pred, lambda n: Switching(n, whole_pass=True), batches)
    assert got == _expected(pred, batches)
    conj = op.conjunction
    one_pass = [bt for bt in batches if len(bt)][2::3]  # empty batches are not counted
    assert conj.one_pass_rows == sum(len(bt) for bt in one_pass) > 0
    assert conj.chooser is not None and conj.chooser.whole_batches == len(one_pass)


def test_without_whole_pass_every_batch_is_ordered():
    op, _ = _run(_and(*CONJUNCTS), Switching, [_batch(s) for s in range(3)])
    assert op.conjunction.chooser is None and op.conjunction.one_pass_rows == 0


def test_static_runs_one_pass_and_counts_every_conjunct():
    batches = [_batch(s) for s in range(3)]
    op, got = _run(_and(*CONJUNCTS), StaticOrder, batches)
    assert got == _expected(_and(*CONJUNCTS), batches)
    rows = sum(len(bt) for bt in batches)
    assert op.conjunction.evaluated == [rows] * len(CONJUNCTS)


class _Counting(Switching):
    """`Switching` that counts the batches (slices) it observes."""

    def __init__(self, n: int, whole_pass: bool = False):
        super().__init__(n, whole_pass=whole_pass)
        self.observed = 0

    def observe(self, rows, seconds, known, drops) -> None:
        super().observe(rows, seconds, known, drops)
        self.observed += 1


@pytest.mark.parametrize("whole_pass", [False, True])
def test_a_batch_larger_than_a_slice_switches_order_between_slices(monkeypatch, whole_pass):
    """A batch of more than `SLICE` rows is evaluated slice by slice, a new order at each
    (and, with `whole_pass`, cheap conjuncts on the whole slice or one pass at every third):
    the rows are those of the whole predicate, in the batch's order."""
    monkeypatch.setattr(conjunction, "SLICE", 64)
    monkeypatch.setattr(conjunction, "PassChooser", Alternating)
    pred = _and(*CONJUNCTS)
    batches = [_batch(s, n) for s, n in zip(range(4), [300, 64, 65, 10], strict=True)]
    made: list[_Counting] = []
    _, got = _run(pred, lambda n: made.append(_Counting(n, whole_pass)) or made[-1], batches)
    assert got == _expected(pred, batches)
    slices = sum(-(-len(bt) // 64) for bt in batches)  # 5 + 1 + 2 + 1
    ordered = slices - (slices // 3 if whole_pass else 0)  # every third in one pass
    assert made[0].observed == ordered


def test_cheap_conjuncts_on_the_whole_slice_count_every_row(monkeypatch):
    """Once a gather measures dearer than a conjunct's skipped rows, that conjunct runs on the
    whole slice: the rows are the same, and its evaluations count every row of the slice."""
    monkeypatch.setattr(conjunction, "PassChooser", Alternating)
    pred = _and(*CONJUNCTS[:2])

    class Fixed(Switching):
        def order(self):
            return [0, 1]

    batches = [_batch(s) for s in range(6)]
    op, got = _run(pred, lambda n: Fixed(n, whole_pass=True), batches)
    assert got == _expected(pred, batches)
    conj = op.conjunction
    assert conj._rate[0] is not None  # measured where it ran first, on whole batches
    conj._rate[1] = 1e-9  # as a one pass shown to the orderer would measure it
    conj._gather_seconds = 1.0  # a gather now costs more than any conjunct on any slice
    more = [_batch(s) for s in range(6, 9)]
    before = list(conj.evaluated)
    op.emit = lambda _b: None  # type: ignore[method-assign]
    for bt in more:
        op.on_batch(bt)
    assert [e - b for e, b in zip(conj.evaluated, before, strict=True)] == [900, 900]
