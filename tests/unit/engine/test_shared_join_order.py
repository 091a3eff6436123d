"""The order in which a shared join's policies run its units (engine/operators/shared_join.py):
one unit is one release's tuples over one partial window, and a route's results go out, with
a heartbeat of its own, once the units up to its own are done. The property test
(tests/property/test_shared_joins.py) checks the results; this checks that the policies
really order the work differently, and that releases waiting for the same unit merge."""

from __future__ import annotations

import pytest

from cq_service.cql.logical import ColRef
from cq_service.engine.operators.shared_join import RoutedBatch, SharedJoin
from cq_service.engine.operators.shared_join_costs import UnitCosts
from cq_service.engine.queues import Heartbeat, Queue, QueueReader
from cq_service.plan.shared_joins import SideWindow
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT = DataType.INT
# Partial windows of 10, 90 and 5 time units: MQT serves the third before the second.
ROUTES = tuple((SideWindow("range", w), SideWindow("range", w)) for w in (10, 100, 105))


def _join(policy: str) -> tuple[list[Queue], QueueReader, SharedJoin]:
    """Its two input queues, a reader of its output, and a shared join on key k over ROUTES."""
    ins = [Queue("left"), Queue("right")]
    out = Queue("out")
    reader = out.reader()
    key = (ColRef(0, INT, "k"),)
    op = SharedJoin("j", [q.reader() for q in ins], out, key, key, ROUTES, policy)
    op.out_types = [INT, INT]
    return ins, reader, op


class Scripted(UnitCosts):
    """Costs as scripted: a call of units [lo, hi) takes `fixed` + their widths, whatever
    was measured (tests/unit/engine/test_shared_join_costs.py checks the measuring)."""

    def __init__(self, n: int, fixed: float, widths: tuple[float, ...]):
        super().__init__(n)
        self.script = (fixed, widths)

    def cost(self, lo: int, hi: int, tuples: float) -> float:
        fixed, widths = self.script
        return fixed + sum(widths[lo:hi])


WIDE = Scripted(3, 0.0, (10.0, 90.0, 5.0))  # the paper's model: cost ∝ width
FLAT = Scripted(3, 2.0, (0.1, 0.1, 0.1))  # this engine's: a fixed cost per call


def _completions(policy: str, costs: UnitCosts | None = None) -> list[tuple[int, ...]]:
    """(first route, last route + 1, instant) of each completion the join sends, in order
    ((-1, instant): every route, a heartbeat): release 2 is read, the join runs its units
    until release 2 waits for the third, release 3 is read, and the join runs to the end.
    `costs`: MQT's measured costs, scripted."""
    ins, reader, op = _join(policy)
    if costs is not None:
        op._costs = costs

    def release(ts: tuple[int, int], upto: int) -> None:
        for q, t in zip(ins, ts, strict=True):
            q.push(make_batch([INT], [(t, (7,))]))
            q.push(Heartbeat(upto))
        op.run(1)

    release((1, 2), 2)
    while op._jobs and op._jobs[0].unit < 2:  # one unit at a time, in the policy's order
        job, _ = op._next()
        op._run_unit(job, job.unit + 1)
    release((3, 3), 3)
    while op.runnable():
        op.run(1 << 20)
    done, pairs = [], 0
    while (item := reader.get()) is not None:
        if isinstance(item, RoutedBatch):
            pairs += len(item)
            if item.complete is not None:
                done.append(item.complete)
        elif isinstance(item, Heartbeat):
            done.append((-1, item.ts))
    assert pairs  # the keys match: there are results to route
    return done


def test_lwo_sends_every_route_at_once() -> None:
    assert _completions("lwo") == [(-1, 2), (-1, 3)]


def test_swf_serves_the_smallest_partial_window_first() -> None:
    # Release 3 scans the first partial window on arrival and then the second before release
    # 2's third; waiting for the same unit, the two are then served as one call, whose output
    # is cut at release 2's last instant (each part with its release's stamp).
    assert _completions("swf") == [
        (0, 1, 2), (1, 2, 2), (0, 1, 3), (1, 2, 3), (2, 3, 2), (2, 3, 3), (-1, 3),
    ]


def test_mqt_with_costs_that_grow_with_width_serves_the_narrowest_partial_window_first() -> None:
    # The paper's Greedy: the third partial window (5 wide) goes before the first (10), so
    # release 2 completes before release 3 starts, one unit at a time.
    assert _completions("mqt", WIDE) == [
        (0, 1, 2), (1, 2, 2), (2, 3, 2), (-1, 2), (0, 1, 3), (1, 2, 3), (2, 3, 3), (-1, 3),
    ]


