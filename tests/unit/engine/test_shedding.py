"""Load shedding in windows: each tuple that passes the inner WHERE is dropped with probability p,
decided by a hash of its position, so runs are reproducible; ticks and heartbeats always pass,
and the results are exact for the tuples kept."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import product

import numpy as np
import pyarrow as pa
import pytest

from cq_service.cql.logical import Call, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.operators.join import Join
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.operators.rows_window import PartitionRowsWindow, RowsWindow
from cq_service.engine.operators.sample import sample_uniform
from cq_service.engine.operators.unbounded_window import UnboundedWindow
from cq_service.engine.operators.window_base import WindowOperator
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import relation_at

INT, BOOL = DataType.INT, DataType.BOOL
TYPES = [INT, INT]  # (id, key)

Element = tuple[int, tuple, int]  # (ts, row, weight)


def batch(ids: np.ndarray, ts: np.ndarray, keys: np.ndarray | None = None) -> Batch:
    """Tuples (id, key) at timestamps `ts` (non-decreasing); ticks are the timestamps."""
    keys = ids % 7 if keys is None else keys
    cols = (pa.array(ids, pa.int64()), pa.array(keys, pa.int64()))
    return Batch(cols, ts.astype(np.int64), np.ones(len(ids), np.int64), np.unique(ts))


class Driven:
    """An operator with its input queues and everything it emitted."""

    def __init__(self, make: Callable, ports: int = 1, types: Sequence[DataType] = TYPES):
        self.queues = [Queue(f"in{p}") for p in range(ports)]
        out = Queue("out")
        self.reader = out.reader()
        self.op = make("op", [q.reader() for q in self.queues], out)
        self.op.out_types = list(types)
        self.elements: list[Element] = []
        self.ticks: set[int] = set()
        self.heartbeats: list[int] = []

    def feed(self, *items: Batch | int, port: int = 0) -> Driven:
        """Push items (an int is a heartbeat) and run the operator until it has read them."""
        for it in items:
            self.queues[port].push(Heartbeat(it) if isinstance(it, int) else it)
        while self.op.runnable():
            self.op.run(1 << 20)
        while (item := self.reader.get()) is not None:
            if isinstance(item, Heartbeat):
                self.heartbeats.append(item.ts)
            else:
                self.elements.extend(zip(item.ts.tolist(), item.rows(), item.w.tolist()))
                self.ticks.update(item.ticks.tolist())
        return self

    def inserted(self) -> list[tuple]:
        return [row for _, row, w in self.elements if w > 0]


def range_w(size: int = 1_000, where=None) -> Callable:
    return lambda n, i, o: RangeWindow(n, i, o, size, None, where)


WINDOWS = {
    "range": range_w(),
    "rows": lambda n, i, o: RowsWindow(n, i, o, 50, None),
    "partition": lambda n, i, o: PartitionRowsWindow(n, i, o, 3, (1,), None),
    "unbounded": lambda n, i, o: UnboundedWindow(n, i, o, None),
}


def stream(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """n tuple ids with non-decreasing timestamps (several tuples per instant)."""
    rng = np.random.default_rng(seed)
    return np.arange(n), np.cumsum(rng.integers(0, 3, n))


def in_batches(ids: np.ndarray, ts: np.ndarray, size: int) -> list[Batch]:
    return [batch(ids[k : k + size], ts[k : k + size]) for k in range(0, len(ids), size)]


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropped_fraction_is_close_to_p(p):
    n = 100_000
    ids, ts = stream(n)
    d = Driven(WINDOWS["unbounded"])
    d.op.shed(p, seed=3)
    d.feed(*in_batches(ids, ts, 10_000))
    assert d.op.shed_in == n
    assert d.op.shed_fraction == p
    assert abs(d.op.shed_dropped / n - p) < 0.01  # about 7 standard deviations
    assert len(d.inserted()) == n - d.op.shed_dropped


@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_no_shedding_leaves_results_identical(kind):
    ids, ts = stream(2_000)
    plain = Driven(WINDOWS[kind]).feed(*in_batches(ids, ts, 300), int(ts[-1]) + 5_000)
    zero = Driven(WINDOWS[kind])
    zero.op.shed(0.0, seed=9)
    zero.feed(*in_batches(ids, ts, 300), int(ts[-1]) + 5_000)
    assert zero.elements == plain.elements
    assert zero.ticks == plain.ticks and zero.heartbeats == plain.heartbeats
    assert zero.op.shed_in == zero.op.shed_dropped == 0
    assert zero.op.shed_fraction == 0.0


@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_shed_window_is_the_window_of_the_kept_tuples(kind):
    """Each position i is kept when u(seed, i) ≥ p; the window then behaves as if only the
    kept tuples had arrived."""
    ids, ts = stream(3_000)
    p, seed = 0.4, 5
    keep = sample_uniform(seed, np.arange(len(ids))) >= p
    shed = Driven(WINDOWS[kind])
    shed.op.shed(p, seed)
    shed.feed(*in_batches(ids, ts, 256), int(ts[-1]) + 5_000)
    only_kept = Driven(WINDOWS[kind])
    kept = batch(ids[keep], ts[keep])
    only_kept.feed(kept.with_ticks(np.unique(ts)), int(ts[-1]) + 5_000)
    assert Counter(shed.elements) == Counter(only_kept.elements)
    assert shed.op.shed_dropped == int((~keep).sum())


def test_same_seed_same_drops_whatever_the_batching():
    ids, ts = stream(5_000)

    def kept(seed: int, size: int) -> list[tuple]:
        d = Driven(WINDOWS["unbounded"])
        d.op.shed(0.5, seed)
        return d.feed(*in_batches(ids, ts, size)).inserted()

    first = kept(seed=7, size=1_000)
    assert kept(seed=7, size=1_000) == first
    assert kept(seed=7, size=37) == first  # positions count across batches
    assert kept(seed=8, size=1_000) != first


def test_shedding_comes_after_the_inner_where():
    ids, ts = stream(4_000)
    odd = Call("eq", (Call("mod", (ColRef(0, INT), Const(2, INT)), INT), Const(1, INT)), BOOL)
    d = Driven(lambda n, i, o: UnboundedWindow(n, i, o, odd))
    d.op.shed(0.5, seed=2)
    d.feed(*in_batches(ids, ts, 500))
    assert d.op.shed_in == 2_000  # only the tuples that pass the WHERE reach the decision
    passed = ids[ids % 2 == 1]
    expect = passed[sample_uniform(2, np.arange(len(passed))) >= 0.5]
    assert [r[0] for r in d.inserted()] == expect.tolist()


def test_shedding_can_start_and_stop_mid_stream():
    ids, ts = stream(3_000)
    parts = in_batches(ids, ts, 1_000)
    d = Driven(WINDOWS["unbounded"])
    d.feed(parts[0])
    d.op.shed(0.5, seed=4)
    d.feed(parts[1])
    d.op.shed(0.0)
    d.feed(parts[2])
    assert d.op.shed_in == 1_000
    got = {r[0] for r in d.inserted()}
    assert set(range(1_000)) <= got and set(range(2_000, 3_000)) <= got
    middle = np.arange(1_000, 2_000)
    assert {i for i in got if 1_000 <= i < 2_000} == set(
        middle[sample_uniform(4, middle) >= 0.5].tolist()
    )


@pytest.mark.parametrize("kind", sorted(WINDOWS))
def test_ticks_and_heartbeats_pass_when_every_tuple_is_dropped(kind):
    ids = np.arange(20)
    ts = np.arange(20) * 10
    keep = sample_uniform(0, ids) >= 0.999_999
    assert not keep.any()
    d = Driven(WINDOWS[kind])
    d.op.shed(0.999_999)
    d.feed(batch(ids[:10], ts[:10]), 95, batch(ids[10:], ts[10:]), 500)
    assert d.inserted() == []
    assert set(ts.tolist()) <= d.ticks
    assert d.heartbeats == [95, 500]


def test_windowed_join_advances_time_and_is_exact_for_the_kept_tuples():
    """S [Range 50] ⋈ T [Range 50] on the key, with shedding on S only."""
    rng = np.random.default_rng(0)
    n = 600
    inputs = [  # (ids, ts, keys) of S and T
        (np.arange(n) + 10_000 * port, np.sort(rng.integers(0, 1_000, n)), rng.integers(0, 5, n))
        for port in range(2)
    ]
    feeds = [Queue("S"), Queue("T")]
    windowed = [Queue("S [Range 50]"), Queue("T [Range 50]")]
    windows = [RangeWindow(f"w{p}", [feeds[p].reader()], windowed[p], 50, None, None) for p in range(2)]
    out = Queue("out")
    join = Join("join", [q.reader() for q in windowed], out, (ColRef(1, INT),), (ColRef(1, INT),), None)
    for op, types in [(windows[0], TYPES), (windows[1], TYPES), (join, TYPES + TYPES)]:
        op.out_types = list(types)
    windows[0].shed(0.5, seed=11)
    reader = out.reader()
    elements: list[Element] = []
    heartbeats: list[int] = []
    for lo in range(0, 1_000, 100):  # each input's tuples of 100 instants, then a heartbeat
        for q, (ids, ts, keys) in zip(feeds, inputs):
            sel = (ts >= lo) & (ts < lo + 100)
            q.push(batch(ids[sel], ts[sel], keys[sel]))
            q.push(Heartbeat(lo + 99))
        for op in [*windows, join]:
            while op.runnable():
                op.run(1 << 20)
        while (item := reader.get()) is not None:
            if isinstance(item, Heartbeat):
                heartbeats.append(item.ts)
            else:
                elements.extend(zip(item.ts.tolist(), item.rows(), item.w.tolist()))
    assert heartbeats == list(range(99, 1_000, 100))
    assert 0 < windows[0].shed_dropped < n and windows[1].shed_in == 0
    kept = sample_uniform(11, np.arange(n)) >= 0.5
    s = [(int(t), (int(i), int(k))) for i, t, k in zip(*inputs[0]) if kept[i]]
    t = [(int(t), (int(i), int(k))) for i, t, k in zip(*inputs[1])]
    for at in range(0, 1_000, 7):
        expect = Counter(
            sr + tr
            for (st, sr), (tt, tr) in product(s, t)
            if sr[1] == tr[1] and at - 50 <= st <= at and at - 50 <= tt <= at
        )
        assert relation_at(elements, at) == expect, at


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, float("nan")])
def test_fraction_outside_zero_one_is_refused(bad):
    d = Driven(WINDOWS["range"])
    with pytest.raises(ValueError, match="shedding fraction"):
        d.op.shed(bad)
    assert d.op.shed_fraction == 0.0


def test_every_window_kind_can_shed():
    for make in WINDOWS.values():
        d = Driven(make)
        assert isinstance(d.op, WindowOperator)
        d.op.shed(0.25, seed=1)
        assert d.op.shed_fraction == 0.25
