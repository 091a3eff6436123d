"""What a shared join's results are stamped with (engine/operators/shared_join.py), and so
what latency a sink measures for them: the stamp of the release that brought the later tuple
of the pair, under every policy. Releases that wait for the same unit under SWF or MQT are
merged into one job; their results must still carry each release's own stamp."""

from __future__ import annotations

import pytest

from cq_service.engine.operators.shared_join import RoutedBatch
from cq_service.engine.queues import Heartbeat
from tests.unit.engine.batches import make_batch
from tests.unit.engine.test_shared_join_order import FLAT, INT, WIDE, Scripted, _join


def _stamps(policy: str, costs: Scripted | None) -> dict[int, set[float]]:
    """Releases at instants 1 (stamped 10.0) and 2 (stamped 20.0) are both read before the
    join runs any queued unit, so under SWF and MQT they wait for the same unit and merge.
    Returns, per instant, the stamps of the join's output items holding its results."""
    ins, reader, op = _join(policy)
    if costs is not None:
        op._costs = costs
    for t, stamp in ((1, 10.0), (2, 20.0)):
        for q in ins:
            q.push(make_batch([INT], [(t, (7,))]), stamp)
            q.push(Heartbeat(t), stamp)
    op.run(1 << 20)  # reads both releases, then runs units (MQT: one call)
    while op.runnable():
        op.run(1 << 20)
    out: dict[int, set[float]] = {}
    while (item := reader.get()) is not None:
        if isinstance(item, RoutedBatch):
            for t in item.ts.tolist():
                out.setdefault(t, set()).add(reader.stamp)
    return out


@pytest.mark.parametrize(
    ("policy", "costs"), [("lwo", None), ("swf", None), ("mqt", WIDE), ("mqt", FLAT)]
)
def test_each_result_carries_the_stamp_of_its_own_release(
    policy: str, costs: Scripted | None
) -> None:
    # Before: a merged job's results all carried its oldest release's stamp, so instant 2's
    # pairs counted the 10 s release 1 had waited as their own latency (SWF and MQT only).
    assert _stamps(policy, costs) == {1: {10.0}, 2: {20.0}}


def test_releases_read_together_do_merge() -> None:
    """(The case above is the merged one: under MQT the two releases form one job.)"""
    ins, _, op = _join("mqt")
    op._costs = WIDE
    for t in (1, 2):
        for q in ins:
            q.push(make_batch([INT], [(t, (7,))]), float(t))
            q.push(Heartbeat(t), float(t))
    op.run(1 << 20)  # reads both, then one call: the narrowest partial window
    assert len(op._jobs) == 1 and op._jobs[0].releases == [(1, 1.0), (2, 2.0)]