def test_mqt_with_a_fixed_cost_per_call_runs_units_together() -> None:
    # A call costs 2 whatever its width: each release runs whole in one call as it is read,
    # as under LWO.
    assert _completions("mqt", FLAT) == [(0, 3, 2), (-1, 2), (0, 3, 3), (-1, 3)]


def test_mqt_splits_a_release_where_the_later_scan_is_dear() -> None:
    # The third unit measured dear (50 against a fixed 1): release 3's first two units go
    # in one call, and their routes' results out, before the third's scan; measured cheap,
    # the release runs in one call.
    dear = _completions("mqt", Scripted(3, 1.0, (0.1, 0.1, 50.0)))
    assert dear[-3:] == [(0, 2, 3), (2, 3, 3), (-1, 3)]
    cheap = _completions("mqt", Scripted(3, 1.0, (0.1, 0.1, 0.1)))
    assert cheap[-2:] == [(0, 3, 3), (-1, 3)]


def test_mqt_yields_after_each_call() -> None:
    """Under MQT a run makes at most one call of queued units (after reading its inputs), so
    the executor moves a call's results on before the next call's scan."""
    ins, reader, op = _join("mqt")
    op._costs = Scripted(3, 1.0, (0.1, 0.1, 50.0))
    for q in ins:
        q.push(make_batch([INT], [(1, (7,))]))
        q.push(Heartbeat(1))
    op.run(1 << 20)
    sent = [i.complete for i in iter(reader.get, None) if isinstance(i, RoutedBatch)]
    assert sent == [(0, 2, 1)] and op._jobs
    op.run(1 << 20)
    sent = [i.complete for i in iter(reader.get, None) if isinstance(i, RoutedBatch)]
    assert sent == [(2, 3, 1)] and not op._jobs


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown shared join policy"):
        SharedJoin("j", [], Queue("out"), (), (), ROUTES, "fastest")


def _routes_seen(policy: str) -> tuple[list[list[tuple]], list[tuple[int, int]]]:
    """Per route, its elements (ts, weight, row) and instants in the order sent; and the
    completions. Two releases bring matching tuples, then three releases bring only time, in
    which the tuples leave the windows one route after another (retractions, no probe)."""
    ins, reader, op = _join(policy)
    for ts in (1, 2):
        for q in ins:
            q.push(make_batch([INT], [(ts, (7,))]))
            q.push(Heartbeat(ts))
        op.run(1 << 20)
    for upto in (20, 104, 300):  # past the 10-, 100- and 105-unit windows' exits
        for q in ins:
            q.push(Heartbeat(upto))
        while op.runnable():
            op.run(1 << 20)
    seen: list[list[tuple]] = [[] for _ in ROUTES]
    done = []
    while (item := reader.get()) is not None:
        if isinstance(item, RoutedBatch):
            for i in range(len(ROUTES)):
                b = item.for_route(i)
                rows = list(zip(*(c.to_pylist() for c in b.columns), strict=True))
                seen[i] += [("row", int(t), int(w), r) for t, w, r in zip(b.ts, b.w, rows)]
                seen[i] += [("tick", int(t)) for t in b.ticks]
            if item.complete is not None:
                done.append(item.complete)
        elif isinstance(item, Heartbeat):
            done.append((-1, item.ts))
    return seen, done


@pytest.mark.parametrize("policy", ["swf", "mqt"])
def test_releases_of_time_alone_retract_for_every_route_at_once(policy: str) -> None:
    """A release without tuples, with no older release waiting, sends every route's
    retractions in one batch (as LWO does); each route sees what it sees under LWO."""
    lwo, _ = _routes_seen("lwo")
    seen, done = _routes_seen(policy)
    assert seen == lwo
    assert all(any(e[0] == "row" and e[2] < 0 for e in route) for route in lwo)  # retractions
    assert done[-3:] == [(-1, 20), (-1, 104), (-1, 300)]  # whole releases: no per-route sends


@pytest.mark.parametrize("policy", ["swf", "mqt"])
def test_the_state_counts_the_results_held_between_units(policy: str) -> None:
    """`state_size` (sampled after every step) keeps a running count of the pairs a release
    holds until their route's unit: it equals a count of them after every unit, through
    releases that merge (MQT with the paper's costs, so that it splits its work)."""
    ins, _, op = _join(policy)
    if policy == "mqt":
        op._costs = WIDE

    def held() -> tuple[int, int]:
        rows = sum(len(s.ts) for s in op._stores)
        nbytes = sum(s.nbytes() for s in op._stores)
        for job in op._jobs:
            for left, right, ts, _, _ in job.parts:
                rows += len(ts)
                nbytes += sum(c.nbytes for c in (*left, *right)) + 3 * ts.nbytes
        return rows, nbytes

    checked = 0
    for upto in (2, 3, 4):
        for q in ins:
            q.push(make_batch([INT], [(upto - 1, (7,)), (upto, (7,))]))
            q.push(Heartbeat(upto))
        op.run(1)
        if op._jobs:
            op._run_unit(*op._next())
        assert op.state_size() == held()
        checked += any(job.parts for job in op._jobs)
    while op.runnable():
        op.run(1)
        assert op.state_size() == held()
    assert checked  # results were held between units
    assert not op._jobs


