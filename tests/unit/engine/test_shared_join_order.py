"""The order in which a shared join's policies run its units (engine/operators/shared_join.py):
one unit is one release's tuples over one partial window, and a route's results go out, with
a heartbeat of its own, once the units up to its own are done. The property test
(tests/property/test_shared_joins.py) checks the results; this checks that the policies
really order the work differently."""

from __future__ import annotations

import pytest

from cq_service.cql.logical import ColRef
from cq_service.engine.operators.shared_join import RoutedBatch, SharedJoin
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.plan.shared_joins import SideWindow
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT = DataType.INT
# Partial windows of 10, 90 and 5 time units: MQT serves the third before the second.
ROUTES = tuple((SideWindow("range", w), SideWindow("range", w)) for w in (10, 100, 105))


def _completions(policy: str) -> list[tuple[int, int]]:
    """(route, instant) of each route completion the join sends, in order, for two releases
    read in one run."""
    ins = [Queue("left"), Queue("right")]
    out = Queue("out")
    reader = out.reader()
    key = (ColRef(0, INT, "k"),)
    op = SharedJoin("j", [q.reader() for q in ins], out, key, key, ROUTES, policy)
    op.out_types = [INT, INT]
    for port, q in enumerate(ins):
        q.push(make_batch([INT], [(1, (7,))] if port == 0 else [(2, (7,))]))
        q.push(Heartbeat(2))
        q.push(make_batch([INT], [(3, (7,))]))
        q.push(Heartbeat(3))
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
    # Both releases scan the first partial window on arrival; then the lowest queue first.
    assert _completions("swf") == [
        (0, 2), (0, 3), (1, 2), (1, 3), (2, 2), (-1, 2), (2, 3), (-1, 3),
    ]


def test_mqt_serves_the_narrowest_partial_window_first() -> None:
    # Release 2's first unit waits in a queue; the narrow third window (5) goes before the
    # wide second (90), so release 2 completes route 2 before release 3 reaches route 1.
    assert _completions("mqt") == [
        (0, 2), (0, 3), (1, 2), (2, 2), (-1, 2), (1, 3), (2, 3), (-1, 3),
    ]


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown shared join policy"):
        SharedJoin("j", [], Queue("out"), (), (), ROUTES, "fastest")
