"""StreaMon (engine/streamon.py): a flagged re-optimizer is re-optimized at the next poll and
only then; the executor registers its operators' watches and drops those of removed operators;
the listing `cq explain --live` prints."""

from __future__ import annotations

import numpy as np

from cq_service.adaptive.filter_order import AGreedy
from cq_service.cql.logical import Call, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.executor import Executor
from cq_service.engine.filter_order import StaticOrder
from cq_service.engine.operators.select import Select
from cq_service.engine.queues import Queue
from cq_service.engine.streamon import ReOptimizer, StreaMon, Watch
from cq_service.stats import render_streamon
from cq_service.types import DataType

INT = DataType.INT
BOOL = DataType.BOOL


class Toggle:
    """A re-optimizer whose plan is a flag it flips at every re-optimization."""

    kind = "toggle"
    watches = "nothing"

    def __init__(self) -> None:
        self.runs = 0
        self.due = False

    def statistics(self) -> dict[str, object]:
        return {"runs": self.runs}

    def significant(self) -> bool:
        return self.due

    def reoptimize(self) -> bool:
        self.due = False
        self.runs += 1
        return self.runs % 2 == 1  # the plan changes at every other run


def test_a_flagged_reoptimizer_runs_at_the_next_poll_and_only_then():
    monitor = StreaMon()
    r = Toggle()
    changed: list[int] = []
    watch = Watch(r, "op", on_change=lambda: changed.append(r.runs))
    monitor.register(watch)
    assert isinstance(r, ReOptimizer)
    assert monitor.poll() == 0 and r.runs == 0  # nothing flagged: nothing runs
    watch.flag()
    watch.flag()  # flagged twice before a poll: one re-optimization
    assert r.runs == 0  # not before the poll
    assert monitor.poll() == 1 and r.runs == 1 and changed == [1]
    assert monitor.poll() == 0 and r.runs == 1  # not again without a new flag
    watch.flag()
    assert monitor.poll() == 0 and r.runs == 2 and changed == [1]  # ran; plan unchanged
    assert (watch.triggers, watch.changes) == (2, 1)


def _registered() -> tuple[StreaMon, Toggle, Watch]:
    """A registry with one Toggle re-optimizer's watch in it, flagged."""
    monitor, r = StreaMon(), Toggle()
    watch = Watch(r, "op")
    monitor.register(watch)
    watch.flag()
    return monitor, r, watch


def test_the_owner_may_poll_its_own_watch_first():
    """A watch polled by its owner is not re-optimized again by the registry's poll."""
    monitor, r, watch = _registered()
    assert watch.poll() and r.runs == 1
    assert monitor.poll() == 0 and r.runs == 1


def test_an_unregistered_watch_is_not_polled():
    monitor, r, watch = _registered()
    monitor.unregister(watch)
    assert monitor.poll() == 0 and r.runs == 0 and len(monitor) == 0
    watch.flag()  # flagging no longer reaches the registry
    assert monitor.poll() == 0 and r.runs == 0


def _select(name: str, orderer) -> tuple[Select, Queue]:
    lt = Call("lt", (ColRef(0, INT), Const(50, INT)), BOOL)
    gt = Call("gt", (ColRef(0, INT), Const(10, INT)), BOOL)
    pred = Call("and", (lt, gt), BOOL)
    q = Queue(f"{name}-in")
    out = Queue(f"{name}-out")
    op = Select(name, [q.reader()], out, pred, orderer)
    op.out_types = [INT]
    return op, q


def test_the_executor_registers_selections_and_drops_removed_ones():
    adaptive, _ = _select("#a", lambda n: AGreedy(n, seed=0))
    static, _ = _select("#s", StaticOrder)
    ex = Executor([adaptive, static], [])
    assert static.watches() == []  # the written order re-optimizes nothing
    assert [s.owner for s in ex.streamon.statuses()] == ["#a"]
    watch = adaptive.watches()[0]
    ex.replace_plan([static], [])  # the adaptive selection removed
    assert len(ex.streamon) == 0
    watch.flag()
    assert ex.streamon.poll() == 0 and watch.triggers == 0
    ex.replace_plan([adaptive, static], [])
    assert len(ex.streamon) == 1


class Eager(AGreedy):
    """A-Greedy that finds every slice significant."""

    def significant(self) -> bool:
        return True


def test_the_executor_polls_after_a_step():
    """A slice flags the watch; the executor re-optimizes it right after the step."""
    op, q = _select("#a", lambda n: Eager(n, seed=0))
    ex = Executor([op], [q])
    watch = op.watches()[0]
    n = 100
    ticks = np.zeros(n, np.int64)
    q.push(Batch.from_rows([(v,) for v in range(n)], ticks, np.ones(n, np.int64), [INT]))
    ex.step(op)
    assert watch.triggers == 1 and not watch.flagged


def test_the_listing_shows_kind_triggers_and_what_is_watched():
    op, _ = _select("#sel1", lambda n: AGreedy(n, seed=0))
    ex = Executor([op], [])
    watch = op.watches()[0]
    watch.flag()
    ex.streamon.poll()
    [st] = ex.streamon.statuses()
    assert (st.owner, st.kind, st.triggers, st.changes) == ("#sel1", "filter order: a-greedy", 1, 0)
    assert "2 conjuncts" in st.watches
    text = render_streamon(ex.streamon.statuses())
    line = text.splitlines()[-1].split()
    assert line[:4] == ["#sel1", "filter", "order:", "a-greedy"] and line[4:6] == ["1", "0"]
    assert render_streamon([]) == "StreaMon re-optimizers: none"