def _per_route(policy: str, costs: UnitCosts | None) -> tuple[list[list[tuple]], set]:
    """Per route, its elements (ts, weight, row) and instants in the order sent, and the
    (lo, hi) ranges of the calls: eight releases of matching tuples, each followed by at
    most one call, so a backlog builds and calls of several units come about."""
    ins, reader, op = _join(policy)
    if costs is not None:
        op._costs = costs
    for upto in range(1, 9):
        for port, q in enumerate(ins):
            rows = [(upto, (7,)), (upto, (8 if upto % 3 else 7,))][: 1 + (upto + port) % 2]
            q.push(make_batch([INT], rows))
            q.push(Heartbeat(upto))
        op.run(1)
        if op._jobs:
            op._run_unit(*op._next())
    for q in ins:
        q.push(Heartbeat(400))
    while op.runnable():
        op.run(1 << 20)
    seen: list[list[tuple]] = [[] for _ in ROUTES]
    calls = set()
    while (item := reader.get()) is not None:
        if isinstance(item, RoutedBatch):
            for i in range(len(ROUTES)):
                b = item.for_route(i)
                rows = list(zip(*(c.to_pylist() for c in b.columns), strict=True))
                seen[i] += [("row", int(t), int(w), r) for t, w, r in zip(b.ts, b.w, rows)]
                seen[i] += [("tick", int(t)) for t in b.ticks]
            if item.complete is not None:
                calls.add(item.complete[:2])
    return seen, calls


@pytest.mark.parametrize("costs", [FLAT, WIDE, Scripted(3, 1.0, (1.0, 9.0, 1.0))])
def test_mqt_calls_of_several_units_give_each_route_what_lwo_gives(costs: UnitCosts) -> None:
    """Each route gets the same elements and instants as under LWO, in timestamp order (the
    order within an instant is a bag's, DESIGN §4)."""
    lwo, _ = _per_route("lwo", None)
    seen, calls = _per_route("mqt", costs)
    for route in seen:
        ts = [e[1] for e in route if e[0] == "row"]
        assert ts == sorted(ts)
    assert [sorted(r, key=lambda e: (e[1], repr(e))) for r in seen] == [
        sorted(r, key=lambda e: (e[1], repr(e))) for r in lwo
    ]
    assert all(any(e[0] == "row" for e in route) for route in lwo)
    if costs is FLAT:
        assert any(hi - lo > 1 for lo, hi in calls)  # calls of several units were made


def test_a_call_of_every_unit_probes_as_lwo(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call of all the units (MQT's usual call) reads the largest window with one whole
    lookup, as LWO does: the partial windows' union is that window, and the route masks cut
    it out. (It looked up per-probe position ranges, with a binary search per key bucket and
    run: on Mostly-Small about 44% more interpreter calls per release than LWO's probe.)"""
    from cq_service.engine.operators.join_synopsis import JoinSide

    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("a partial-window lookup for a call of every unit")

    monkeypatch.setattr(JoinSide, "lookup_within", refuse)
    assert _completions("mqt", FLAT) == [(0, 3, 2), (-1, 2), (0, 3, 3), (-1, 3)]


def test_a_partial_window_lookup_reads_whole_buckets_only_where_they_are_mostly_inside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`JoinSide.lookup_within` bisects each key's rows to the ranges when they cover a
    small part of the runs they touch (a small window's unit over a long preload), and
    reads the buckets whole and filters when they cover most of them (fewer array calls)."""
    import numpy as np
    import pyarrow as pa

    from cq_service.engine.operators.join_synopsis import JoinSide

    side = JoinSide()
    keys = pa.array(np.arange(1000) % 10)
    side.append_rows([keys], [keys])
    probe = [pa.array([3, 4])]
    whole = []
    real = JoinSide.lookup
    monkeypatch.setattr(JoinSide, "lookup", lambda s, *a: whole.append(a) or real(s, *a))
    _, j = side.lookup_within(probe, np.array([990, 990]), np.array([1000, 1000]))
    assert not whole and sorted(j.tolist()) == [993, 994]
    _, j = side.lookup_within(probe, np.array([100, 100]), np.array([1000, 1000]))
    assert whole and len(j) == 180
