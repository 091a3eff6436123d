"""Select, Project and Sample: stateless, element-wise operators."""

from __future__ import annotations

from cq_service.cql.logical import Call, CaseExpr, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.operators.project import Project
from cq_service.engine.operators.sample import Sample
from cq_service.engine.operators.select import Select
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT, STR, BOOL, FLT = DataType.INT, DataType.STRING, DataType.BOOL, DataType.FLOAT
TYPES = [INT, STR]


def B(*elems: tuple, ticks: tuple[int, ...] = (), types=TYPES) -> Batch:
    """(ts, row) or (ts, row, weight) elements; ticks default to the timestamps."""
    return make_batch(types, elems, ticks)


def drive(make, items, out_types=TYPES):
    """Run a unary operator over items (an int is a heartbeat): (elements, ticks, heartbeats)."""
    inq, outq = Queue("in"), Queue("out")
    reader = outq.reader()
    op = make("op", [inq.reader()], outq)
    op.out_types = list(out_types)
    for it in items:
        inq.push(Heartbeat(it) if isinstance(it, int) else it)
    while op.runnable():
        op.run(2)
    elements, ticks, hbs = [], set(), []
    while (item := reader.get()) is not None:
        if isinstance(item, Heartbeat):
            hbs.append(item.ts)
        else:
            elements.extend(zip(item.ts.tolist(), item.rows(), item.w.tolist()))
            ticks.update(item.ticks.tolist())
    return elements, ticks, hbs


X, S = ColRef(0, INT), ColRef(1, STR)
IN = [
    B((1, (1, "a")), (1, (None, "b")), (2, (5, None), -1)),
    3,
    B((4, (3, "c")), (4, (None, None))),
    5,
]

# -- Select -----------------------------------------------------------------------------------


def test_select_keeps_only_true():
    pred = Call("gt", (X, Const(2, INT)), BOOL)
    els, ticks, hbs = drive(lambda n, i, o: Select(n, i, o, pred), IN)
    assert els == [(2, (5, None), -1), (4, (3, "c"), 1)]  # NULL > 2 is NULL: dropped
    assert ticks == {1, 2, 4}  # instants survive even when no element does
    assert hbs == [3, 5]


def test_select_is_null_and_three_valued_logic():
    pred = Call("or", (Call("is_null", (X,), BOOL), Call("eq", (S, Const("a", STR)), BOOL)), BOOL)
    els, _, _ = drive(lambda n, i, o: Select(n, i, o, pred), IN)
    assert [r for _, r, _ in els] == [(1, "a"), (None, "b"), (None, None)]
    not_pred = Call("not", (Call("eq", (S, Const("a", STR)), BOOL),), BOOL)
    els, _, _ = drive(lambda n, i, o: Select(n, i, o, not_pred), IN)
    assert [r for _, r, _ in els] == [(None, "b"), (3, "c")]  # NOT NULL is NULL: dropped


def test_select_keeps_weights():
    pred = Const(True, BOOL)
    els, _, _ = drive(lambda n, i, o: Select(n, i, o, pred), IN)
    assert [w for *_, w in els] == [1, 1, -1, 1, 1]


def test_select_false_constant_keeps_ticks_only():
    els, ticks, hbs = drive(lambda n, i, o: Select(n, i, o, Const(False, BOOL)), IN)
    assert els == []
    assert ticks == {1, 2, 4}
    assert hbs == [3, 5]


# -- Project ----------------------------------------------------------------------------------


def test_project_computes_columns_with_nulls():
    exprs = (
        Call("add", (X, Const(1, INT)), INT),
        S,
        Call("concat_op", (S, Const("!", STR)), STR),
        CaseExpr(((Call("is_null", (X,), BOOL), Const("none", STR)),), Const("some", STR), STR),
    )
    out_types = [INT, STR, STR, STR]
    els, ticks, hbs = drive(lambda n, i, o: Project(n, i, o, exprs), IN, out_types)
    assert els == [
        (1, (2, "a", "a!", "some"), 1),
        (1, (None, "b", "b!", "none"), 1),
        (2, (6, None, None, "some"), -1),
        (4, (4, "c", "c!", "some"), 1),
        (4, (None, None, None, "none"), 1),
    ]
    assert ticks == {1, 2, 4}
    assert hbs == [3, 5]


def test_project_reorders_and_duplicates_columns():
    exprs = (S, X, X)
    els, _, _ = drive(lambda n, i, o: Project(n, i, o, exprs), IN[:1], [STR, INT, INT])
    assert [r for _, r, _ in els] == [("a", 1, 1), ("b", None, None), (None, 5, 5)]


def test_project_to_no_columns():
    els, _, _ = drive(lambda n, i, o: Project(n, i, o, ()), IN[:1], [])
    assert [r for _, r, _ in els] == [(), (), ()]


def test_project_division_by_zero_is_null():
    exprs = (Call("div", (X, Const(0, INT)), INT),)
    els, _, _ = drive(lambda n, i, o: Project(n, i, o, exprs), IN[:1], [INT])
    assert [r for _, r, _ in els] == [(None,), (None,), (None,)]


# -- Sample -----------------------------------------------------------------------------------


def numbers(n: int, per_batch: int) -> list:
    items = []
    for k in range(0, n, per_batch):
        items.append(B(*[(k // per_batch, (v, None)) for v in range(k, min(n, k + per_batch))]))
        items.append(k // per_batch)
    return items


def sample(percent: float, seed: int, items) -> list[int]:
    els, _, _ = drive(lambda n, i, o: Sample(n, i, o, percent, seed), items)
    return [r[0] for _, r, _ in els]


def test_sample_zero_keeps_nothing():
    assert sample(0, 1, numbers(500, 100)) == []


def test_sample_hundred_keeps_everything():
    assert sample(100, 1, numbers(500, 100)) == list(range(500))


def test_sample_same_seed_same_selection():
    a = sample(30, 42, numbers(2000, 250))
    b = sample(30, 42, numbers(2000, 250))
    assert a == b
    assert a != sample(30, 43, numbers(2000, 250))


def test_sample_does_not_depend_on_batching():
    assert sample(50, 7, numbers(1000, 1000)) == sample(50, 7, numbers(1000, 13))


def test_sample_fraction_roughly_right():
    for percent in (10, 50, 90):
        kept = len(sample(percent, 3, numbers(10_000, 1000)))
        # Binomial(10000, p): 5 standard deviations is at most 250.
        assert abs(kept - percent * 100) < 250, (percent, kept)


def test_sample_passes_ticks_and_heartbeats():
    els, ticks, hbs = drive(lambda n, i, o: Sample(n, i, o, 0, 1), IN)
    assert els == []
    assert ticks == {1, 2, 4}
    assert hbs == [3, 5]
